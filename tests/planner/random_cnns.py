"""Seeded random CNNs for the tiling equivalence tests: strides, dilations, grouped and depthwise
convolutions, odd image sizes, max and average pools, residual adds (over one conv or two), channel cats of two branches,
ReLU / ReLU6 / hardswish, (`random_headed_cnn`) a classifier head reducing over H and W, and
(`random_se_cnn`) MobileNetV3's squeeze-and-excitation blocks and head; the program tiled is the longest legal region from the input (what the
tiling core accepts of it), so every generated op the core can band is banded."""

from __future__ import annotations

import random

import torch
from torch import nn
from torch.fx import GraphModule, Node

from memplan.experiments.zoo.models.common import randomize_batchnorm
from memplan.planner.tiling.region import GraphIndex, Region

ACTIVATIONS = (nn.ReLU, nn.ReLU6, nn.Hardswish, nn.Identity)


class Layer(nn.Module):
    """A conv (any of stride, dilation, groups, padding) + BN + activation, then optionally a residual
    add, a channel cat with a 1x1 branch of the same input, and a pool."""

    def __init__(self, rng: random.Random, cin: int, size: int) -> None:
        super().__init__()
        kernel = rng.choice([1, 3, 3, 5])
        dilation = rng.choice([1, 1, 2]) if kernel > 1 else 1
        stride = rng.choice([1, 1, 2]) if size >= 9 else 1
        groups = rng.choice([1, cin, 2 if cin % 2 == 0 else 1])
        cout = cin if groups == cin else groups * rng.choice([2, 3, 4])
        pad = rng.choice([0, dilation * (kernel // 2)]) if size >= 9 else dilation * (kernel // 2)
        self.conv = nn.Conv2d(cin, cout, kernel, stride, pad, dilation=dilation, groups=groups)
        self.bn = nn.BatchNorm2d(cout) if rng.random() < 0.6 else nn.Identity()
        self.act = rng.choice(ACTIVATIONS)()
        self.residual = stride == 1 and cin == cout and 2 * pad == dilation * (kernel - 1)
        same_size = stride == 1 and 2 * pad == dilation * (kernel - 1)
        self.branch = nn.Conv2d(cin, rng.choice([2, 4]), 1) if same_size and rng.random() < 0.3 else None
        pool = rng.random()
        if size >= 9 and pool < 0.2:
            self.pool: nn.Module = nn.MaxPool2d(3, 2, 1)
        elif size >= 9 and pool < 0.35:
            self.pool = nn.AvgPool2d(3, 1, 1)
        elif size >= 9 and pool < 0.45:
            self.pool = nn.MaxPool2d(2, 2)
        else:
            self.pool = nn.Identity()
        self.cout = cout + (self.branch.out_channels if self.branch is not None else 0)
        # a ResNet block: the skip spans two windows, so its reads lag the branch's by two halos
        self.second = nn.Conv2d(cout, cout, 3, 1, 1) if self.residual and rng.random() < 0.5 else None

    def forward(self, x):
        y = self.act(self.bn(self.conv(x)))
        if self.second is not None:
            y = self.second(y)
        if self.residual:
            y = y + x
        if self.branch is not None:
            y = torch.cat([y, self.branch(x)], 1)
        return self.pool(y)


def random_cnn(seed: int) -> tuple[nn.Module, tuple[torch.Tensor]]:
    """A CNN of 2-6 `Layer`s on a 1x3xHxW image, H and W odd or even in 11-33 (seeded)."""
    rng = random.Random(seed)
    torch.manual_seed(seed)
    height, width = rng.randrange(11, 34), rng.randrange(11, 34)
    layers, cin, size = [], 3, min(height, width)
    for _ in range(rng.randrange(2, 7)):
        layer = Layer(rng, cin, size)
        with torch.no_grad():
            size = min(layer.eval()(torch.zeros(1, cin, size, size)).shape[2:])
        layers.append(layer)
        cin = layer.cout
        if size < 5:
            break
    model = randomize_batchnorm(nn.Sequential(*layers).eval())
    return model, (torch.randn(1, 3, height, width),)


REDUCTIONS = (
    lambda x: x.mean([2, 3]),
    lambda x: x.mean([-2, -1], keepdim=True),
    lambda x: x.sum([3]),
    lambda x: x.amax([2, 3]),
)


class Head(nn.Module):
    """A classifier head: maybe a 1x1 widening convolution and an activation, a reduction over H and/or
    W (mean, sum, max), maybe a ReLU or a scale after it, and a linear layer when two dims are left."""

    def __init__(self, rng: random.Random, cin: int) -> None:
        super().__init__()
        wide = cin * rng.randrange(2, 7)
        self.widen = nn.Conv2d(cin, wide, 1) if rng.random() < 0.7 else nn.Identity()
        self.act = rng.choice(ACTIVATIONS)() if isinstance(self.widen, nn.Conv2d) else nn.Identity()
        self.reduce = rng.choice(REDUCTIONS)
        self.after = rng.choice([nn.ReLU(), nn.Identity(), None])
        channels = wide if isinstance(self.widen, nn.Conv2d) else cin
        self.fc = nn.Linear(channels, rng.randrange(3, 9)) if rng.random() < 0.6 else nn.Identity()

    def forward(self, x):
        y = self.reduce(self.act(self.widen(x)))
        y = y * 0.5 if self.after is None else self.after(y)
        return self.fc(y) if y.dim() == 2 else y


def random_headed_cnn(seed: int) -> tuple[nn.Module, tuple[torch.Tensor]]:
    """`random_cnn(seed)` ending in a seeded `Head`."""
    body, example = random_cnn(seed)
    with torch.no_grad():
        channels = body(*example).shape[1]
    head = Head(random.Random(seed), channels)
    return nn.Sequential(body, head).eval(), example


def longest_region(module: GraphModule, int8_end: bool = False) -> tuple[Region | None, list[str]]:
    """The legal region from the input to the latest end of two rows or more (with `int8_end`, an int8
    tensor: a quantized region is cut only there), and the refusals of the ends tried after it (latest
    first), which say what the core does not band yet."""
    graph = module.graph
    start = next(n for n in graph.nodes if n.op == "placeholder")
    index = GraphIndex(graph)
    below = index.descendants(start)
    refused: list[str] = []
    for end in reversed(list(graph.nodes)):
        value = end.meta.get("val")
        if end.op != "call_function" or not isinstance(value, torch.Tensor) or value.dim() != 4:
            continue
        if value.shape[2] < 2:  # one row cannot be cut into bands (seed 9 ends at 1x3)
            continue
        if int8_end and value.dtype != torch.int8:
            continue
        found = index.region(start, end, below)
        if isinstance(found, Region):
            return found, refused
        refused.append(f"{end.name}: {found.value}")
    return None, refused


def ops_of(region: Region) -> list[str]:
    """The ATen ops a region bands, by name (to report what the generator covered)."""
    return sorted({str(n.target).split(".")[-2] for n in region.nodes if isinstance(n, Node)})


class SqueezeExcite(nn.Module):
    """MobileNetV3's inverted residual with squeeze-and-excitation: a 1x1 expansion and a depthwise
    convolution (each + hardswish), the mean over H and W through two 1x1 convolutions and a
    hardsigmoid gating the block's own output, a 1x1 projection, a residual add when shapes allow.
    XNNPACK's quantizer leaves hardswish and the mean float, so the hardswish output feeding both the
    mean and the gating is the float chain `shared_chains` computes twice."""

    def __init__(self, rng: random.Random, cin: int, size: int) -> None:
        super().__init__()
        wide = cin * rng.randrange(2, 7)
        kernel = rng.choice([3, 5])
        self.stride = rng.choice([1, 2]) if size >= 9 else 1
        self.expand = nn.Conv2d(cin, wide, 1)
        self.depthwise = nn.Conv2d(wide, wide, kernel, self.stride, kernel // 2, groups=wide)
        squeezed = max(2, wide // 4)
        self.fc1, self.fc2 = nn.Conv2d(wide, squeezed, 1), nn.Conv2d(squeezed, wide, 1)
        self.cout = rng.choice([cin, cin + 2])
        self.project = nn.Conv2d(wide, self.cout, 1)
        self.residual = self.stride == 1 and self.cout == cin

    def forward(self, x):
        y = nn.functional.hardswish(self.depthwise(nn.functional.hardswish(self.expand(x))))
        scale = nn.functional.hardsigmoid(self.fc2(torch.relu(self.fc1(y.mean([2, 3], keepdim=True)))))
        out = self.project(y * scale)
        return out + x if self.residual else out


def random_se_cnn(seed: int) -> tuple[nn.Module, tuple[torch.Tensor]]:
    """A seeded stem convolution, one to three `SqueezeExcite` blocks and MobileNetV3's classifier head
    (a 1x1 widening + hardswish, `AdaptiveAvgPool2d(1)`, flatten, linear) on an image of 13-29 rows."""
    rng = random.Random(seed)
    torch.manual_seed(seed)
    height, width = rng.randrange(13, 30), rng.randrange(13, 30)
    cin = rng.choice([4, 6, 8])
    layers: list[nn.Module] = [nn.Conv2d(3, cin, 3, 2, 1), nn.Hardswish()]
    size = (min(height, width) + 1) // 2
    for _ in range(rng.randrange(1, 4)):
        block = SqueezeExcite(rng, cin, size)
        layers.append(block)
        cin, size = block.cout, (size + block.stride - 1) // block.stride
    wide = cin * rng.randrange(2, 5)
    head = [nn.Conv2d(cin, wide, 1), nn.Hardswish(), nn.AdaptiveAvgPool2d(1), nn.Flatten()]
    model = nn.Sequential(*layers, *head, nn.Linear(wide, rng.randrange(3, 9))).eval()
    return model, (torch.randn(1, 3, height, width),)
