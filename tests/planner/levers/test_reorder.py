"""Reorder: instructions sunk to their first user before planning. Programs reordered run in
executorch.runtime equal to the same program lowered without the lever (with the other levers on),
the lower bound never grows, state keeps its write-backs' place, and reorder=False changes nothing."""

from __future__ import annotations

import pytest
import torch
from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
from executorch.exir import ExecutorchBackendConfig, to_edge_transform_and_lower

from memplan.experiments.zoo import ZooModel, runtime
from memplan.experiments.zoo.models import hybrid
from memplan.peak_bound import lower_bound
from memplan.planner.levers.reorder import ReorderLever, ReorderReport
from memplan.planner.pass_ import PlannerPass
from memplan.planner.tiling import TilingOptions, tile
from tests.planner.random_cnns import random_cnn
from tests.planner.tiling_models import Int8Stage, quantized_program

SIZE = (1, 3, 30, 31)


def _xnnpack(program: torch.export.ExportedProgram, reorder: bool):
    planner = PlannerPass(alloc_graph_input=False, reorder=reorder)
    edge = to_edge_transform_and_lower(program, partitioner=[XnnpackPartitioner(per_op_mode=True)])
    return edge.to_executorch(ExecutorchBackendConfig(memory_planning_pass=planner)), planner


def _report(planner: PlannerPass) -> ReorderReport:
    report = planner.results["forward"].reorder_report
    assert report is not None
    return report


def test_int8_programs_reordered_run_equal_to_them_unreordered_tiled_or_not():
    program = quantized_program(Int8Stage(), (torch.randn(SIZE),))
    tiled = tile(program, TilingOptions(input_in_arena=False)).program
    calls = [("forward", (torch.randn(SIZE),)) for _ in range(3)]
    moved = 0
    for source in (program, tiled):
        (on, with_lever), (off, without) = _xnnpack(source, True), _xnnpack(source, False)
        report = _report(with_lever)
        moved += report.instructions_moved
        assert _bound(with_lever) <= _bound(without), report.summary()
        got, want = runtime.run_pte(on, calls), runtime.run_pte(off, calls)
        assert all(torch.equal(g[0], w[0]) for g, w in zip(got, want, strict=True))
        assert not torch.equal(got[0][0], got[1][0])  # different inputs, different outputs
    assert moved > 0  # the lever did reorder something, so the checks above could fail


@pytest.mark.parametrize("seed", range(6))
def test_random_cnns_reordered_equal_unreordered_and_the_bound_never_grows(seed):
    module, example = random_cnn(seed)
    program = torch.export.export(module, example)
    (on, with_lever), (off, without) = _xnnpack(program, True), _xnnpack(program, False)
    assert _bound(with_lever) <= _bound(without), _report(with_lever).summary()
    generator = torch.Generator().manual_seed(seed)
    calls = [("forward", (torch.randn(example[0].shape, generator=generator),)) for _ in range(3)]
    got, want = runtime.run_pte(on, calls), runtime.run_pte(off, calls)
    assert all(torch.equal(g[0], w[0]) for g, w in zip(got, want, strict=True))


def _bound(planner: PlannerPass) -> int:
    return lower_bound(planner.results["forward"].problem)


def _lowered(model: ZooModel, **options):
    planner = PlannerPass(solver="bestfit", **options)
    program = runtime.lower(model, memory_planning_pass=planner)
    runtime.check_outputs(model, program.buffer)  # every call against eager, state carried over
    return program, planner


def test_a_kv_cache_decoder_reordered_still_matches_eager_and_keeps_writes_after_reads():
    model = hybrid.llama_kv(n_layers=2, dim=32, n_heads=2, n_kv_heads=1, seq_len=8, name="tiny_llama")
    for state_in_place in (True, False):
        _, planner = _lowered(model, state_in_place=state_in_place, reorder=True)
        _, without = _lowered(model, state_in_place=state_in_place, reorder=False)
        assert _bound(planner) <= _bound(without), _report(planner).summary()


def test_reorder_off_switches_the_lever_off():
    program = quantized_program(Int8Stage(), (torch.randn(SIZE),))
    _, planner = _xnnpack(program, False)
    assert planner.results["forward"].reorder_report is None
    assert not any(isinstance(lever, ReorderLever) for lever in planner.levers)
    assert not any(isinstance(lever, ReorderLever) for lever in PlannerPass().levers)  # off by default
    assert any(isinstance(lever, ReorderLever) for lever in PlannerPass(reorder=True).levers)
