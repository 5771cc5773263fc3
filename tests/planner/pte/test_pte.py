"""`.pte` files built by ExecuTorch's stock planner: inspected, re-planned, and run against the original.

The models live only here (not in the zoo): a single-method MLP where the stock plan leaves a hole,
the same MLP partly delegated to XNNPACK (host cumsum between delegate calls), a two-method program
sharing state, and a `torch.cond` program whose lifetimes cannot be derived.
"""

from __future__ import annotations

import pytest
import torch
from executorch.exir import schema
from helpers.executorch_programs import (
    LINEAR_WIDTHS,
    LinearChain,
    ReadState,
    StateStore,
    WriteState,
    stock_pte,
)
from torch import nn

from memplan.experiments.zoo import programs
from memplan.experiments.zoo.models.common import zoo_recipe
from memplan.experiments.zoo.pte_check import ROUNDS, CheckError, check_same_outputs
from memplan.peak_bound import lower_bound
from memplan.planner.compat import deserialize_pte_binary
from memplan.planner.pte.program import read_program
from memplan.planner.pte.replan import replan
from memplan.planner.pte.structure import PteError
from memplan.validate import validate


class Branch(nn.Module):
    def forward(self, x):
        return torch.cond(x.sum() > 0, lambda x: x.sin() * 2, lambda x: x.cos() + 1, (x,))


@pytest.fixture(scope="module")
def ptes() -> dict[str, bytes]:
    torch.manual_seed(0)
    store = StateStore()
    multi = {
        "write": (WriteState(store), (torch.randn(4, 8),)),
        "read": (ReadState(store), (torch.randn(8, 3),)),
    }
    return {
        "plain": stock_pte(
            programs.from_module(LinearChain(LINEAR_WIDTHS), (torch.randn(2, 16),), **zoo_recipe())
        ),
        "xnnpack": stock_pte(
            programs.from_module(
                LinearChain(LINEAR_WIDTHS), (torch.randn(2, 16),), partitioner="xnnpack", **zoo_recipe()
            )
        ),
        "multi": stock_pte(programs.from_module(multi, name="multi", **zoo_recipe(const_prop=False))),
    }


def _offsets(data: bytes) -> dict[tuple[str, int], int]:
    found = {}
    for plan in deserialize_pte_binary(data).program.execution_plan:
        for i, v in enumerate(plan.values):
            if isinstance(v.val, schema.Tensor) and v.val.allocation_info is not None:
                found[(plan.name, i)] = v.val.allocation_info.memory_offset_low
    return found


def test_inspect_derives_a_problem_the_stock_layout_satisfies(ptes):
    for name, data in ptes.items():
        program = read_program(data)
        for method in program.methods.values():
            assert method.cannot == [], (name, method.cannot)
            assert validate(method.problem, method.layout) == []
            assert lower_bound(method.problem) <= method.planned_bytes
            roles = {t.role for t in method.tensors}
            assert any(r.startswith("input") for r in roles) or method.name == "read", (name, roles)
            assert any("output" in r for r in roles), (name, roles)
    xnn = read_program(ptes["xnnpack"]).methods["forward"]
    assert xnn.delegates and all(d == "XnnpackBackend" for d in xnn.delegates)
    assert any(t.writer == "delegate:XnnpackBackend" for t in xnn.tensors)
    assert xnn.slack[1] >= 64  # XNNPACK's padding is kept
    multi = read_program(ptes["multi"]).methods
    assert set(multi) == {"write", "read"}
    state = {(t.mem_id, t.offset, t.nbytes) for m in multi.values() for t in m.tensors if t.role == "state"}
    assert len(state) == 1  # the one shared buffer, at one place, seen as state by both methods


def test_replan_shrinks_a_stock_plan_and_runs_identically(ptes):
    before = read_program(ptes["plain"]).methods["forward"]
    assert before.planned_bytes > before.lower_bound  # the stock plan leaves a hole
    result = replan(ptes["plain"], "cpsat", time_limit_s=5)
    (method,) = result.methods
    assert method.plan is not None and method.kept_because == ""
    assert sum(method.after) == before.lower_bound < sum(method.before)
    after = read_program(result.data).methods["forward"]
    assert after.planned_bytes == before.lower_bound
    assert check_same_outputs(ptes["plain"], result.data, isolated=False) == ROUNDS


@pytest.mark.parametrize("name", ["xnnpack", "multi"])
def test_replan_moves_tensors_of_delegated_and_multi_method_programs_and_runs_identically(ptes, name):
    result = replan(ptes[name], "bestfit", require_saving=False)
    assert all(m.plan is not None for m in result.methods), [m.kept_because for m in result.methods]
    moved = {k for k, v in _offsets(result.data).items() if _offsets(ptes[name])[k] != v}
    assert moved, "the re-planned layout must differ for the check to prove anything"
    for m in result.methods:
        assert sum(m.after) <= sum(m.before)
    assert check_same_outputs(ptes[name], result.data, isolated=False) == ROUNDS * len(result.methods)


def test_the_check_catches_a_layout_that_overlaps_live_tensors(ptes):
    result = replan(ptes["plain"], "bestfit", require_saving=False)
    pte = result.program.pte
    (plan,) = pte.program.execution_plan
    for v in plan.values:  # every planned tensor at offset 0: live tensors now share bytes
        if isinstance(v.val, schema.Tensor) and v.val.allocation_info is not None:
            v.val.allocation_info.memory_offset_low = 0
    from memplan.planner.compat import serialize_pte_binary

    broken = bytes(serialize_pte_binary(pte, extract_delegate_segments=True))
    with pytest.raises(CheckError, match="differs from the original"):
        check_same_outputs(ptes["plain"], broken, isolated=False)


def test_control_flow_is_refused_with_the_reason():
    data = stock_pte(programs.from_module(Branch(), (torch.randn(4, 8),)))
    method = read_program(data).methods["forward"]
    assert method.problem is None
    assert "control flow (JumpFalseCall" in method.cannot[0]
    result = replan(data, "bestfit")
    assert not result.changed and result.data == data
    assert "control flow" in result.methods[0].kept_because


def test_not_a_program_is_a_clear_error(tmp_path):
    bad = tmp_path / "x.pte"
    bad.write_bytes(b"not a flatbuffer at all")
    with pytest.raises(PteError, match="not an ExecuTorch program"):
        read_program(bad)
    with pytest.raises(PteError, match="cannot read"):
        read_program(tmp_path / "missing.pte")


def test_a_zero_byte_tensor_stays_inside_the_smaller_arena():
    """densenet_block: batch norm's zero-byte saved statistics sit above the arena a re-plan needs."""
    from memplan.experiments import zoo

    data = stock_pte(zoo.get("densenet_block"))
    before = read_program(data).methods["forward"]
    program = deserialize_pte_binary(data).program.execution_plan[0]
    result = replan(data, "cpsat", time_limit_s=5)
    (method,) = result.methods
    assert before.zero_size and sum(method.after) < sum(method.before)
    assert max(program.values[v].val.allocation_info.memory_offset_low for v in before.zero_size) >= sum(
        method.after
    ), "the case this test guards: a zero-byte tensor planned above the new arena"
    after = deserialize_pte_binary(result.data).program.execution_plan[0]
    for value in before.zero_size:
        assert after.values[value].val.allocation_info.memory_offset_low < sum(after.non_const_buffer_sizes)
    assert check_same_outputs(data, result.data, isolated=False) == ROUNDS
