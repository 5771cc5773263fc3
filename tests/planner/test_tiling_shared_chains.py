"""Squeeze-and-excitation under XNNPACK's quantizer (`planner/tiling/shared_chains.py`): the float
hardswish output read by the SE's mean and by the gating is computed again for the mean, the gating's
chain then runs in row bands (the SE's scale computed whole before them, `region._through_rows`) and
the mean's in groups of channels; a classifier head's `AdaptiveAvgPool2d(1)` and flatten are
channel-local by what they compute. The tiled int8 programs run bit-identical to the untiled ones
in executorch.runtime, on a fixed block and on random MobileNetV3-like CNNs."""

from __future__ import annotations

import pytest
import torch
from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
from torch import nn

from memplan import PlannerPass
from memplan.experiments.zoo import runtime
from memplan.peak_bound import lower_bound
from memplan.planner.tiling import TilingOptions, tile_module
from memplan.planner.tiling.partitioned import ORIGIN, mark_origins
from memplan.planner.tiling.region import GraphIndex, Region
from memplan.planner.tiling.search import cut_points
from memplan.planner.tiling.semantics import Refusal
from memplan.planner.tiling.shared_chains import split_shared_chains
from tests.planner.random_cnns import SqueezeExcite, random_se_cnn
from tests.planner.test_tiling_channels import searched_against_untiled
from tests.planner.test_tiling_int8 import _lowered  # XNNPACK per op, or portable
from tests.planner.test_tiling_random import _program as program_and_calls
from tests.planner.test_tiling_random import _same as same_outputs
from tests.planner.tiling_models import quantized_program

SIZE = (1, 3, 24, 24)
FEW_PATCHES = TilingOptions(max_patches=8)  # a lowering of 64 one-op delegates per region takes minutes


class Block(nn.Module):
    """A stem and one squeeze-and-excitation block at stride 1 (16 -> 64 channels at 12x12)."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Conv2d(3, 16, 3, 2, 1)
        self.block = SqueezeExcite(_Fixed(), 16, 12)

    def forward(self, x):
        return self.block(nn.functional.hardswish(self.stem(x)))


class _Fixed:
    """The choices `SqueezeExcite` draws, fixed: 4x expansion, 3x3 depthwise, stride 1, 16 out."""

    def randrange(self, lo: int, hi: int) -> int:
        return 4

    def choice(self, options: list) -> object:
        return options[0]


@pytest.fixture(scope="module")
def block() -> torch.export.ExportedProgram:
    torch.manual_seed(0)
    return quantized_program(Block().eval(), (torch.randn(SIZE),))


def _dequantized_hardswish(graph):
    """The hardswish of the depthwise convolution's output: the one the mean reads."""
    return next(n for n in graph.nodes if any("mean" in str(u.target) for u in n.users))


def test_the_mean_gets_a_copy_of_the_float_chain_and_the_outputs_do_not_change(block):
    module = block.module()
    mark_origins(module.graph)
    shared = _dequantized_hardswish(module.graph)
    dequantize = shared.args[0]
    x = torch.randn(SIZE)
    before = module(x)
    assert split_shared_chains(module, cut_points(list(module.graph.nodes))) == 1
    mean = next(n for n in module.graph.nodes if "mean" in str(n.target))
    copy = mean.args[0]
    assert copy is not shared and copy.target is shared.target
    assert copy.meta["custom"][ORIGIN] == shared.name  # the partitioner's verdict on the original holds
    assert copy.args[0] is not dequantize and copy.args[0].args[0] is dequantize.args[0]  # from the int8
    assert list(shared.users) != [] and mean not in shared.users
    assert torch.equal(module(x), before)


def test_after_the_copy_the_gating_runs_in_rows_with_the_se_computed_whole(block):
    module = block.module()
    graph = module.graph
    shared = _dequantized_hardswish(graph)
    int8 = shared.args[0].args[0]  # the depthwise output, quantized: where both chains begin
    gated = next(n for n in graph.nodes if n.target is torch.ops.aten.mul.Tensor)
    project = next(u for u in _quantize_after(gated).users)  # its dequantize -> the projection
    end = _quantize_after(next(iter(project.users)))
    index = GraphIndex(graph)
    assert index.region(int8, end, index.descendants(int8)) is Refusal.ESCAPING_INTERMEDIATE
    split_shared_chains(module, cut_points(list(graph.nodes)))
    index = GraphIndex(graph)
    region = index.region(int8, end, index.descendants(int8))
    assert isinstance(region, Region), region
    names = [str(n.target) for n in region.nodes]
    assert any("mul" in t for t in names) and any("conv2d" in t for t in names)
    assert not any("mean" in t or "hardsigmoid" in t for t in names)  # the SE's scale: outside, whole


def _quantize_after(node):
    return next(u for u in node.users if "quantize_per_tensor" in str(u.target))


@pytest.mark.parametrize("xnnpack", [True, False], ids=["xnnpack_per_op", "portable"])
def test_the_search_tiles_the_se_block_with_the_copy_bit_identical_and_below_untiled(block, xnnpack):
    where = "the SE block with its chain computed again"
    tiler, report, untiled = searched_against_untiled(block, xnnpack, SIZE, where, FEW_PATCHES)
    assert report.tiled and report.recomputed_chains == 1, report.summary()
    assert any(r.by_channels for r in report.regions) and not all(r.by_channels for r in report.regions)
    assert "computed again" in report.summary()
    tiled_bound = lower_bound(tiler.results["forward"].problem)
    assert tiled_bound < lower_bound(untiled.results["forward"].problem)
    if xnnpack:  # each band's gating has its own dequantized scale, so no delegate holds every band
        assert tiled_bound == report.peak


def test_the_copy_is_what_lowers_the_peak_and_its_switch_turns_it_off(block):
    options = TilingOptions(input_in_arena=False)
    on = tile_module(block.module(), options)
    off = tile_module(block.module(), TilingOptions(input_in_arena=False, recompute_shared_chains=False))
    assert on.recomputed_chains == 1 and off.recomputed_chains == 0
    assert on.base_peak == off.base_peak  # both of the graph as given
    assert on.peak < off.peak, (on.summary(), off.summary())


# Slow only (about a minute each, most of it XNNPACK lowering): by default the fixed SE block runs the
# search end to end, bit-identical in both lowerings.
SE_SEEDS = list(range(12))


@pytest.mark.slow
@pytest.mark.parametrize("seed", SE_SEEDS)
def test_random_se_cnns_searched_and_tiled_run_bit_identical(seed: int) -> None:
    """A random MobileNetV3-like int8 CNN through the whole search (`PlannerPass.tile` with XNNPACK's
    partitioner: rows, channel groups, chains computed again) lowered one op per XNNPACK delegate and
    run against the untiled program."""
    program, calls = program_and_calls(seed, True, random_se_cnn)
    tiler = PlannerPass(alloc_graph_input=False, tiling=FEW_PATCHES)
    tiled = tiler.tile(program, "forward", partitioner=[XnnpackPartitioner(per_op_mode=True)])
    report = tiler.tiling_reports["forward"]
    assert report.tiled, f"seed {seed}: {report.summary()}"
    got = runtime.run_pte(_lowered(tiled, True, tiler), calls)
    want = runtime.run_pte(_lowered(program, True), calls)
    same_outputs(got, want, True, f"seed {seed}: {report.summary()}")
    assert lower_bound(tiler.results["forward"].problem) <= report.base_peak
