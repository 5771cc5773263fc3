"""Convolutional programs: a U-Net of Inception blocks (cats at every stage) and an int8 CNN quantized
with XNNPACK's quantizer."""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from memplan.experiments.zoo.models.common import ZooModel, randomize_batchnorm, seeded, single_method

# ---------------------------------------------------------------- (4) U-Net of Inception blocks


def _conv(cin: int, cout: int, kernel: int = 1) -> nn.Sequential:
    return nn.Sequential(nn.Conv2d(cin, cout, kernel, padding=kernel // 2), nn.BatchNorm2d(cout), nn.ReLU())


class Inception(nn.Module):
    """Four branches (1x1; 1x1-3x3; 1x1-3x3-3x3; pool-1x1) concatenated along channels."""

    def __init__(self, cin: int, cout: int) -> None:
        super().__init__()
        b = cout // 4
        self.one = _conv(cin, b)
        self.three = nn.Sequential(_conv(cin, b), _conv(b, b, 3))
        self.five = nn.Sequential(_conv(cin, b), _conv(b, b, 3), _conv(b, b, 3))
        self.pool = nn.Sequential(nn.MaxPool2d(3, 1, 1), _conv(cin, b))

    def forward(self, x):
        return torch.cat([self.one(x), self.three(x), self.five(x), self.pool(x)], 1)


class InceptionUNet(nn.Module):
    """Two levels down, two up; every stage an Inception block, skips concatenated."""

    def __init__(self, base: int = 16) -> None:
        super().__init__()
        c1, c2, c3 = base, 2 * base, 4 * base
        self.enc1, self.enc2, self.mid = Inception(3, c1), Inception(c1, c2), Inception(c2, c3)
        self.up2, self.dec2 = nn.ConvTranspose2d(c3, c2, 2, 2), Inception(2 * c2, c2)
        self.up1, self.dec1 = nn.ConvTranspose2d(c2, c1, 2, 2), Inception(2 * c1, c1)
        self.head = nn.Conv2d(c1, 2, 1)

    def forward(self, x):
        e1 = self.enc1(x)
        e2 = self.enc2(F.max_pool2d(e1, 2))
        m = self.mid(F.max_pool2d(e2, 2))
        d2 = self.dec2(torch.cat([self.up2(m), e2], 1))
        return self.head(self.dec1(torch.cat([self.up1(d2), e1], 1)))


def inception_unet() -> ZooModel:
    with seeded():
        module = randomize_batchnorm(InceptionUNet())
        return single_method(
            "inception_unet", "U-Net of Inception blocks", module, lambda: (torch.randn(1, 3, 32, 32),)
        )


# ---------------------------------------------------------------- (10) int8 CNN


class SmallCNN(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 16, 3, padding=1),
            nn.BatchNorm2d(16),
            nn.ReLU(),
            nn.Conv2d(16, 32, 3, stride=2, padding=1),
            nn.BatchNorm2d(32),
            nn.ReLU(),
            nn.Conv2d(32, 32, 3, padding=1),
            nn.ReLU(),
            nn.AdaptiveAvgPool2d(1),
        )
        self.head = nn.Linear(32, 10)

    def forward(self, x):
        return self.head(self.features(x).flatten(1))


def int8_cnn() -> ZooModel:
    """A small CNN quantized to int8 with XNNPACK's quantizer (pt2e: prepare, calibrate, convert) and
    lowered with XNNPACK. The converted module is the reference; the check compares with the stock
    program, as `memplan plan --check` does (int8 rounding differs from the reference)."""
    from executorch.backends.xnnpack.quantizer.xnnpack_quantizer import (
        XNNPACKQuantizer,
        get_symmetric_quantization_config,
    )
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

    with seeded():
        module = randomize_batchnorm(SmallCNN()).eval()
        images = lambda: (torch.randn(1, 3, 32, 32),)  # noqa: E731
        example = images()
        quantizer = XNNPACKQuantizer().set_global(get_symmetric_quantization_config(is_per_channel=True))
        prepared = prepare_pt2e(torch.export.export(module, example, strict=False).module(), quantizer)
        for _ in range(4):
            prepared(*images())
        converted = convert_pt2e(prepared)
        calls = [("forward", example)] + [("forward", images()) for _ in range(2)]
    return ZooModel(
        "int8_cnn_xnnpack",
        "int8 CNN, XNNPACK quantizer (pt2e), XNNPACK",
        {"forward": (converted, example)},  # a GraphModule: .eval() is refused, it is traced in eval
        calls,
        partitioner="xnnpack",
        tags=("quantized",),
    )
