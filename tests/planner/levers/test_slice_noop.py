"""Slice, select and split as no-ops on the portable runtime (memplan.planner.levers.slice_noop).

Each program is planned by `PlannerPass(slice_noop=True)` with the other levers
on (cat fusion, state in place), run in `executorch.runtime` over several calls
and compared with eager PyTorch; the report says which ops went and why the
others stayed. One program writes the sliced tensor in place while the slice is
still read: that no-op must be refused.
"""

from __future__ import annotations

import pytest
import torch
from helpers.executorch_programs import _model
from torch import nn

from memplan import PlannerPass
from memplan.experiments.zoo import runtime
from memplan.planner.levers.refusals import Refusal
from memplan.planner.levers.slice_noop.analysis import slice_kind
from memplan.validate import check_plan


class Rows(nn.Module):
    """Slices and a select along the outermost dim of an activation, read late."""

    def forward(self, x):
        a = torch.relu(x) + 1  # (6, 8)
        top, bottom, row = a[0:2], a[2:6], a[3]
        return (torch.sin(top).sum(0) + torch.cos(bottom).sum(0)) * row


class Pieces(nn.Module):
    """A split along the outermost dim, every piece used, and a slice with a leading 1."""

    def forward(self, x):
        a = x * 2 + 1  # (1, 8, 4)
        first, second = torch.split(a[0], [2, 6])
        b = torch.tanh(a)[:, 4:]  # leading dim 1: still one contiguous run
        return first.sum(0) + second.sum(0) + b.sum(1)[0]


class Columns(nn.Module):
    """A slice along an inner dim interleaves rows: it keeps its copy (INNER_DIM)."""

    def forward(self, x):
        a = x + 1  # (4, 8)
        return torch.sin(a[:, 2:6]) * 2


class WrittenWhileRead(nn.Module):
    """The sliced activation is written in place (index_put_ under the reinplace pass) while the
    slice is still read: placing the slice inside it would read the new values."""

    def forward(self, x, idx, v):
        a = x * 2  # (4, 8)
        head = a[0:2]
        b = a.index_put((idx,), v)  # becomes index_put_ on a's bytes
        return torch.sin(b).sum(0) + torch.cos(head).sum(0) * 3


class StateSlice(nn.Module):
    """A mutable buffer sliced before its update (state in place on): the state keeps its place."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("state", torch.zeros(4, 8))

    def forward(self, x):
        y = torch.relu(x) + 1
        old = self.state[1:3] * 1.0
        self.state.add_(y)
        return torch.cat([old, self.state[0:2]]).sum(0)


class InnerFirst(nn.Module):
    """A small slice read before a larger slice of the same input that holds it (random program
    seed 11): the small one nests in the larger, which must start living when the small one does."""

    def forward(self, x):
        v = torch.sin(x[3:6])  # (3, 4)
        inner = v[1:2] * 2  # read first
        outer = v[0:2]  # produced later, holds v[1:2]
        return torch.cat([inner, outer]).sum(0) + v.sum(0)


class SliceOfCopiedCatInput(nn.Module):
    """A slice of a cat input, read after the cat (issue 31, item 11): slice no-ops place the slice
    inside `a`, so `a` holds a member and partial fusion clones it into its slot; its bytes must stay
    until the slice's last read, not only until the clone."""

    def forward(self, x):
        peak = (x.repeat(16, 1) * 2).sum(0)  # an early peak: keeping `a` longer grows no bound
        a = torch.sin(x) + peak
        s = a[1:3]
        c = torch.cat([a, torch.cos(x)])
        return c, s + 1


class DataDependentStart(nn.Module):
    """A slice whose start is read from a tensor (`.item()`), as in ExecuTorch's own
    test_constraint_present_after_dce: where it starts is only known at run time."""

    def forward(self, x, y):
        a = torch.sin(x) * 2  # (10, 4): an activation, so only the start can refuse the no-op
        z = y.item()
        torch._check(z >= 0)
        torch._check(z <= 8)
        return torch.cos(a[z : z + 2]) + 1


