"""State in place with cat fusion (issue 20): a cat fused into a state's own bytes makes each
piece's producer write into the state as it runs, so the state's write window starts at the
earliest piece. Every program here runs in executorch.runtime with the default `PlannerPass()`
over six calls (the initial state serialized) and matches eager PyTorch."""

from __future__ import annotations

import copy
from unittest import mock

import pytest
import torch
from executorch.exir.passes.init_mutable_pass import InitializedMutableBufferPass
from torch import nn

from memplan.experiments.bench.state_report import state_copies
from memplan.experiments.zoo import ZooModel, runtime
from memplan.planner import pass_
from memplan.planner.levers.cat.decisions import CatStatus
from memplan.planner.levers.refusals import Refusal
from memplan.planner.levers.state_in_place import StateStatus
from memplan.planner.levers.write_window import ExtraWrite, late_reads
from memplan.planner.pass_ import PlannerPass
from memplan.planner.stages.plan_graph import plan_graph

N_CALLS = 6


def model(module: nn.Module, rows: int = 4) -> ZooModel:
    name = type(module).__name__
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        calls = [("forward", (torch.randn(rows, 4),)) for _ in range(N_CALLS)]
    return ZooModel(
        name,
        name,
        {"forward": (module.eval(), calls[0][1])},
        calls,
        backend_config={"passes": [InitializedMutableBufferPass(["b_s"])]},
        convert_to_linear=False,
    )


def run_default(m: ZooModel, **levers: bool):
    """Lower with PlannerPass(**levers) (default: every lever as PlannerPass() has it), check six
    calls against eager; (program, method result)."""
    pass_ = PlannerPass(**levers)
    program = runtime.lower(m, memory_planning_pass=pass_)
    runtime.check_outputs(m, program.buffer)
    return program, pass_.results["forward"]


