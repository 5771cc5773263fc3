"""Channel groups (`planner/tiling/channels.py`): a chain whose every output channel reads only its own
input channel (a dequantize and a mean over H and W: MnasNet's head) computed one group of channels at a
time, legality read off each op, the int8 program bit-identical to the untiled one in executorch.runtime
(one op per XNNPACK delegate and portable kernels), its lowered bound below the untiled program's."""

from __future__ import annotations

import random

import pytest
import torch
from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
from torch import nn

from memplan import PlannerPass
from memplan.experiments.zoo import runtime
from memplan.peak_bound import lower_bound
from memplan.planner.tiling import TilingOptions
from memplan.planner.tiling.channels import C, channel_region, channel_rule, channel_schedule
from memplan.planner.tiling.cost import GraphSteps, arena_tensors, steps_counted_anew
from memplan.planner.tiling.region import GraphIndex
from memplan.planner.tiling.rewrite import rewrite
from memplan.planner.tiling.search import cut_points
from tests.planner.random_cnns import random_headed_cnn
from tests.planner.test_tiling_int8 import _lowered  # XNNPACK per op, or portable
from tests.planner.test_tiling_random import _program as program_and_calls
from tests.planner.test_tiling_random import _same as same_outputs
from tests.planner.tiling_models import quantized_program

SIZE = (1, 3, 16, 16)


class Lambda(nn.Module):
    def __init__(self, fn) -> None:
        super().__init__()
        self.fn = fn

    def forward(self, x):
        return self.fn(x)


def _last_op(fn, shape=(1, 6, 5, 5)):
    graph = torch.export.export(Lambda(fn), (torch.randn(shape),)).graph
    return [n for n in graph.nodes if n.op == "call_function"][-1]


@pytest.mark.parametrize(
    "fn, local",
    [
        (lambda x: x.mean([2, 3]), True),
        (lambda x: x.mean([-1, -2], keepdim=True), True),
        (lambda x: x.sum([3]), True),
        (lambda x: x.mean([1]), False),  # mixes channels
        (lambda x: x.amax([0, 2]), False),  # over N: what is left at dim 1 is not C
        (lambda x: x.sum(), False),  # no dim: everything
        (lambda x: torch.relu(x), True),
        (lambda x: x * 0.5, True),  # a scalar broadcasts along C
        (lambda x: x * torch.ones(1, 1, 5, 1), True),  # so does a tensor with one channel
        (lambda x: x * torch.ones(1, 6, 1, 1), True),  # a per-channel tensor carries them
        (lambda x: x.softmax(1), False),
        (lambda x: x.flip(1), False),
        (lambda x: nn.functional.adaptive_avg_pool2d(x, 1), True),  # probed: what it computes per group
        (lambda x: x.mean([2, 3], keepdim=True).flatten(1), True),
        (lambda x: x.reshape(1, 6, 25), False),  # the shape fixes the channel count
        (lambda x: x.roll(1, 1), False),  # each group rolled alone gives other numbers
        (lambda x: x.transpose(1, 2), False),
    ],
    ids=[
        "mean_hw",
        "mean_hw_keepdim",
        "sum_w",
        "mean_c",
        "amax_n",
        "sum_all",
        "relu",
        "scalar",
        "one_channel",
        "per_channel",
        "softmax_c",
        "flip_c",
        "adaptive_avg_pool_1x1",
        "flatten_after_mean",
        "reshape_fixed",
        "roll_c",
        "transpose_c",
    ],
)
def test_which_ops_are_channel_local_is_read_off_the_op(fn, local):
    assert (channel_rule(_last_op(fn)) is not None) is local


