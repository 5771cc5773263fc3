"""Elementwise in place: an elementwise instruction's output written over the input it reads last.

Programs planned with the lever run in executorch.runtime equal to the same program planned without
it (bit for bit under int8 XNNPACK one op per delegate; with the other levers on), the arena shrinks
where a ReLU6 sat beside its convolution's output, and each refusal names what keeps the output in a
buffer of its own. Random stateful programs with every lever run against eager in
tests/planner/test_random_state_programs.py (`random_programs.LEVERS`)."""

from __future__ import annotations

import pytest
import torch
from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
from executorch.exir import ExecutorchBackendConfig, to_edge, to_edge_transform_and_lower
from torch import nn

from memplan.experiments.zoo import runtime
from memplan.peak_bound import lower_bound
from memplan.planner.levers.elementwise_in_place import InPlaceReport
from memplan.planner.levers.refusals import Refusal
from memplan.planner.pass_ import PlannerPass
from memplan.planner.tiling import TilingOptions
from memplan.planner.tiling.search import search
from tests.planner.random_cnns import random_cnn
from tests.planner.tiling_models import quantized_program

SIZE = (1, 3, 12, 13)


class ReluResidual(nn.Module):
    """conv -> ReLU6 -> conv -> ReLU6 -> + the first ReLU6 (read twice, so written over only at the add)."""

    def __init__(self) -> None:
        super().__init__()
        self.c1, self.c2, self.act = nn.Conv2d(3, 8, 3, padding=1), nn.Conv2d(8, 8, 3, padding=1), nn.ReLU6()

    def forward(self, x):
        y = self.act(self.c1(x))
        return self.act(self.c2(y)) + y


def _xnnpack(program, in_place: bool, **levers):
    planner = PlannerPass(alloc_graph_input=False, elementwise_in_place=in_place, **levers)
    edge = to_edge_transform_and_lower(program, partitioner=[XnnpackPartitioner(per_op_mode=True)])
    return edge.to_executorch(ExecutorchBackendConfig(memory_planning_pass=planner)), planner


def _portable(program, in_place: bool):
    planner = PlannerPass(elementwise_in_place=in_place)
    return to_edge(program).to_executorch(ExecutorchBackendConfig(memory_planning_pass=planner)), planner


def _report(planner: PlannerPass) -> InPlaceReport:
    report = planner.results["forward"].in_place_report
    assert report is not None
    return report


def _arena(program) -> int:
    return sum(program.executorch_program.execution_plan[0].non_const_buffer_sizes)


def _calls(shape, seed: int = 0, n: int = 3):
    generator = torch.Generator().manual_seed(seed)
    return [("forward", (torch.randn(shape, generator=generator),)) for _ in range(n)]


def _same_outputs(a, b, calls) -> None:
    got, want = runtime.run_pte(a, calls), runtime.run_pte(b, calls)
    assert all(torch.equal(g[0], w[0]) for g, w in zip(got, want, strict=True))
    assert not torch.equal(got[0][0], got[1][0])  # different inputs, different outputs


@pytest.fixture(scope="module")
def relu_residual():
    """ReluResidual quantized, lowered with the lever and without: ((program, planner), (...))."""
    program = quantized_program(ReluResidual(), (torch.randn(SIZE),))
    return _xnnpack(program, True), _xnnpack(program, False)


def test_int8_relu6_and_residual_add_written_over_their_inputs_run_bit_identical(relu_residual):
    (on, with_lever), (off, _) = relu_residual
    report = _report(with_lever)
    over = {d.instruction: d.input for d in report.shared}
    assert len(over) == 3, report.summary()  # both ReLU6 delegates and the add
    _same_outputs(on, off, _calls(SIZE))
    assert _arena(on) <= _arena(off)


def test_the_first_relu6_output_read_later_is_written_over_only_by_the_add(relu_residual):
    (_, planner), _ = relu_residual
    report = _report(planner)
    add = report.decisions[-1]
    # the add reads the second ReLU6 (dies there) and the first (dies there too): it takes the first
    # input whose bytes nobody reads later; every ReLU6 takes its convolution's bytes.
    assert add.shared and all(d.shared for d in report.decisions), report.summary()


