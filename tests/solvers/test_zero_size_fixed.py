"""A buffer of no bytes fixed inside another's bytes overlaps nothing: no solver may call that infeasible."""

from __future__ import annotations

import pytest

from memplan.errors import InfeasibleError
from memplan.problem import Buffer, Problem
from memplan.solvers import available, solve
from memplan.validate import validate


@pytest.mark.parametrize("solver", [s for s in available() if s != "greedy"])  # greedy takes no fixed offsets
def test_a_zero_byte_buffer_fixed_inside_another_fits_at_the_capacity(solver: str) -> None:
    # cpsat and milp "proved" that nothing fits 32 bytes; bestfit called the two fixed ones overlapping.
    problem = Problem(
        (
            Buffer("a", 0, 4, 32),
            Buffer("z", 0, 4, 0, offset=1),
            Buffer("w", 0, 4, 0),
            Buffer("pin", 2, 3, 0, offset=9),
        ),
        capacity=32,
    )
    try:
        plan = solve(problem, solver, time_limit_s=5)
    except InfeasibleError as e:  # a heuristic may fail, but must not claim a proof
        assert not e.proven, e
        return
    assert validate(problem, plan) == [] and plan.offsets["z"] == 1 and plan.arena_size == 32


@pytest.mark.parametrize("solver", ["cpsat", "milp"])
def test_a_zero_byte_buffer_fixed_high_sets_the_arena_it_reaches(solver: str) -> None:
    problem = Problem((Buffer("a", 0, 4, 8), Buffer("z", 0, 4, 0, offset=20)))
    plan = solve(problem, solver, time_limit_s=5)
    assert plan.proven_optimal and plan.arena_size == 20 and validate(problem, plan) == []