class ChannelHead(nn.Module):
    """A small stem then a wide 1x1 convolution into `mean([2, 3])` and a classifier: under XNNPACK the
    mean is a portable kernel, so the wide feature map stands dequantized in float, the program's peak."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Conv2d(3, 8, 3, stride=2, padding=1)
        self.wide = nn.Conv2d(8, 96, 1)
        self.fc = nn.Linear(96, 5)

    def forward(self, x):
        return self.fc(torch.relu(self.wide(torch.relu(self.stem(x)))).mean([2, 3]))


class PerChannelBias(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.bias = nn.Parameter(torch.randn(8))

    def forward(self, x):
        return self.conv(x).relu().mean([2, 3]) + self.bias


def _channel_regions(graph, cut: set | None = None) -> list:
    """Every channel region of `graph` from a 4D op (at `cut` points only, when given)."""
    index = GraphIndex(graph)
    return [
        r
        for s in index.nodes
        if s.op == "call_function" and len(getattr(s.meta.get("val"), "shape", ())) == 4
        for e in index.nodes[index.index[s] + 1 :]
        if (cut is None or (s in cut and e in cut))
        and (r := channel_region(index, s, e, index.descendants(s))) is not None
    ]


def _region(graph, start_name: str, end_name: str):
    index = GraphIndex(graph)
    nodes = {n.name: n for n in graph.nodes}
    start = nodes[start_name]
    return channel_region(index, start, nodes[end_name], index.descendants(start))


def test_a_channel_region_ends_before_a_per_channel_tensor_from_outside():
    graph = torch.export.export(PerChannelBias().eval(), (torch.randn(SIZE),)).graph
    assert [n.name for n in _region(graph, "conv2d", "mean").nodes] == ["relu", "mean"]
    assert _region(graph, "conv2d", "add") is None  # the bias carries channels the region does not make


@pytest.mark.parametrize("groups", [2, 5, 8])
def test_channel_groups_give_the_same_floats_in_eager(groups):
    model = PerChannelBias().eval()
    program = torch.export.export(model, (torch.randn(SIZE),))
    module = program.module()
    region = _region(module.graph, "conv2d", "mean")
    pieces = channel_schedule(region, groups)
    assert pieces is not None and sum(p.kind == "slice" for p in pieces) == groups
    rewrite(module, region, pieces)
    cats = [n for n in module.graph.nodes if n.target is torch.ops.aten.cat.default]
    assert len(cats) == 1 and cats[0].args[1] == C
    for _ in range(3):
        x = torch.randn(SIZE)
        assert torch.equal(module(x), model(x))


def test_steps_spliced_for_channel_groups_equal_steps_counted_anew():
    program = quantized_program(ChannelHead(), (torch.randn(SIZE),))
    graph = program.graph_module.graph
    counted = GraphSteps(graph, arena_tensors(graph, TilingOptions(input_in_arena=False)))
    regions = _channel_regions(graph)
    assert regions
    for region in regions:
        pieces = channel_schedule(region, 2)
        assert pieces is not None
        assert counted.tiled(region, pieces) == steps_counted_anew(graph, region, pieces, counted.held)


@pytest.fixture(scope="module")
def head() -> torch.export.ExportedProgram:
    return quantized_program(ChannelHead(), (torch.randn(SIZE),))


def searched_against_untiled(
    program, xnnpack: bool, size: tuple[int, ...], where: str, tiling: TilingOptions | bool = True
):
    """`program` tiled by `PlannerPass.tile` (XNNPACK's partitioner given), lowered (XNNPACK per op or
    portable) and run against the untiled program over 3 calls, bit-identical: the tiling pass, its
    report, and the untiled program's pass."""
    tiler = PlannerPass(alloc_graph_input=False, tiling=tiling)
    tiled = tiler.tile(program, "forward", partitioner=[XnnpackPartitioner(per_op_mode=True)])
    untiled = PlannerPass(alloc_graph_input=False, elementwise_in_place=True)
    calls = [("forward", (torch.randn(size),)) for _ in range(3)]
    got = runtime.run_pte(_lowered(tiled, xnnpack, tiler), calls)
    want = runtime.run_pte(_lowered(program, xnnpack, untiled), calls)
    same_outputs(got, want, True, where)
    assert not torch.equal(want[0][0], want[1][0])
    return tiler, tiler.tiling_reports["forward"], untiled


@pytest.mark.parametrize("xnnpack", [True, False], ids=["xnnpack_per_op", "portable"])
def test_the_search_cuts_an_int8_mean_head_into_channel_groups_bit_identical_and_below_untiled(head, xnnpack):
    tiler, report, untiled = searched_against_untiled(head, xnnpack, SIZE, "the int8 head in channel groups")
    assert report.tiled and any(r.by_channels for r in report.regions), report.summary()
    assert "channel groups" in report.summary()
    tiled_bound = lower_bound(tiler.results["forward"].problem)
    assert tiled_bound < lower_bound(untiled.results["forward"].problem)
    if xnnpack:  # what the search counted with the partitioner's facts is what the lowered program holds
        assert tiled_bound == report.peak


HEAD_SEEDS = [(0, True), (1, False)]
SLOW_HEAD_SEEDS = [(s, int8) for s in range(2, 14) for int8 in (False, True)]


@pytest.mark.parametrize(
    "seed, int8", HEAD_SEEDS + [pytest.param(*s, marks=pytest.mark.slow) for s in SLOW_HEAD_SEEDS]
)
def test_random_heads_in_channel_groups_run_like_the_untiled_program(seed: int, int8: bool) -> None:
    """The longest channel region of a random CNN's head in a seeded group count, lowered (int8: one op
    per XNNPACK delegate; fp32: portable) and run against the untiled program: int8 bit-identical."""
    program, calls = program_and_calls(seed, int8, random_headed_cnn)
    module = program.module()
    found = _channel_regions(module.graph, cut_points(list(module.graph.nodes)))  # the search's cut points
    reducing = [r for r in found if any("dim" in str(n.target._schema) for n in r.nodes)]
    assert reducing, f"seed {seed}: no channel region through the head's reduction"
    region = max(reducing, key=lambda r: len(r.nodes))
    channels = region.start.meta["val"].shape[C]
    groups = random.Random(seed).randint(2, channels)
    rewrite(module, region, channel_schedule(region, groups))
    args, _ = program.example_inputs
    tiled = torch.export.export(module, tuple(args))
    got = runtime.run_pte(_lowered(tiled, int8), calls)
    want = runtime.run_pte(_lowered(program, int8), calls)
    where = f"seed {seed}, {groups} groups over {[n.name for n in region.nodes]}"
    same_outputs(got, want, int8, where, tolerance=1e-5)