def test_an_int8_expansion_beside_its_relu6_is_held_once():
    class Block(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.expand, self.act, self.project = nn.Conv2d(3, 48, 1), nn.ReLU6(), nn.Conv2d(48, 8, 1)

        def forward(self, x):
            return self.project(self.act(self.expand(x)))

    shape = (1, 3, 16, 16)
    program = quantized_program(Block(), (torch.randn(shape),))
    (on, with_lever), (off, without) = _xnnpack(program, True), _xnnpack(program, False)
    bound_on = lower_bound(with_lever.results["forward"].problem)
    bound_off = lower_bound(without.results["forward"].problem)
    expanded = 48 * 16 * 16  # int8 bytes of the expansion (and of its ReLU6)
    assert bound_off >= 2 * expanded > bound_on, (bound_on, bound_off)
    assert bound_on <= expanded + 8 * 16 * 16 + 64, (bound_on, bound_off)  # beside the projection only
    _same_outputs(on, off, _calls(shape))


@pytest.mark.parametrize(
    "seed", [*range(2), *(pytest.param(seed, marks=pytest.mark.slow) for seed in range(2, 12))]
)
def test_random_int8_cnns_with_every_lever_run_bit_identical_to_them_without_it(seed):
    module, example = random_cnn(seed)
    program = quantized_program(module, example, seed=seed)
    (on, planner), (off, _) = _xnnpack(program, True, reorder=True), _xnnpack(program, False, reorder=True)
    _same_outputs(on, off, _calls(example[0].shape, seed))
    # an int8 ReLU6 or residual add is its own delegate (ReLU fuses into its convolution): decided
    separate = any(isinstance(m, nn.ReLU6) or getattr(m, "residual", False) for m in module.modules())
    assert bool(_report(planner).decisions) == separate, _report(planner).summary()


def test_portable_float_chain_written_in_place_matches_eager():
    class Chain(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv = nn.Conv2d(3, 6, 3, padding=1)

        def forward(self, x):
            y = torch.relu(self.conv(x))
            z = torch.sigmoid(y * 2.0 + 1.0)
            return torch.clamp(z - y, -0.5, 0.5) * 3.0 + x.mean()

    shape = (1, 3, 9, 10)
    model = Chain().eval()
    program = torch.export.export(model, (torch.randn(shape),))
    (on, planner), (off, _) = _portable(program, True), _portable(program, False)
    report = _report(planner)
    assert len(report.shared) >= 3, report.summary()
    calls = _calls(shape)
    got = runtime.run_pte(on, calls)
    _same_outputs(on, off, calls)
    for (_, args), outputs in zip(calls, got, strict=True):
        torch.testing.assert_close(outputs[0], model(*args))


def test_refusals_name_the_input_read_later_the_graph_input_and_the_returned_output():
    class Cases(nn.Module):
        def forward(self, x):
            a = torch.relu(x)  # x is the caller's: never written over
            b = torch.sigmoid(a)  # a is read again below
            c = a + b  # returned: the caller's bytes, not the arena's to share
            return c

    program = torch.export.export(Cases(), (torch.randn(2, 5),))
    _, planner = _portable(program, True)
    decisions = {d.instruction: d for d in _report(planner).decisions}
    reasons = {name: set(d.reasons) for name, d in decisions.items() if not d.shared}
    assert Refusal.GRAPH_INPUT in reasons.pop(next(n for n in reasons if "relu" in n))
    assert Refusal.OLD_VALUE_READ_LATER in reasons.pop(next(n for n in reasons if "sigmoid" in n))
    assert Refusal.GRAPH_OUTPUT in reasons.pop(next(n for n in reasons if "add" in n))
    assert not reasons


class Stem(nn.Module):
    """MobileNetV2's first blocks in small: stride-2 stem, depthwise, projection, expansion, all ReLU6."""

    def __init__(self) -> None:
        super().__init__()
        act = nn.ReLU6()
        self.layers = nn.Sequential(
            nn.Conv2d(3, 16, 3, 2, 1),
            act,
            nn.Conv2d(16, 16, 3, 1, 1, groups=16),
            act,
            nn.Conv2d(16, 8, 1),
            nn.Conv2d(8, 48, 1),
            act,
            nn.Conv2d(48, 48, 3, 2, 1, groups=48),
            act,
            nn.Conv2d(48, 8, 1),
        )

    def forward(self, x):
        return self.layers(x)


def test_the_tiling_search_counts_what_the_lever_does_to_the_lowered_program():
    shape = (1, 3, 32, 32)
    program = quantized_program(Stem(), (torch.randn(shape),))
    # elementwise in place is on with tiling; few bands keep the tiled lowering quick
    tiler = PlannerPass(alloc_graph_input=False, tiling=TilingOptions(max_patches=4))
    tiled = tiler.tile(program)
    report = tiler.tiling_reports["forward"]
    assert report.tiled, report.summary()
    whole, untiled = _xnnpack(program, True)
    # the search's untiled peak is the lowered program's bound with the lever, below the one without
    assert report.base_peak == lower_bound(untiled.results["forward"].problem)
    without = search(
        program.graph_module.graph, TilingOptions(input_in_arena=False, elementwise_in_place=False)
    )
    assert report.base_peak < without.base_peak
    edge = to_edge_transform_and_lower(tiled, partitioner=[XnnpackPartitioner(per_op_mode=True)])
    banded = edge.to_executorch(ExecutorchBackendConfig(memory_planning_pass=tiler))
    assert _report(tiler).shared
    assert report.peak == lower_bound(tiler.results["forward"].problem)
    _same_outputs(banded, whole, _calls(shape))