MODELS = {
    "rows": lambda: _model("rows", Rows(), lambda: (torch.randn(6, 8),), n_calls=3),
    "pieces": lambda: _model("pieces", Pieces(), lambda: (torch.randn(1, 8, 4),), n_calls=3),
    "columns": lambda: _model("columns", Columns(), lambda: (torch.randn(4, 8),), n_calls=3),
    "written_while_read": lambda: _model(
        "written_while_read",
        WrittenWhileRead(),
        lambda: (torch.randn(4, 8), torch.tensor([0, 1]), torch.randn(2, 8)),
        n_calls=3,
        backend_config={"run_reinplace_pass": True},
    ),
    "state_slice": lambda: _model("state_slice", StateSlice(), lambda: (torch.randn(4, 8),), n_calls=4),
    "inner_first": lambda: _model("inner_first", InnerFirst(), lambda: (torch.randn(8, 4),), n_calls=3),
    "data_dependent_start": lambda: _data_dependent_start(),
    "copied_cat_input": lambda: _model(
        "copied_cat_input", SliceOfCopiedCatInput(), lambda: (torch.randn(4, 4),), n_calls=3
    ),
}


def _data_dependent_start():
    model = _model(
        "data_dependent_start", DataDependentStart(), lambda: (torch.randn(10, 4), torch.tensor([3]))
    )
    model.calls = [("forward", (torch.randn(10, 4), torch.tensor([start]))) for start in (3, 0, 8)]
    return model


def planned(name: str, **options):
    model = MODELS[name]()
    pass_ = PlannerPass(solver="bestfit", slice_noop=True, cat_fusion=True, state_in_place=True, **options)
    program = runtime.lower(model, memory_planning_pass=pass_)
    runtime.check_outputs(model, program.buffer)  # runtime == eager over every call
    result = pass_.results["forward"]
    check_plan(result.problem, result.plan)
    assert result.slice_noops is not None
    return program, result.slice_noops


def remaining_slices(program) -> int:
    graph = program.exported_program().graph_module.graph
    return sum(1 for n in graph.nodes if slice_kind(n))


def test_outermost_slices_and_select_become_no_ops():
    program, noops = planned("rows")
    assert {d.op for d in noops.removed} == {"slice", "select"} and len(noops.nodes_removed) == 3
    assert remaining_slices(program) == 0
    assert noops.copy_bytes_removed == (2 + 4 + 1) * 8 * 4


def test_split_pieces_and_a_leading_one_slice_become_no_ops():
    program, noops = planned("pieces")
    kinds = {d.op for d in noops.removed}
    assert "split" in kinds and "slice" in kinds
    assert remaining_slices(program) == 0
    split = [d for d in noops.decisions if d.op == "split"]
    assert [d.offset for d in split] == [0, 2 * 4 * 4] and all(d.removed for d in split)


def test_inner_dim_slice_keeps_its_copy():
    program, noops = planned("columns")
    (decision,) = noops.decisions
    assert not decision.removed and Refusal.INNER_DIM in decision.reasons
    assert remaining_slices(program) == 1


def test_slice_of_a_tensor_written_while_read_is_refused():
    program, noops = planned("written_while_read")
    (decision,) = [d for d in noops.decisions if d.op == "slice"]
    assert not decision.removed and Refusal.INPUT_WRITTEN_IN_PLACE in decision.reasons
    assert remaining_slices(program) >= 1


def test_slice_starting_at_a_run_time_value_is_refused():
    """Regression: the lever read the start as a constant and raised a TypeError inside
    `to_executorch` (ExecuTorch's test_constraint_present_after_dce with slice no-ops on)."""
    program, noops = planned("data_dependent_start")
    (decision,) = noops.decisions
    assert not decision.removed and decision.reasons == (Refusal.DYNAMIC_OFFSET,)
    assert remaining_slices(program) == 1


