"""Generated CNNs for the tiling tests: random depths, kernels, strides, dilations, depthwise and
grouped convolutions, batch norm, activations, pooling and residual adds, on small odd-sized images."""

from __future__ import annotations

import random

import torch
from torch import nn
from torch.fx import GraphModule, Node

from memplan.planner.tiling.region import GraphIndex, Region


class Block(nn.Module):
    """One generated layer: conv (+ BN + activation), optionally a pool, optionally a residual add."""

    def __init__(self, rng: random.Random, cin: int, size: int) -> None:
        super().__init__()
        kernel = rng.choice([1, 3, 5])
        dilation = rng.choice([1, 1, 2]) if kernel > 1 else 1
        stride = rng.choice([1, 1, 2]) if size >= 8 else 1
        groups = rng.choice([1, cin]) if cin > 1 else 1
        cout = cin if groups == cin and cin > 1 else rng.choice([4, 6, 8])
        pad = rng.choice([0, dilation * (kernel // 2)])
        self.conv = nn.Conv2d(cin, cout, kernel, stride, pad, dilation=dilation, groups=groups)
        self.bn = nn.BatchNorm2d(cout) if rng.random() < 0.5 else nn.Identity()
        self.act = rng.choice([nn.ReLU(), nn.ReLU6(), nn.SiLU(), nn.Identity()])
        self.residual = stride == 1 and cin == cout and 2 * pad == dilation * (kernel - 1)
        pool = rng.random()
        if size >= 8 and pool < 0.2:
            self.pool: nn.Module = nn.MaxPool2d(3, 2, 1)
        elif size >= 8 and pool < 0.3:
            self.pool = nn.AvgPool2d(3, 1, 1)
        else:
            self.pool = nn.Identity()
        self.cout = cout

    def forward(self, x):
        y = self.act(self.bn(self.conv(x)))
        if self.residual:
            y = y + x
        return self.pool(y)


def generated_cnn(seed: int) -> tuple[nn.Module, tuple[torch.Tensor]]:
    """A random CNN of 2-5 blocks and an input of random odd-ish size (13-27 px)."""
    rng = random.Random(seed)
    torch.manual_seed(seed)
    size = rng.randrange(13, 28)
    blocks, cin, current = [], 3, size
    for _ in range(rng.randrange(2, 6)):
        block = Block(rng, cin, current)
        with torch.no_grad():
            current = block(torch.zeros(1, cin, current, current + 1)).shape[2]
        blocks.append(block)
        cin = block.cout
        if current < 6:
            break
    model = nn.Sequential(*blocks).eval()
    for m in model.modules():
        if isinstance(m, nn.BatchNorm2d):
            m.running_mean.uniform_(-0.2, 0.2)
            m.running_var.uniform_(0.5, 1.5)
    return model, (torch.randn(1, 3, size, size + 1),)


def whole_region(module: GraphModule) -> Region:
    """The region from the input to the op the graph returns (generated CNNs are tileable end to end)."""
    graph = module.graph
    start = next(n for n in graph.nodes if n.op == "placeholder")
    output = next(n for n in graph.nodes if n.op == "output")
    end = output.args[0][0]
    assert isinstance(end, Node)
    index = GraphIndex(graph)
    region = index.region(start, end, index.descendants(start))
    assert isinstance(region, Region), region
    return region


class Expand(nn.Module):
    """3 -> 24 channels at full resolution, a depthwise conv, back to 4: the peak is the expanded pair."""

    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Conv2d(3, 24, 3, 2, 1)
        self.dw = nn.Conv2d(24, 24, 3, 1, 1, groups=24)
        self.b = nn.Conv2d(24, 4, 1)

    def forward(self, x):
        return self.b(torch.relu(self.dw(torch.relu(self.a(x)))))
