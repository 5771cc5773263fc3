"""Inception-v3 as torchvision lays it out (`torchvision.models.inception_v3(aux_logits=False,
init_weights=False)`, no input transform), written out here because torchvision is not a dependency:
the same modules, kernel shapes, paddings and branch order, so the parameter count (23,834,568
without the auxiliary classifier; torchvision's 27,161,264 includes it) and the graph torch.export
makes are torchvision's. Its many-branch blocks end in a `torch.cat` each: a memory planner's test of
cat fusion and of where the arena meets its lower bound. Random weights only.

`inception_v3(size)` is the ZooModel (`vision`'s recipe); `inception_v3_299` the ImageNet input, as a
factory the CLI takes (`memplan plan experiments/zoo/models/inception.py:inception_v3_299`)."""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from memplan.experiments.zoo.models.common import ZooModel
from memplan.experiments.zoo.models.vision import cnn

Kernel = int | tuple[int, int]


class BasicConv2d(nn.Module):
    """Convolution without bias, batch norm (eps 0.001), ReLU: torchvision's building block."""

    def __init__(self, cin: int, cout: int, kernel: Kernel, stride: int = 1, padding: Kernel = 0) -> None:
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, kernel, stride, padding, bias=False)
        self.bn = nn.BatchNorm2d(cout, eps=0.001)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.relu(self.bn(self.conv(x)))


def _chain(*convs: BasicConv2d) -> nn.Sequential:
    return nn.Sequential(*convs)


