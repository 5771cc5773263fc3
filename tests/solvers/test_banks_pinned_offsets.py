"""Buffers pinned to an offset in a bank stay in the plan (Cadence's absolute placement constraints)."""

from __future__ import annotations

import pytest

from memplan import solvers
from memplan.problem import Bank, Buffer, Problem


@pytest.mark.parametrize("solver", ["banked_bestfit", "cpsat"])
def test_pinned_offsets_in_banks_are_kept_and_the_rest_is_placed_around_them(solver):
    problem = Problem(
        (
            Buffer("pinned_slow", 0, 3, 64, offset=8000, pool=2, banks=(2,)),
            Buffer("pinned_fast", 0, 2, 128, offset=400, pool=1, banks=(1,)),
            Buffer("free", 1, 3, 128, pool=1, banks=(1, 2), accesses=3),
        ),
        banks=(Bank("fast", 1, 1000), Bank("slow", 2, 10000)),
    )
    plan = solvers.solve(problem, solver, time_limit_s=2)  # validated on the way out
    assert plan.offsets["pinned_slow"] == 8000 and plan.offsets["pinned_fast"] == 400
    assert plan.pools.get("free", 1) == 1  # the fast bank has room beside the pin
    assert plan.arena_sizes[2] == 8064
