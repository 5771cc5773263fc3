"""`memplan.substituted(tiling=...)`: the exported programs a flow hands to `to_edge` or
`to_edge_transform_and_lower` are tiled first, wherever the flow bound those names; the planned
program runs like the untiled one; a failure of tiling leaves that method untiled and says why."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from executorch.exir import ExecutorchBackendConfig, to_edge  # bound before any substitution
from executorch.exir.passes import MemoryPlanningPass
from executorch.runtime import Runtime

import memplan
from memplan.planner.substitute import edge_tiling
from memplan.planner.tiling import TilingOptions
from tests.planner.tiling_models import Expand

CALLS = 3


def _exported() -> torch.export.ExportedProgram:
    torch.manual_seed(0)
    return torch.export.export(Expand().eval(), (torch.randn(1, 3, 40, 40),), strict=False)


def _user_flow(lower: str):
    """What an export script does: lower with its own call, plan with its own stock pass."""
    from executorch.exir import to_edge_transform_and_lower  # imported inside the block

    program = _exported()
    edge = to_edge(program) if lower == "to_edge" else to_edge_transform_and_lower(program)
    return edge.to_executorch(ExecutorchBackendConfig(memory_planning_pass=MemoryPlanningPass()))


def _outputs(buffer: bytes) -> list[np.ndarray]:
    program = Runtime.get().load_program(buffer)  # kept alive while its method runs
    method = program.load_method("forward")
    generator = torch.Generator().manual_seed(1)
    return [method.execute([torch.randn(1, 3, 40, 40, generator=generator)])[0].numpy() for _ in range(CALLS)]


@pytest.mark.parametrize("lower", ["to_edge", "to_edge_transform_and_lower"])
def test_a_flow_lowering_itself_is_tiled_and_runs_like_the_untiled_program(lower: str) -> None:
    untiled = _user_flow(lower)
    with memplan.substituted(solver="bestfit", tiling=TilingOptions()) as run:
        tiled = _user_flow(lower)
    (row,) = run.programs[0].methods
    assert row.planner == "memplan", row.note
    assert row.tiling.tiled and row.tiling.patches >= 2
    assert row.result.tiling is row.tiling  # the PlannerPass attached later reports it
    columns = run.programs[0].rows()[0]
    assert columns["bands"] == row.tiling.patches and columns["extra_macs"] == row.tiling.extra_macs <= 0.15
    untiled_arena = sum(untiled.executorch_program.execution_plan[0].non_const_buffer_sizes)
    assert row.memplan_bytes < untiled_arena
    for got, want in zip(_outputs(tiled.buffer), _outputs(untiled.buffer), strict=True):
        np.testing.assert_allclose(got, want, atol=1e-4, rtol=1e-4)
    assert not hasattr(to_edge, "__wrapped_by_memplan__")  # restored


def test_a_method_whose_tiling_fails_is_lowered_untiled_and_says_why(monkeypatch) -> None:
    def broken(program, options):
        raise RuntimeError("band 3 has no rows\nmore detail")

    monkeypatch.setattr(edge_tiling, "tile", broken)
    untiled = _user_flow("to_edge")
    with memplan.substituted(solver="bestfit", tiling=True) as run:
        built = _user_flow("to_edge")
    (row,) = run.programs[0].methods
    assert row.planner == "memplan"
    assert row.tiling == "tiling failed (RuntimeError: band 3 has no rows); lowered untiled"
    assert "tiling failed (RuntimeError: band 3 has no rows)" in row.result.note
    assert run.programs[0].rows()[0]["bands"] == 0
    assert row.memplan_bytes <= sum(untiled.executorch_program.execution_plan[0].non_const_buffer_sizes)
    for got, want in zip(_outputs(built.buffer), _outputs(untiled.buffer), strict=True):
        np.testing.assert_array_equal(got, want)


def test_without_tiling_the_entry_points_are_left_alone() -> None:
    import executorch.exir as exir

    original = to_edge
    with memplan.substituted(solver="bestfit"):
        assert exir.to_edge is original
    with memplan.substituted(solver="bestfit", tiling=True):
        assert exir.to_edge.__wrapped_by_memplan__ is original
        assert globals()["to_edge"] is exir.to_edge  # this module's own binding, too
    assert exir.to_edge is original and globals()["to_edge"] is original


def test_only_the_flows_own_call_tiles_not_the_calls_executorch_makes_inside_it(monkeypatch) -> None:
    """Regression: under `memplan run --tiling`, int8 MobileNetV2's program was tiled by the script's
    call, then a call ExecuTorch made inside it (on another program) replaced the method's report."""
    tiled = []
    monkeypatch.setattr(
        edge_tiling, "tile", lambda program, options: tiled.append(program) or _Tiled(program)
    )
    tiling = edge_tiling.EdgeTiling(TilingOptions())
    inner = tiling.wrapped(lambda programs: programs, "to_edge")
    outer = tiling.wrapped(lambda programs: inner(_exported()), "to_edge")
    program = _exported()
    outer(program)
    assert tiled == [program] and set(tiling.take(["forward"])) == {"forward"}
    inner(program)  # a call of its own, later: tiled again
    assert len(tiled) == 2


class _Tiled:
    def __init__(self, program) -> None:
        self.program, self.report = program, "report"


@pytest.mark.parametrize("keyword", [True, False], ids=["partitioner=", "positional"])
def test_the_search_counts_what_the_flows_own_partitioner_leaves_in_the_arena(keyword: bool) -> None:
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner

    partitioners = [XnnpackPartitioner(per_op_mode=True)]
    with memplan.substituted(solver="bestfit", tiling=TilingOptions()) as run:
        from executorch.exir import to_edge_transform_and_lower  # as a script imports it

        program = _exported()
        if keyword:
            edge = to_edge_transform_and_lower(program, partitioner=partitioners)
        else:
            edge = to_edge_transform_and_lower(program, None, partitioners)
        edge.to_executorch(ExecutorchBackendConfig(memory_planning_pass=MemoryPlanningPass()))
    (row,) = run.programs[0].methods
    assert not isinstance(row.tiling, str), row.tiling
    read_off = row.tiling.options.partitioned
    assert read_off is not None and read_off.kept_whole  # XNNPACK keeps ops from decomposition
    # XNNPACK fuses each convolution with its ReLU: the convolution's output stays inside
    assert read_off.inside == {n.name for n in program.graph.nodes if "conv2d" in n.name}
    assert row.tiling.tiled, row.tiling.summary()