def _row(cin: int, cout: int, width: int) -> BasicConv2d:
    """A 1 x `width` convolution, padded to keep the size."""
    return BasicConv2d(cin, cout, (1, width), padding=(0, width // 2))


def _column(cin: int, cout: int, height: int) -> BasicConv2d:
    """A `height` x 1 convolution, padded to keep the size."""
    return BasicConv2d(cin, cout, (height, 1), padding=(height // 2, 0))


def _pooled(x: torch.Tensor, conv: BasicConv2d) -> torch.Tensor:
    return conv(F.avg_pool2d(x, kernel_size=3, stride=1, padding=1))


class InceptionA(nn.Module):
    def __init__(self, cin: int, pool_features: int) -> None:
        super().__init__()
        self.branch1x1 = BasicConv2d(cin, 64, 1)
        self.branch5x5 = _chain(BasicConv2d(cin, 48, 1), BasicConv2d(48, 64, 5, padding=2))
        self.branch3x3dbl = _chain(
            BasicConv2d(cin, 64, 1), BasicConv2d(64, 96, 3, padding=1), BasicConv2d(96, 96, 3, padding=1)
        )
        self.branch_pool = BasicConv2d(cin, pool_features, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        branches = [self.branch1x1(x), self.branch5x5(x), self.branch3x3dbl(x), _pooled(x, self.branch_pool)]
        return torch.cat(branches, 1)


class InceptionB(nn.Module):
    def __init__(self, cin: int) -> None:
        super().__init__()
        self.branch3x3 = BasicConv2d(cin, 384, 3, stride=2)
        self.branch3x3dbl = _chain(
            BasicConv2d(cin, 64, 1), BasicConv2d(64, 96, 3, padding=1), BasicConv2d(96, 96, 3, stride=2)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        branches = [self.branch3x3(x), self.branch3x3dbl(x), F.max_pool2d(x, kernel_size=3, stride=2)]
        return torch.cat(branches, 1)


class InceptionC(nn.Module):
    def __init__(self, cin: int, channels_7x7: int) -> None:
        super().__init__()
        c7 = channels_7x7
        self.branch1x1 = BasicConv2d(cin, 192, 1)
        self.branch7x7 = _chain(BasicConv2d(cin, c7, 1), _row(c7, c7, 7), _column(c7, 192, 7))
        self.branch7x7dbl = _chain(
            BasicConv2d(cin, c7, 1), _column(c7, c7, 7), _row(c7, c7, 7), _column(c7, c7, 7), _row(c7, 192, 7)
        )
        self.branch_pool = BasicConv2d(cin, 192, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        branches = [self.branch1x1(x), self.branch7x7(x), self.branch7x7dbl(x), _pooled(x, self.branch_pool)]
        return torch.cat(branches, 1)


class InceptionD(nn.Module):
    def __init__(self, cin: int) -> None:
        super().__init__()
        self.branch3x3 = _chain(BasicConv2d(cin, 192, 1), BasicConv2d(192, 320, 3, stride=2))
        self.branch7x7x3 = _chain(
            BasicConv2d(cin, 192, 1),
            _row(192, 192, 7),
            _column(192, 192, 7),
            BasicConv2d(192, 192, 3, stride=2),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        branches = [self.branch3x3(x), self.branch7x7x3(x), F.max_pool2d(x, kernel_size=3, stride=2)]
        return torch.cat(branches, 1)


class InceptionE(nn.Module):
    def __init__(self, cin: int) -> None:
        super().__init__()
        self.branch1x1 = BasicConv2d(cin, 320, 1)
        self.branch3x3_1 = BasicConv2d(cin, 384, 1)
        self.branch3x3_2a, self.branch3x3_2b = _row(384, 384, 3), _column(384, 384, 3)
        self.branch3x3dbl_1 = BasicConv2d(cin, 448, 1)
        self.branch3x3dbl_2 = BasicConv2d(448, 384, 3, padding=1)
        self.branch3x3dbl_3a, self.branch3x3dbl_3b = _row(384, 384, 3), _column(384, 384, 3)
        self.branch_pool = BasicConv2d(cin, 192, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # torchvision's order of the branches
        b1 = self.branch1x1(x)
        b3 = self.branch3x3_1(x)
        b3 = torch.cat([self.branch3x3_2a(b3), self.branch3x3_2b(b3)], 1)
        dbl = self.branch3x3dbl_2(self.branch3x3dbl_1(x))
        dbl = torch.cat([self.branch3x3dbl_3a(dbl), self.branch3x3dbl_3b(dbl)], 1)
        return torch.cat([b1, b3, dbl, _pooled(x, self.branch_pool)], 1)


class InceptionV3(nn.Module):
    """torchvision's Inception3 without the auxiliary classifier (what `eval()` runs anyway)."""

    def __init__(self, classes: int = 1000) -> None:
        super().__init__()
        self.stem = nn.Sequential(
            BasicConv2d(3, 32, 3, stride=2),
            BasicConv2d(32, 32, 3),
            BasicConv2d(32, 64, 3, padding=1),
            nn.MaxPool2d(3, stride=2),
            BasicConv2d(64, 80, 1),
            BasicConv2d(80, 192, 3),
            nn.MaxPool2d(3, stride=2),
        )
        self.mixed = nn.Sequential(
            InceptionA(192, 32),
            InceptionA(256, 64),
            InceptionA(288, 64),
            InceptionB(288),
            InceptionC(768, 128),
            InceptionC(768, 160),
            InceptionC(768, 160),
            InceptionC(768, 192),
            InceptionD(768),
            InceptionE(1280),
            InceptionE(2048),
        )
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(2048, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # dropout: none in eval
        return self.fc(torch.flatten(self.avgpool(self.mixed(self.stem(x))), 1))


def inception_v3(size: int = 299, partitioner: str | None = None) -> ZooModel:
    """Inception-v3 on one 1x3x`size`x`size` image (75 is the smallest its strides allow)."""
    description = f"Inception-v3 (torchvision's layout, no aux logits), 1x3x{size}x{size}"
    return cnn(f"inception_v3_{size}", description, InceptionV3, size, partitioner)


def inception_v3_299() -> ZooModel:
    """At ImageNet's 299x299: the factory `memplan plan FILE.py:inception_v3_299` takes."""
    return inception_v3(299)