class State8x4(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("s", torch.arange(32.0).reshape(8, 4))


# -- the two programs of the issue -----------------------------------------------------------


class CatFromStatePieces(State8x4):
    """Wrong from the first call before the fix: `a` was written over s[:4] before `b` read it."""

    def forward(self, x):
        a = self.s[4:] * 2 + x
        b = self.s[:4] + 1
        self.s.copy_(torch.cat([a, b]))
        return self.s.sum(0)


class CatRotatePure(State8x4):
    """A ring buffer rotated by a cat of two slices of itself; wrong from call 1 before the fix."""

    def forward(self, x):
        snap = self.s * 1 + x.sum()
        self.s.copy_(torch.cat([self.s[3:], self.s[:3]]))
        return snap


@pytest.mark.parametrize("module", [CatFromStatePieces, CatRotatePure], ids=lambda c: c.__name__)
def test_issue_program_matches_eager_with_the_default_pass(module):
    program, result = run_default(model(module()))
    [state] = result.state_report.decisions
    assert state.status is StateStatus.IN_PLACE and state_copies(program) == (0, 0)
    [cat] = result.cat_report.decisions
    assert cat.status is CatStatus.REFUSED and cat.reasons == (Refusal.STATE_READ_LATER,)
    assert "writes into b_s's bytes before aten_slice_copy_tensor" in cat.detail, cat.detail


# -- the generator's findings (tests/planner/random_programs.py, seeds 7, 12, 33 before the fix) --


class RotateBesideACounter(nn.Module):
    """Seed 7: the rotation read after another state's update, the rows read first."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("s0", torch.linspace(-1.0, 1.0, 24).reshape(6, 4))
        self.register_buffer("s1", torch.tensor([1], dtype=torch.int64))

    def forward(self, x):
        v0 = self.s0[4:6] * 0.5 + 1
        self.s1.copy_(self.s1 * 2 % 7 + 1)
        self.s0.copy_(torch.cat([self.s0[5:], self.s0[:5]]))
        return v0.sum(0), self.s0 * 1


class RotateThenStack(nn.Module):
    """Seed 12: a rotation of one state, then a stack state fed from another state's rows."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("s0", torch.linspace(-1.0, 1.0, 24).reshape(6, 4))
        self.register_buffer("s1", torch.linspace(-1.0, 1.0, 32).reshape(2, 4, 4))
        self.register_buffer("s2", torch.linspace(-1.0, 1.0, 24).reshape(6, 4))

    def forward(self, x):
        v0 = torch.cat([x[0:7] - 0.5, torch.sin(x[7:8])])
        self.s0.copy_(torch.cat([self.s0[5:], self.s0[:5]]))
        v2 = x[0:2] - 0.5
        self.s1.copy_(torch.stack([self.s1[1], torch.sin(self.s2[2:6])]))
        return v2.sum(0), v0.sum(0), self.s0.sum(0), self.s2 + 1, self.s1.sum(0)


class RotateReadThroughAView(nn.Module):
    """Seed 33: `v1` is a view of s0 taken before s0 rotates, so eager reads the rotated rows."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("s0", torch.linspace(-1.0, 1.0, 32).reshape(8, 4))
        self.register_buffer("s1", torch.linspace(-1.0, 1.0, 24).reshape(6, 4))

    def forward(self, x):
        v0 = torch.cat([torch.cat([self.s1[5:6] - 0.5, x[4:5] * 1.5 - 0.25]), self.s1[0:1] - 0.5])
        v1 = self.s0[0:7]
        half = torch.cat([v1[2:4].to(torch.float16), (self.s1[2:6] * 1.5 - 0.25).to(torch.float16)])
        self.s1.copy_(half.to(torch.float32))
        self.s0.copy_(torch.cat([self.s0[3:], self.s0[:3]]))
        return v0.sum(0), v1.sum(0), self.s0.sum(0)


class NestedCatIntoState(State8x4):
    """An inner cat's piece reads the state and would land in it before the outer piece reads it."""

    def forward(self, x):
        inner = torch.cat([self.s[6:], x[:2] * 2])
        self.s.copy_(torch.cat([inner, self.s[:4] + 1]))
        return self.s.sum(0)


@pytest.mark.parametrize(
    "module", [RotateBesideACounter, RotateThenStack, RotateReadThroughAView], ids=lambda c: c.__name__
)
def test_generator_finding_matches_eager_with_the_default_pass(module):
    """The cats that would overwrite a state before its old value's last read are refused for that
    reason; with slice no-ops on (the default) they stay refused (a slice placed inside a cat's
    output pins it first) and the program still matches eager."""
    _, alone = run_default(model(module(), rows=8), slice_noop=False)
    refused = {d.cat for d in alone.cat_report.decisions if Refusal.STATE_READ_LATER in d.reasons}
    assert refused
    assert all(d.status is CatStatus.REFUSED for d in alone.cat_report.decisions if d.cat in refused)
    _, default = run_default(model(module(), rows=8))
    assert all(d.status is CatStatus.REFUSED for d in default.cat_report.decisions if d.cat in refused)


def test_a_nested_cat_is_refused_with_its_outer_cat_once_its_own_copy_lands_early():
    _, result = run_default(model(NestedCatIntoState(), rows=8))
    assert [d.status for d in result.cat_report.decisions] == [CatStatus.REFUSED] * 2
    assert all(d.reasons == (Refusal.STATE_READ_LATER,) for d in result.cat_report.decisions)


# -- what stays fused ----------------------------------------------------------------------------------


class CatAfterTheLastRead(State8x4):
    """Every piece is computed after the old value's last read: the cat goes and so does the copy_."""

    def forward(self, x):
        old = self.s.sum(0) * 0.5
        a = torch.sin(x[:4] + old)
        b = x[4:] * 0.5 + old
        self.s.copy_(torch.cat([a, b]))
        return self.s.sum(0) + old


def test_a_cat_whose_pieces_follow_the_last_read_is_fused_into_the_state():
    program, result = run_default(model(CatAfterTheLastRead(), rows=8))
    [cat] = result.cat_report.decisions
    [state] = result.state_report.decisions
    assert cat.status is CatStatus.FUSED and state.status is StateStatus.IN_PLACE
    assert state_copies(program) == (0, 0)
    plan = program.executorch_program.execution_plan[0]
    assert not {"aten::cat", "aten::copy_"} & {op.name for op in plan.operators}


# -- the rule itself, on a planning graph ----------------------------------------------------------


def planning_graph(module: nn.Module, rows: int = 4) -> list[torch.fx.Node]:
    """The nodes of the graph planning receives (after the state rewrite, before cat fusion)."""
    graphs: list[torch.fx.GraphModule] = []

    def recording(planning, graph_module, *args):
        graphs.append(copy.deepcopy(graph_module))
        return plan_graph(planning, graph_module, *args)

    with mock.patch.object(pass_, "plan_graph", recording):
        runtime.lower(
            model(module, rows), memory_planning_pass=PlannerPass(solver="bestfit", cat_fusion=False)
        )
    [graph] = graphs
    return list(graph.graph.nodes)


def node(nodes: list[torch.fx.Node], prefix: str, n: int = 0) -> torch.fx.Node:
    return [x for x in nodes if x.name.startswith(prefix)][n]


def test_late_reads_starts_the_window_at_the_first_piece_written_into_the_state():
    nodes = planning_graph(CatFromStatePieces())
    state = node(nodes, "b_s")
    cat = node(nodes, "aten_cat")
    assert cat.meta["spec"] is state.meta["spec"], "state in place gave the cat the state's storage"
    a, b = cat.args[0]
    spec = state.meta["spec"]

    def inside_state(piece_offsets: dict):
        return lambda s: (spec, piece_offsets[id(s)]) if id(s) in piece_offsets else (s, 0)

    # Nothing placed inside the state: the cat itself is the first write, writeback's to judge.
    assert late_reads(nodes, lambda s: (s, 0)) == []
    # `a` placed at offset 0: its add writes the state before b's slice reads the old rows.
    [late] = late_reads(nodes, inside_state({id(a.meta["spec"]): 0}), skipped={cat})
    assert (late.state, late.writer, late.written) == ("b_s", a.name, a.meta["spec"])
    assert late.readers == (node(nodes, "aten_slice_copy", 1).name,)
    # Only `b` placed: written after every read of the old value.
    assert late_reads(nodes, inside_state({id(b.meta["spec"]): 64}), skipped={cat}) == []
    # A clone into the state before the cat, copying a slice of the state: reads at the cat are late.
    early = ExtraWrite(node(nodes, "aten_slice_copy", 1), spec, 0, 64, source=state)
    [late] = late_reads(nodes, lambda s: (s, 0), extra_writes=[early])
    assert late.writer == early.before.name and late.written is spec
    assert early.before.name in late.readers


def test_a_no_op_alias_of_the_state_reads_its_old_value():
    """A lever that makes an op's output the bytes of its input (`same_bytes`) turns reads of that
    output into reads of the state."""
    nodes = planning_graph(CatFromStatePieces())
    state, cat = node(nodes, "b_s"), node(nodes, "aten_cat")
    first_slice, second_slice = node(nodes, "aten_slice_copy", 0), node(nodes, "aten_slice_copy", 1)
    spec = state.meta["spec"]
    a = cat.args[0][0]
    where = {id(a.meta["spec"]): 0, id(second_slice.meta["spec"]): 0}
    place = lambda s: (spec, where[id(s)]) if id(s) in where else (s, 0)  # noqa: E731
    [late] = late_reads(nodes, place, skipped={cat, second_slice}, same_bytes={second_slice: state})
    b_add = next(iter(second_slice.users))
    assert late.readers == (b_add.name,), "b's add reads the old rows through the no-op slice"
    assert first_slice.name not in late.readers


class SliceReadAfterUpdate(State8x4):
    """`top` is a view: it reads the new rows, so the program slices the new value."""

    def forward(self, x):
        top = self.s[:4]
        self.s.copy_(self.s * 0.5 + x)
        return top * 2


def test_a_no_op_alias_taken_of_the_old_value_may_not_be_read_after_the_update():
    _, result = run_default(model(SliceReadAfterUpdate(), rows=8))
    assert [d.status for d in result.state_report.decisions] == [StateStatus.IN_PLACE]
    nodes = planning_graph(SliceReadAfterUpdate(), rows=8)
    state, top = node(nodes, "b_s"), node(nodes, "aten_slice_copy")
    spec = state.meta["spec"]
    producer = node(nodes, "aten_add_tensor")
    assert producer.meta["spec"] is spec, "the update is written in place"
    # Edit the graph: the slice copies the OLD top rows before the update, as a program reading
    # a copy of them would; its reader stays after the update.
    top.replace_input_with(producer, state)
    first = node(nodes, "aten_mul_tensor")
    first.prepend(top.kwargs["out"])
    first.prepend(top)
    nodes = list(state.graph.nodes)
    assert late_reads(nodes, lambda s: (s, 0)) == [], "as a copy of its own, the slice is read safely"
    place = lambda s: (spec, 0) if s is top.meta["spec"] else (s, 0)  # noqa: E731
    [late] = late_reads(nodes, place, skipped={top}, same_bytes={top: state})
    assert (late.writer, late.written) == (producer.name, spec)
    assert late.readers == tuple(u.name for u in top.users)
    # Taken of the new value (after the update), the same alias is read safely.
    producer.append(top)
    assert late_reads(list(state.graph.nodes), place, skipped={top}, same_bytes={top: state}) == []
