"""`memplan.substituted`: every binding site of ExecuTorch's `MemoryPlanningPass` reaches memplan, with the
stock pass's own arguments; a method memplan fails on falls back to the stock pass; programs run as stock's."""

from __future__ import annotations

import pytest
import torch
from executorch.exir import ExecutorchBackendConfig, to_edge
from executorch.exir.passes import MemoryPlanningPass
from executorch.exir.passes import MemoryPlanningPass as ImportedEarly  # a flow's own spelling
from executorch.runtime import Runtime
from torch import nn

import memplan
from memplan.errors import UsageError
from memplan.planner import pass_
from memplan.problem import BufferKind

CALLS = 3


class Branches(nn.Module):
    """A cat memplan fuses, and a state updated every call (its value must persist)."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("state", torch.zeros(8, 8))
        self.a, self.b = nn.Linear(8, 8), nn.Linear(8, 8)

    def forward(self, x):
        y = torch.cat([self.a(x).relu(), self.b(x).sigmoid()], 0)
        self.state.add_(y)
        return y * 2 + self.state


def example() -> tuple[torch.Tensor]:
    return (torch.arange(32, dtype=torch.float32).reshape(4, 8) / 10,)


def edge(methods: tuple[str, ...] = ("forward",)):
    torch.manual_seed(0)
    model = Branches().eval().requires_grad_(False)
    return to_edge({m: torch.export.export(model, example()) for m in methods})


def outputs(program, method: str = "forward") -> list[torch.Tensor]:
    """Every output of `CALLS` calls of `method`, the state carried from call to call."""
    loaded_program = Runtime.get().load_program(program.buffer)  # alive while its method runs
    loaded = loaded_program.load_method(method)
    return [t.clone() for _ in range(CALLS) for t in loaded.execute(list(example()))]


def assert_runs_as_stock(result) -> None:
    """Each method of memplan's program gives the stock program's outputs, bit for bit, call after call."""
    for row in result.methods:
        for mine, theirs in zip(
            outputs(result.program, row.method), outputs(result.stock_program, row.method)
        ):
            assert torch.equal(mine, theirs), row.method


class CountingPass(MemoryPlanningPass):
    """A flow's own subclass: its own arguments, its own `run` around the base's."""

    runs: list[str] = []

    def __init__(self) -> None:
        super().__init__(alloc_graph_input=False)
        self.label = "counting"

    def run(self, graph_module, graph_signature=None):
        CountingPass.runs.append(self.label)
        return super().run(graph_module, graph_signature)


BINDING_SITES = {
    "no config": lambda e: e.to_executorch(),
    "ExecutorchBackendConfig default": lambda e: e.to_executorch(ExecutorchBackendConfig()),
    "direct": lambda e: e.to_executorch(
        ExecutorchBackendConfig(memory_planning_pass=MemoryPlanningPass(alloc_graph_input=False))
    ),
    "imported before": lambda e: e.to_executorch(
        ExecutorchBackendConfig(memory_planning_pass=ImportedEarly(alloc_graph_output=False))
    ),
    "subclass": lambda e: e.to_executorch(ExecutorchBackendConfig(memory_planning_pass=CountingPass())),
}


@pytest.mark.parametrize("site", list(BINDING_SITES))
def test_every_binding_site_is_planned_by_memplan(site: str) -> None:
    with memplan.substituted(solver="bestfit", build_stock=True) as run:
        BINDING_SITES[site](edge())
    (result,) = run.programs
    (row,) = result.methods
    assert row.planner == "memplan", row.note
    assert row.memplan_bytes <= row.stock_bytes
    assert row.memplan_bytes == sum(
        result.program.executorch_program.execution_plan[0].non_const_buffer_sizes
    )
    assert row.stock_bytes == sum(
        result.stock_program.executorch_program.execution_plan[0].non_const_buffer_sizes
    )
    assert row.stock_sizes == row.result.stock_sizes  # memplan's replica of the stock figure is exact
    assert_runs_as_stock(result)


def test_the_stock_pass_arguments_keep_their_meaning() -> None:
    CountingPass.runs.clear()
    with memplan.substituted(solver="bestfit") as run:
        BINDING_SITES["direct"](edge())
        BINDING_SITES["no config"](edge())
        BINDING_SITES["subclass"](edge())
    kinds = [{b.kind for b in p.methods[0].result.problem.buffers} for p in run.programs]
    assert (
        BufferKind.GRAPH_INPUT not in kinds[0] and BufferKind.GRAPH_INPUT in kinds[1]
    )  # alloc_graph_input=False kept
    assert BufferKind.GRAPH_INPUT not in kinds[2]  # the subclass's super().__init__ arguments
    assert CountingPass.runs == ["counting"]  # its own run ran, around memplan's
    assert ExecutorchBackendConfig().memory_planning_pass.__class__ is MemoryPlanningPass  # restored


def test_per_method_dict_and_a_method_left_out() -> None:
    with memplan.substituted(solver="bestfit", build_stock=True) as run:
        edge(("forward", "other")).to_executorch(
            ExecutorchBackendConfig(
                memory_planning_pass={"forward": MemoryPlanningPass(alloc_graph_input=False)}
            )
        )
    (result,) = run.programs
    assert [m.planner for m in result.methods] == ["memplan", "memplan"]
    program_row = result.rows()[-1]
    assert program_row["method"] == "(program)"
    assert program_row["memplan_bytes"] == sum(result.program_sizes(stock=False))
    assert_runs_as_stock(result)


def test_a_method_memplan_fails_on_falls_back_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    original = pass_.plan_graph

    def failing(planning, graph_module, graph_signature, where, *args):
        if where == "other":
            raise RuntimeError("forced failure for the test")
        return original(planning, graph_module, graph_signature, where, *args)

    monkeypatch.setattr(pass_, "plan_graph", failing)
    with memplan.substituted(solver="bestfit", build_stock=True) as run:
        edge(("forward", "other")).to_executorch()
    (result,) = run.programs
    assert result.method("forward").planner == "memplan"
    other = result.method("other")
    assert other.planner == "stock" and "forced failure for the test" in other.note
    assert other.memplan_bytes == other.stock_bytes
    assert result.attempts == 2
    assert_runs_as_stock(result)


def test_shared_state_falls_back_for_every_method_sharing_it(monkeypatch: pytest.MonkeyPatch) -> None:
    original = pass_.plan_graph

    def failing(planning, graph_module, graph_signature, where, *args):
        if where == "other":
            raise RuntimeError("forced failure")
        return original(planning, graph_module, graph_signature, where, *args)

    monkeypatch.setattr(pass_, "plan_graph", failing)
    with memplan.substituted(solver="bestfit", build_stock=True) as run:
        edge(("forward", "other")).to_executorch(
            ExecutorchBackendConfig(memory_planning_pass=MemoryPlanningPass(share_mutable_buffers=True))
        )
    (result,) = run.programs
    assert [m.planner for m in result.methods] == ["stock", "stock"]
    assert "shared" in result.method("forward").note
    assert_runs_as_stock(result)


def test_a_failure_after_planning_gives_the_stock_program(monkeypatch: pytest.MonkeyPatch) -> None:
    """memplan planned every method, then the emitter failed: the stock pass plans it all."""
    from executorch.exir.program import _program

    original = _program.ExecutorchProgramManager.__init__
    calls = []

    def emit(self, programs, *args, **kwargs):
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("forced emitter failure")
        return original(self, programs, *args, **kwargs)

    monkeypatch.setattr(_program.ExecutorchProgramManager, "__init__", emit)
    with memplan.substituted(solver="bestfit") as run:
        program = edge().to_executorch()
    (row,) = run.programs[0].methods
    assert row.planner == "stock" and "forced emitter failure" in row.note
    assert len(outputs(program)) == CALLS


def test_the_flows_own_error_is_raised_as_without_memplan() -> None:
    class Broken(MemoryPlanningPass):
        def run(self, graph_module, graph_signature=None):
            raise ValueError("the flow's own bug")

    with pytest.raises(ValueError, match="the flow's own bug"), memplan.substituted(solver="bestfit"):
        edge().to_executorch(ExecutorchBackendConfig(memory_planning_pass=Broken()))


def test_bad_options_fail_before_the_flow_runs() -> None:
    with pytest.raises(Exception, match="nosuchsolver"), memplan.substituted(solver="nosuchsolver"):
        pytest.fail("the block must not run")
    with memplan.substituted(), pytest.raises(UsageError, match="already active"), memplan.substituted():
        pass
