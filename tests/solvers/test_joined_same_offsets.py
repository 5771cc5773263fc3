"""Same-offset sets that share a member are planned as one set by every solver (issue 31, item 12:
before `Problem` refused co-live members of joined sets, milp raised PuLP's ValueError and cpsat's
reproducible mode aborted the interpreter on them)."""

from __future__ import annotations

import pytest

from memplan.problem import Buffer, Problem, SameOffset
from memplan.solvers import available, entry, reproducible_solvers, solve
from memplan.validate import validate

JOINED = Problem(
    (Buffer("a", 0, 2, 8), Buffer("b", 3, 5, 16), Buffer("z", 6, 7, 0), Buffer("c", 0, 7, 8)),
    same_offsets=(SameOffset(("a", "z")), SameOffset(("b", "z"))),
)


SAME_OFFSET_SOLVERS = [s for s in available() if entry(s).supports.same_offsets]


@pytest.mark.parametrize("solver", SAME_OFFSET_SOLVERS)
def test_every_solver_puts_the_joined_sets_at_one_offset(solver: str) -> None:
    plan = solve(JOINED, solver, time_limit_s=5)
    assert validate(JOINED, plan) == []
    assert plan.offsets["a"] == plan.offsets["b"] == plan.offsets["z"]
    assert plan.arena_size == 24


@pytest.mark.parametrize("solver", [s for s in reproducible_solvers() if s in SAME_OFFSET_SOLVERS])
def test_reproducible_runs_plan_the_joined_sets_too(solver: str) -> None:
    plan = solve(JOINED, solver, time_limit_s=5, reproducible=True)
    assert validate(JOINED, plan) == [] and plan.offsets["a"] == plan.offsets["b"]
