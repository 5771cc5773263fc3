"""int8 tiling: pt2e-quantized programs (XNNPACK's quantizer) cut into row bands across their
quantize/dequantize pairs, the border padded on the int8 side with the zero point (the lowest integer
before a max pool), run in executorch.runtime bit-identical to the untiled int8 program: one op per
XNNPACK delegate, and portable kernels with ExecuTorch's quantized kernel library."""

from __future__ import annotations

import dataclasses

import pytest
import torch
from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
from executorch.exir import ExecutorchBackendConfig, to_edge, to_edge_transform_and_lower
from torch import nn

from memplan import PlannerPass
from memplan.experiments.zoo import runtime
from memplan.peak_bound import lower_bound
from memplan.planner.tiling import TilingOptions
from memplan.planner.tiling.partitioned import partitioned
from memplan.planner.tiling.pointwise import derived_pointwise
from memplan.planner.tiling.rewrite import rewrite
from memplan.planner.tiling.schedule import schedule
from memplan.planner.tiling.search import search
from tests.planner.tiling_models import Int8Stage, int8_region, quantized_program

QD = torch.ops.quantized_decomposed
SIZE = (1, 3, 30, 31)
F, I8 = torch.empty(1, 4, 6, 6), torch.empty(1, 4, 6, 6, dtype=torch.int8)


@pytest.fixture(scope="module")
def program() -> torch.export.ExportedProgram:
    return quantized_program(Int8Stage(), (torch.randn(SIZE),))


def banded(program: torch.export.ExportedProgram, count: int) -> torch.export.ExportedProgram:
    """The whole int8 stage (input to last int8 tensor) in `count` row bands, exported again."""
    module = program.module()
    region = int8_region(module)
    pieces = schedule(region, count)
    assert pieces is not None
    rewrite(module, region, pieces)
    return torch.export.export(module, (torch.randn(SIZE),))


@pytest.mark.parametrize(
    "op, args, pointwise",
    [
        (QD.quantize_per_tensor.default, (F, 0.1, 3, -128, 127, torch.int8), True),
        (QD.dequantize_per_tensor.default, (I8, 0.1, 3, -128, 127, torch.int8), True),
        # per-channel along C: its kernel permutes and views, which the derivation does not follow
        (
            QD.dequantize_per_channel.default,
            (I8, torch.ones(4), torch.zeros(4, dtype=torch.long), 1, -128, 127, torch.int8),
            False,
        ),
    ],
    ids=["quantize_per_tensor", "dequantize_per_tensor", "dequantize_per_channel"],
)
def test_quantize_and_dequantize_are_derived_pointwise_from_their_kernels(op, args, pointwise):
    assert torch.Tag.pointwise not in op.tags  # else this shows nothing
    assert derived_pointwise(op, args) is pointwise


def test_the_border_is_padded_on_the_int8_side_with_the_zero_point(program):
    module = banded(program, 3).module()
    pads = [n for n in module.graph.nodes if n.target is torch.ops.aten.constant_pad_nd.default]
    assert pads
    for pad in pads:
        source, (dequantize,) = pad.args[0], pad.users
        assert source.meta["val"].dtype == torch.int8
        assert dequantize.target is QD.dequantize_per_tensor.default
        conv_or_pool = next(iter(dequantize.users))
        zero_point, quant_min = dequantize.args[2], dequantize.args[3]
        want = quant_min if conv_or_pool.target is torch.ops.aten.max_pool2d.default else zero_point
        assert pad.args[2] == want, (pad.name, pad.args, want)
    assert {next(iter(next(iter(p.users)).users)).target for p in pads} >= {
        torch.ops.aten.max_pool2d.default,
        torch.ops.aten.conv2d.default,
    }


def test_every_band_has_its_own_weight_dequantize_so_xnnpack_keeps_bands_in_separate_delegates(program):
    module = banded(program, 3).module()
    weights = [n for n in module.graph.nodes if n.target is QD.dequantize_per_channel.default]
    assert len(weights) == 3 * 3  # stem, depthwise and projection, in each of the 3 bands
    assert all(len(n.users) == 1 for n in weights)


@pytest.mark.parametrize("count", [2, 5])
def test_int8_bands_equal_the_whole_int8_program_in_eager(program, count):
    tiled = banded(program, count).module()
    whole = program.module()
    for _ in range(3):
        x = torch.randn(SIZE)
        assert torch.equal(tiled(x), whole(x))


def _lowered(program: torch.export.ExportedProgram, xnnpack: bool, planner: PlannerPass | None = None):
    if xnnpack:
        edge = to_edge_transform_and_lower(program, partitioner=[XnnpackPartitioner(per_op_mode=True)])
    else:
        import executorch.kernels.quantized  # noqa: F401  registers the quantized_decomposed out kernels

        edge = to_edge(program)
    planner = planner or PlannerPass(alloc_graph_input=False)
    config = ExecutorchBackendConfig(memory_planning_pass=planner)
    return edge.to_executorch(config)


@pytest.mark.parametrize("xnnpack", [True, False], ids=["xnnpack_per_op", "portable"])
def test_tiled_int8_program_runs_bit_identical_to_the_untiled_one(program, xnnpack):
    calls = [("forward", (torch.randn(SIZE),)) for _ in range(3)]
    tiled = runtime.run_pte(_lowered(banded(program, 3), xnnpack), calls)
    whole = runtime.run_pte(_lowered(program, xnnpack), calls)
    for got, want in zip(tiled, whole, strict=True):
        assert torch.equal(got[0], want[0])
    assert not torch.equal(whole[0][0], whole[1][0])  # different inputs, different outputs