def test_slices_of_state_are_refused_and_state_stays_correct():
    _, noops = planned("state_slice")
    state_slices = [d for d in noops.decisions if "state" in d.detail or "mutable" in d.detail]
    assert state_slices and not any(d.removed for d in state_slices)
    assert all(Refusal.INPUT_SOURCE in d.reasons for d in state_slices)


def test_slice_read_before_the_larger_slice_holding_it():
    """Regression: the holder (v[0:2]) is produced after its member (v[1:2]); the group used to
    keep the holder's own start and the problem was rejected (member lifetime not inside the
    parent's). The holder now starts with its member, as cat fusion widens its parents."""
    program, noops = planned("inner_first")
    assert len(noops.nodes_removed) == 2 and remaining_slices(program) == 1  # x[3:6]: a graph input
    inner, outer = sorted(noops.removed, key=lambda d: d.nbytes)
    assert (inner.input, inner.offset) == (outer.output, 4 * 4)
    holder = noops.problem.buffer(outer.output)
    assert holder.start <= noops.problem.buffer(inner.output).start
    assert holder.start < noops.problem_without.buffer(outer.output).start


def test_slice_of_a_cat_input_cloned_by_partial_fusion_keeps_the_input_alive():
    """Regression (issue 31, item 11): the clone shortened `a`'s lifetime below its slice's and
    the problem was rejected (group member lifetime not inside the parent's)."""
    model = MODELS["copied_cat_input"]()
    pass_ = PlannerPass(solver="bestfit", slice_noop=True, cat_fusion_partial=True)
    program = runtime.lower(model, memory_planning_pass=pass_)
    runtime.check_outputs(model, program.buffer)
    result = pass_.results["forward"]
    [d] = result.slice_noops.removed  # type: ignore[union-attr]
    [cat] = result.cat_report.decisions  # type: ignore[union-attr]
    assert cat.status.value == "partial" and [i.placement for i in cat.inputs] == ["copy", "member"]
    assert remaining_slices(program) == 0
    holder, member = result.problem.buffer(d.input), result.problem.buffer(d.output)
    assert holder.end == member.end, "the clone's source lives until its slice's last read"


@pytest.mark.parametrize("name", ["rows", "pieces"])
def test_slice_noop_off_keeps_every_copy(name):
    model = MODELS[name]()
    pass_ = PlannerPass(solver="bestfit", slice_noop=False)
    program = runtime.lower(model, memory_planning_pass=pass_)
    runtime.check_outputs(model, program.buffer)
    assert pass_.results["forward"].slice_noops is None and remaining_slices(program) > 0


def test_forcing_the_refused_no_op_gives_wrong_outputs(monkeypatch):
    """The refusal matters: with the in-place write ignored, the program reads the new values."""
    import memplan.planner.levers.slice_noop.analysis as analysis

    original = analysis._input_reasons

    def ignoring_writes(*args):
        return [r for r in original(*args) if r[0] is not Refusal.INPUT_WRITTEN_IN_PLACE]

    monkeypatch.setattr(analysis, "_input_reasons", ignoring_writes)
    model = MODELS["written_while_read"]()
    pass_ = PlannerPass(solver="bestfit", slice_noop=True)
    program = runtime.lower(model, memory_planning_pass=pass_)
    assert pass_.results["forward"].slice_noops.nodes_removed  # type: ignore[union-attr]
    with pytest.raises(AssertionError, match="mismatch"):
        runtime.check_outputs(model, program.buffer)


def test_slice_noops_are_on_by_default():
    """`PlannerPass()` removes the no-op slices (issue 31, item 9: on once ExecuTorch's tests pass)."""
    model = MODELS["rows"]()
    pass_ = PlannerPass()
    program = runtime.lower(model, memory_planning_pass=pass_)
    runtime.check_outputs(model, program.buffer)
    noops = pass_.results["forward"].slice_noops
    assert noops is not None and len(noops.nodes_removed) == 3 and remaining_slices(program) == 0
