"""ImageNet-style CNNs written out here (torchvision is not a dependency), random weights: MobileNetV2
at any width, MobileNetV3-Large and -Small (hardswish, squeeze-excite; torchvision's 5,483,032 and
2,542,856 parameters), MnasNet-B1 (torchvision's mnasnet1_0 layout), ResNet-18, and the zoo's U-Net at
a chosen size. They are the tiling benchmark's models (experiments/bench/tiled_cnns.py); not in the
zoo catalog, whose every entry is lowered by the default test run."""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

from memplan.errors import UsageError
from memplan.experiments.zoo.models.common import (
    ZooModel,
    randomize_batchnorm,
    seeded,
    single_method,
    zoo_recipe,
)
from memplan.experiments.zoo.models.concat import UNet


def _divisible(value: float, divisor: int = 8) -> int:
    """torchvision's _make_divisible: the nearest multiple of `divisor`, never 10 % below `value`."""
    rounded = max(divisor, int(value + divisor / 2) // divisor * divisor)
    return rounded + divisor if rounded < 0.9 * value else rounded


def _conv_bn(cin: int, cout: int, kernel: int, stride: int = 1, groups: int = 1, act: type | None = nn.ReLU6):
    layers: list[nn.Module] = [
        nn.Conv2d(cin, cout, kernel, stride, kernel // 2, groups=groups, bias=False),
        nn.BatchNorm2d(cout),
    ]
    if act is not None:
        layers.append(act())
    return nn.Sequential(*layers)


def _pooled(x: torch.Tensor) -> torch.Tensor:
    """torchvision's head (MobileNetV2/V3, ResNet): adaptive average pooling to 1x1, then flatten.
    Exported as a 4-D keep-dim mean, which XNNPACK runs as an int8 global average pool; a
    `mean((2, 3))` without keepdim it refuses, and the int8 program then holds the last feature map
    dequantized to float (MobileNetV2-0.35: 128,000 B, above the tiled peak)."""
    return torch.flatten(nn.functional.adaptive_avg_pool2d(x, 1), 1)


class InvertedResidual(nn.Module):
    """Expand 1x1, depthwise kxk, project 1x1; a residual add when shapes allow."""

    def __init__(self, cin: int, cout: int, stride: int, expand: int, kernel: int = 3, act=nn.ReLU6) -> None:
        super().__init__()
        hidden = cin * expand
        layers = [] if expand == 1 else [_conv_bn(cin, hidden, 1, act=act)]
        layers += [
            _conv_bn(hidden, hidden, kernel, stride, groups=hidden, act=act),
            _conv_bn(hidden, cout, 1, act=None),
        ]
        self.body = nn.Sequential(*layers)
        self.residual = stride == 1 and cin == cout

    def forward(self, x):
        return x + self.body(x) if self.residual else self.body(x)


class MobileNetV2(nn.Module):
    SETTINGS = (
        (1, 16, 1, 1),
        (6, 24, 2, 2),
        (6, 32, 3, 2),
        (6, 64, 4, 2),
        (6, 96, 3, 1),
        (6, 160, 3, 2),
        (6, 320, 1, 1),
    )

    def __init__(self, width: float = 1.0, classes: int = 1000) -> None:
        super().__init__()
        cin = _divisible(32 * width)
        last = _divisible(1280 * max(1.0, width))
        layers: list[nn.Module] = [_conv_bn(3, cin, 3, 2)]
        for t, c, n, s in self.SETTINGS:
            cout = _divisible(c * width)
            for i in range(n):
                layers.append(InvertedResidual(cin, cout, s if i == 0 else 1, t))
                cin = cout
        layers.append(_conv_bn(cin, last, 1))
        self.features = nn.Sequential(*layers)
        self.classifier = nn.Linear(last, classes)

    def forward(self, x):
        return self.classifier(_pooled(self.features(x)))


class MnasNet(nn.Module):
    """MnasNet-B1 at depth multiplier 1.0 (torchvision's mnasnet1_0), ReLU, no squeeze-excite."""

    STACKS = (
        (24, 3, 2, 3, 3),
        (40, 5, 2, 3, 3),
        (80, 5, 2, 6, 3),
        (96, 3, 1, 6, 2),
        (192, 5, 2, 6, 4),
        (320, 3, 1, 6, 1),
    )

    def __init__(self, classes: int = 1000) -> None:
        super().__init__()
        layers: list[nn.Module] = [
            _conv_bn(3, 32, 3, 2, act=nn.ReLU),
            _conv_bn(32, 32, 3, 1, groups=32, act=nn.ReLU),
            _conv_bn(32, 16, 1, act=None),
        ]
        cin = 16
        for cout, kernel, stride, expand, repeats in self.STACKS:
            for i in range(repeats):
                layers.append(
                    InvertedResidual(cin, cout, stride if i == 0 else 1, expand, kernel, act=nn.ReLU)
                )
                cin = cout
        layers.append(_conv_bn(cin, 1280, 1, act=nn.ReLU))
        self.features = nn.Sequential(*layers)
        self.classifier = nn.Linear(1280, classes)

    def forward(self, x):
        return self.classifier(self.features(x).mean((2, 3)))


class SqueezeExcite(nn.Module):
    """torchvision's SqueezeExcitation as MobileNetV3 uses it: mean, 1x1, ReLU, 1x1, hardsigmoid, scale."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        squeezed = _divisible(channels // 4)
        self.fc1, self.fc2 = nn.Conv2d(channels, squeezed, 1), nn.Conv2d(squeezed, channels, 1)

    def forward(self, x):
        scale = nn.functional.hardsigmoid(self.fc2(torch.relu(self.fc1(x.mean((2, 3), keepdim=True)))))
        return x * scale


class V3Block(nn.Module):
    """MobileNetV3's bneck: expand 1x1 (when widened), depthwise kxk, squeeze-excite, project 1x1."""

    def __init__(
        self, cin: int, kernel: int, hidden: int, cout: int, se: bool, act: type, stride: int
    ) -> None:
        super().__init__()
        layers = [] if hidden == cin else [_conv_bn(cin, hidden, 1, act=act)]
        layers.append(_conv_bn(hidden, hidden, kernel, stride, groups=hidden, act=act))
        if se:
            layers.append(SqueezeExcite(hidden))
        layers.append(_conv_bn(hidden, cout, 1, act=None))
        self.body = nn.Sequential(*layers)
        self.residual = stride == 1 and cin == cout

    def forward(self, x):
        return x + self.body(x) if self.residual else self.body(x)


HS, RE = nn.Hardswish, nn.ReLU

# torchvision's bneck tables: (in, kernel, expanded, out, squeeze-excite, activation, stride)
V3_LARGE = (
    (16, 3, 16, 16, False, RE, 1),
    (16, 3, 64, 24, False, RE, 2),
    (24, 3, 72, 24, False, RE, 1),
    (24, 5, 72, 40, True, RE, 2),
    (40, 5, 120, 40, True, RE, 1),
    (40, 5, 120, 40, True, RE, 1),
    (40, 3, 240, 80, False, HS, 2),
    (80, 3, 200, 80, False, HS, 1),
    (80, 3, 184, 80, False, HS, 1),
    (80, 3, 184, 80, False, HS, 1),
    (80, 3, 480, 112, True, HS, 1),
    (112, 3, 672, 112, True, HS, 1),
    (112, 5, 672, 160, True, HS, 2),
    (160, 5, 960, 160, True, HS, 1),
    (160, 5, 960, 160, True, HS, 1),
)
V3_SMALL = (
    (16, 3, 16, 16, True, RE, 2),
    (16, 3, 72, 24, False, RE, 2),
    (24, 3, 88, 24, False, RE, 1),
    (24, 5, 96, 40, True, HS, 2),
    (40, 5, 240, 40, True, HS, 1),
    (40, 5, 240, 40, True, HS, 1),
    (40, 5, 120, 48, True, HS, 1),
    (48, 5, 144, 48, True, HS, 1),
    (48, 5, 288, 96, True, HS, 2),
    (96, 5, 576, 96, True, HS, 1),
    (96, 5, 576, 96, True, HS, 1),
)


class MobileNetV3(nn.Module):
    """torchvision's mobilenet_v3_large / _small layout: a hardswish stem, `settings`, a 1x1 to
    6x the last width (hardswish), and a hardswish MLP head of `head` features."""

    def __init__(self, settings: tuple = V3_LARGE, head: int = 1280, classes: int = 1000) -> None:
        super().__init__()
        last = 6 * settings[-1][3]
        layers: list[nn.Module] = [_conv_bn(3, 16, 3, 2, act=HS)]
        layers += [V3Block(*setting) for setting in settings]
        layers.append(_conv_bn(settings[-1][3], last, 1, act=HS))
        self.features = nn.Sequential(*layers)
        self.classifier = nn.Sequential(nn.Linear(last, head), HS(), nn.Linear(head, classes))

    def forward(self, x):
        return self.classifier(_pooled(self.features(x)))


class BasicBlock(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int) -> None:
        super().__init__()
        self.body = nn.Sequential(
            _conv_bn(cin, cout, 3, stride, act=nn.ReLU), _conv_bn(cout, cout, 3, act=None)
        )
        self.down = None if stride == 1 and cin == cout else _conv_bn(cin, cout, 1, stride, act=None)

    def forward(self, x):
        return torch.relu(self.body(x) + (x if self.down is None else self.down(x)))


class ResNet18(nn.Module):
    def __init__(self, classes: int = 1000) -> None:
        super().__init__()
        layers: list[nn.Module] = [_conv_bn(3, 64, 7, 2, act=nn.ReLU), nn.MaxPool2d(3, 2, 1)]
        cin = 64
        for cout, stride in ((64, 1), (128, 2), (256, 2), (512, 2)):
            layers += [BasicBlock(cin, cout, stride), BasicBlock(cout, cout, 1)]
            cin = cout
        self.features = nn.Sequential(*layers)
        self.fc = nn.Linear(512, classes)

    def forward(self, x):
        return self.fc(_pooled(self.features(x)))


VISION: dict[str, tuple[str, Callable[[], nn.Module], int]] = {
    "mobilenet_v2_035_144": ("MobileNetV2 width 0.35, 1x3x144x144", lambda: MobileNetV2(0.35), 144),
    "mobilenet_v2_100_224": ("MobileNetV2 width 1.0, 1x3x224x224", lambda: MobileNetV2(1.0), 224),
    "mobilenet_v3_large_224": ("MobileNetV3-Large, 1x3x224x224", MobileNetV3, 224),
    "mobilenet_v3_small_224": ("MobileNetV3-Small, 1x3x224x224", lambda: MobileNetV3(V3_SMALL, 1024), 224),
    "mnasnet_b1_224": ("MnasNet-B1 depth 1.0, 1x3x224x224", MnasNet, 224),
    "mnasnet_b1_128": ("MnasNet-B1 depth 1.0, 1x3x128x128", MnasNet, 128),
    "resnet18_128": ("ResNet-18, 1x3x128x128", ResNet18, 128),
    "unet_128": ("the zoo's 3-level U-Net (base 8), 1x3x128x128", UNet, 128),
}


def vision_module(name: str) -> tuple[nn.Module, tuple[torch.Tensor]]:
    """One of `VISION`, built with seeded random weights (batch norm with non-trivial statistics),
    and one seeded random image of its resolution."""
    if name not in VISION:
        raise UsageError(f"no vision model {name!r}; choose from {', '.join(VISION)}")
    _, build, size = VISION[name]
    with seeded():
        return randomize_batchnorm(build().eval()), (torch.randn(1, 3, size, size),)


def vision(name: str, partitioner: str | None = None) -> ZooModel:
    """One of `VISION` as a ZooModel (seeded random weights, batch norm with non-trivial statistics),
    lowered by the zoo's recipe (the classifier stays `aten.linear`, not a transposed weight copy in
    the arena)."""
    description, build, size = VISION[name]
    return cnn(name, description, build, size, partitioner)


def cnn(
    name: str, description: str, build: Callable[[], nn.Module], size: int, partitioner: str | None = None
) -> ZooModel:
    """`build()` as a ZooModel on 1x3x`size`x`size` inputs, as `vision` makes one."""
    with seeded():
        module = randomize_batchnorm(build().eval())
        return single_method(
            name,
            description,
            module,
            lambda: (torch.randn(1, 3, size, size),),
            partitioner=partitioner,
            **zoo_recipe(),
        )