def test_the_search_cuts_a_quantized_graph_only_at_int8_tensors_or_the_input(program):
    # the caller passes the input; without elementwise in place (this stage's ReLUs over their
    # convolutions leave tiling nothing to gain; tests/planner/levers/test_elementwise_in_place.py
    # holds the search's peaks to the lowered program's with the lever on)
    tiler = PlannerPass(alloc_graph_input=False, tiling=True, elementwise_in_place=False)
    tiled = tiler.tile(program)
    report = tiler.tiling_reports["forward"]
    assert report.tiled, report.summary()
    nodes = {n.name: n for n in program.graph_module.graph.nodes}
    for name in (report.regions[0].start, report.regions[0].end):
        node = nodes[name]
        assert node.op == "placeholder" or node.meta["val"].dtype == torch.int8, name
    calls = [("forward", (torch.randn(SIZE),)) for _ in range(2)]
    planner = PlannerPass(alloc_graph_input=False)
    tiled_pte, whole_pte = _lowered(tiled, True, tiler), _lowered(program, True, planner)
    # the search's untiled peak is the XNNPACK program's own live-bytes bound (int8 tensors only)
    assert report.base_peak == lower_bound(planner.results["forward"].problem)
    # and its tiled peak that of the lowered tiled program, once reorder gives the bands their order back
    assert tiler.results["forward"].reorder_report.instructions_moved > 0
    assert report.peak == lower_bound(tiler.results["forward"].problem)
    got, want = runtime.run_pte(tiled_pte, calls), runtime.run_pte(whole_pte, calls)
    assert all(torch.equal(g[0], w[0]) for g, w in zip(got, want, strict=True))
    arena = {
        name: sum(runtime.stock_arena_bytes(p)["forward"])
        for name, p in [("tiled", tiled_pte), ("whole", whole_pte)]
    }
    assert arena["tiled"] < arena["whole"], arena


class StridedStem(nn.Module):
    """A float input bigger than any activation (MobileNetV3-Small at 224: 602,112 B of float image
    against a 351,232 B peak): its int8 copy is only ever a band when the region starts at the input."""

    def __init__(self) -> None:
        super().__init__()
        self.layers = nn.Sequential(
            nn.Conv2d(3, 8, 3, stride=2, padding=1), nn.ReLU(), nn.Conv2d(8, 8, 3, stride=2, padding=1)
        )

    def forward(self, x):
        return self.layers(x)


def test_a_caller_input_bigger_than_the_peak_is_cut_into_bands_and_quantized_per_band():
    shape = (1, 3, 32, 32)
    program = quantized_program(StridedStem(), (torch.randn(shape),))
    tiler = PlannerPass(alloc_graph_input=False, tiling=TilingOptions(max_patches=4))
    tiled = tiler.tile(program)
    report = tiler.tiling_reports["forward"]
    assert report.tiled and report.regions[0].start == "x", report.summary()
    assert 3 * 32 * 32 * 4 > report.base_peak > report.peak  # the float input is not in the arena
    assert report.peak < 3 * 32 * 32 + 8 * 16 * 16  # never the whole int8 input beside the stem's output
    calls = [("forward", (torch.randn(shape),)) for _ in range(2)]
    got = runtime.run_pte(_lowered(tiled, True, tiler), calls)
    want = runtime.run_pte(_lowered(program, True), calls)
    assert all(torch.equal(g[0], w[0]) for g, w in zip(got, want, strict=True))


class HardswishStem(nn.Module):
    """MobileNetV3's stem: XNNPACK's quantizer leaves hardswish float and its partitioner keeps it
    whole, so the dequantize, the hardswish and the quantize are delegates of their own."""

    def __init__(self) -> None:
        super().__init__()
        self.stem, self.act, self.head = nn.Conv2d(3, 8, 3, padding=1), nn.Hardswish(), nn.Conv2d(8, 8, 1)

    def forward(self, x):
        return self.head(self.act(self.stem(x)))


class MeanHead(nn.Module):
    """MnasNet's head: `mean([2, 3])` without keepdim, which XNNPACK's partitioner leaves to the
    portable kernel, so the feature map stands dequantized in float before it."""

    def __init__(self) -> None:
        super().__init__()
        self.conv, self.fc = nn.Conv2d(3, 16, 3, padding=1), nn.Linear(16, 4)

    def forward(self, x):
        return self.fc(torch.relu(self.conv(x)).mean([2, 3]))


@pytest.mark.parametrize("model", [HardswishStem, MeanHead], ids=["hardswish", "mean_head"])
def test_costs_read_off_the_partitioned_program_equal_the_lowered_bound_where_the_assumption_does_not(model):
    shape = (1, 3, 16, 16)
    program = quantized_program(model(), (torch.randn(shape),))
    planner = PlannerPass(alloc_graph_input=False, elementwise_in_place=False)
    _lowered(program, True, planner)
    lowered_bound = lower_bound(planner.results["forward"].problem)
    read_off = partitioned(program, [XnnpackPartitioner(per_op_mode=True)])
    options = TilingOptions(input_in_arena=False, elementwise_in_place=False)
    assumed = search(program.graph_module.graph, options).base_peak
    counted = search(program.graph_module.graph, dataclasses.replace(options, partitioned=read_off)).base_peak
    assert counted == lowered_bound
    assert assumed != lowered_bound  # one int8 kernel per dequantize -> op -> quantize is not what it is
