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
    return _region(graph, start, end)


def _region(graph, start: Node, end: Node) -> Region:
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


class Int8Stage(nn.Module):
    """A MobileNetV2-like stage to quantize: conv s2 + ReLU, depthwise + ReLU with a residual add, a
    3x3 max pool (its border pads with the lowest integer) and a 1x1 projection."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Conv2d(3, 8, 3, 2, 1)
        self.dw = nn.Conv2d(8, 8, 3, 1, 1, groups=8)
        self.pool = nn.MaxPool2d(3, 1, 1)
        self.project = nn.Conv2d(8, 4, 1)

    def forward(self, x):
        y = torch.relu(self.stem(x))
        return self.project(self.pool(torch.relu(self.dw(y)) + y))


def quantized_program(model: nn.Module, example: tuple[torch.Tensor, ...], seed: int = 0):
    """`model` quantized to int8 by pt2e with XNNPACK's quantizer (per-channel weights, calibrated on
    random inputs) and exported again: the ATen program a user's int8 export script lowers."""
    from executorch.backends.xnnpack.quantizer.xnnpack_quantizer import (
        XNNPACKQuantizer,
        get_symmetric_quantization_config,
    )
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

    torch.manual_seed(seed)
    quantizer = XNNPACKQuantizer().set_global(get_symmetric_quantization_config(is_per_channel=True))
    with torch.no_grad():
        prepared = prepare_pt2e(torch.export.export(model.eval(), example).module(), quantizer)
        for _ in range(4):
            prepared(*(torch.randn_like(x) for x in example))
        return torch.export.export(convert_pt2e(prepared), example)


def int8_region(module: GraphModule) -> Region:
    """The region from the input to the last int8 tensor (what the graph's final dequantize reads)."""
    graph = module.graph
    start = next(n for n in graph.nodes if n.op == "placeholder")
    output = next(n for n in graph.nodes if n.op == "output")
    end = output.args[0][0].args[0]
    assert isinstance(end, Node) and end.meta["val"].dtype == torch.int8, end
    return _region(graph, start, end)
