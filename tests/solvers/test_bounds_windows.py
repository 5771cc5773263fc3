"""Window lower bounds (solvers.cpsat.window_bounds): never above an optimum, above the peak where search shows it."""

from __future__ import annotations

import pytest
from helpers.strategies import problems
from hypothesis import HealthCheck, given, settings

from memplan.errors import InfeasibleError
from memplan.generate import layered_problem, pigeonholes, random_problem
from memplan.peak_bound import lower_bound
from memplan.plan import Outcome
from memplan.problem import Buffer, Gap, Problem
from memplan.solvers import solve
from memplan.solvers.cpsat.window_bounds import window_lower_bounds
from memplan.solvers.exact.arena_bounds import pool_bounds
from memplan.solvers.units import units_of
from memplan.validate import validate

BUDGET_S = 10.0  # far above what these tiny problems need: a cut-short search shows up as not complete
EXACT_S = 20.0


def optimum(problem: Problem) -> int:
    """CP-SAT's proven optimum (these problems are small enough to prove)."""
    plan = solve(problem, "cpsat", time_limit_s=EXACT_S)
    assert plan.proven_optimal, plan.status
    assert validate(problem, plan) == []
    return plan.arena_size


def test_pigeonholes_bound_is_the_optimum_not_the_peak() -> None:
    """Four 3-byte buffers, two 1-byte walls 6 bytes apart: 14 bytes live, optimum 18."""
    problem = pigeonholes(buffers=4, holes=2)
    found = window_lower_bounds(problem, BUDGET_S)
    assert lower_bound(problem) == 14
    assert found.bounds == {0: 18}
    assert found.start == {0: 14}
    assert found.proofs >= 1 and found.complete
    assert optimum(problem) == 18


def test_bound_never_exceeds_the_optimum_and_is_above_the_peak_on_some() -> None:
    """Seeded random problems with alignments, fixed offsets and groups: on every one the bound is
    at least the starting one and at most the proven optimum, and on some above the starting one."""
    stronger = 0
    for seed in range(60):
        problem = random_problem(
            6 + seed % 4, seed, alignment=(1, 2, 8), with_fixed=seed % 2 == 0, with_groups=seed % 3 == 0
        )
        found = window_lower_bounds(problem, BUDGET_S)
        best = optimum(problem)
        start = pool_bounds(problem, units_of(problem))
        assert found.start == start
        assert all(found.bounds[p] >= start[p] for p in start), seed
        assert sum(found.bounds.values()) <= best, seed
        stronger += sum(found.bounds.values()) > sum(start.values())
    assert stronger > 0


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(problems(max_buffers=6, pools=(0, 1)))
def test_bound_is_at_most_the_optimum(problem: Problem) -> None:
    found = window_lower_bounds(problem, BUDGET_S)
    assert sum(found.bounds.values()) <= optimum(problem)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(problems(max_buffers=6))
def test_one_pool_bound_is_the_optimum_once_the_whole_pool_is_probed(problem: Problem) -> None:
    """With one pool the last window is the whole problem, so a complete search proves the optimum."""
    found = window_lower_bounds(problem, BUDGET_S)
    assert found.complete
    assert sum(found.bounds.values()) == optimum(problem)


def test_a_known_plan_ends_the_search() -> None:
    problem = pigeonholes(buffers=4, holes=2)
    found = window_lower_bounds(problem, BUDGET_S, known={0: 18})
    assert found.bounds == {0: 18} and found.complete
    stacked = Problem((Buffer("a", 0, 2, 4), Buffer("b", 1, 3, 4)))  # 8 bytes live, a plan of 8
    at_start = window_lower_bounds(stacked, BUDGET_S, known={0: 8})
    assert at_start.bounds == {0: 8} and at_start.probes == 0


def test_no_time_gives_the_starting_bound() -> None:
    problem = pigeonholes(buffers=4, holes=2)
    found = window_lower_bounds(problem, 0.0)
    assert found.bounds == found.start == {0: 14}
    assert found.probes == 0 and not found.complete


def test_budget_is_kept_on_a_big_problem() -> None:
    problem = layered_problem(3000, seed=1)
    found = window_lower_bounds(problem, 0.5)
    assert found.bounds[0] >= found.start[0] == lower_bound(problem)
    assert found.seconds < 10  # 0.5 s budget plus building the units; generous for a loaded machine


def test_gap_windows_above_the_offset_keep_the_starting_bound() -> None:
    """Units claim the bytes under such a window: a proof about them is none about the problem."""
    problem = Problem(
        (
            Buffer("a", 0, 4, 8, gaps=(Gap(1, 3, (4, 8)),)),
            Buffer("b", 1, 3, 4),
            Buffer("c", 0, 4, 3),
        )
    )
    found = window_lower_bounds(problem, BUDGET_S)
    assert found.bounds == found.start
    assert found.probes == 0


def test_cpsat_uses_the_window_bound_as_proof_of_optimality() -> None:
    problem = pigeonholes(buffers=6, holes=3)
    plan = solve(problem, "cpsat", time_limit_s=EXACT_S, bound_seconds=5.0, decompose=False)
    assert plan.arena_size == 27 and plan.lower_bound == 27
    assert plan.outcome is Outcome.OPTIMAL
    assert lower_bound(problem) == 21


def test_cpsat_with_the_window_bound_proves_a_generated_problem() -> None:
    """40 buffers, alignments and fixed offsets: CP-SAT's search alone did not prove it in 6 s
    (experiments.bench.minimalloc_bounds); the window bound meets the plan."""
    problem = random_problem(40, 2, alignment=(1, 16, 64), with_fixed=True)
    plan = solve(problem, "cpsat", time_limit_s=EXACT_S, bound_seconds=EXACT_S / 2)
    assert plan.proven_optimal, plan.status
    assert plan.lower_bound == plan.arena_size == 16_280 > lower_bound(problem)


def test_cpsat_reports_the_bound_its_search_proved() -> None:
    """Without window bounds: a plan CP-SAT proves optimal above the peak says so in its lower bound."""
    plan = solve(pigeonholes(buffers=4, holes=2), "cpsat", time_limit_s=EXACT_S, decompose=False)
    assert plan.proven_optimal and plan.arena_size == plan.lower_bound == 18


def test_a_part_proven_above_its_peak_sets_the_joined_bound() -> None:
    """Pigeonholes (optimum 18, peak 14) and, later, two 4-byte buffers: two independent parts."""
    holes = pigeonholes(buffers=4, holes=2)
    later = (Buffer("late0", 5, 7, 4), Buffer("late1", 6, 8, 4))
    problem = Problem(holes.buffers + later)
    plan = solve(problem, "cpsat", time_limit_s=EXACT_S)
    assert "2 independent parts" in plan.status
    assert lower_bound(problem) == 14
    assert plan.proven_optimal and plan.arena_size == plan.lower_bound == 18


def test_cpsat_window_bound_over_the_capacity_is_proven_infeasible() -> None:
    with pytest.raises(InfeasibleError, match="needs at least 18 bytes, over the capacity 17") as err:
        solve(pigeonholes(buffers=4, holes=2), "cpsat", time_limit_s=EXACT_S, capacity=17, bound_seconds=5.0)
    assert err.value.proven


def test_bound_seconds_refuses_reproducible() -> None:
    from memplan.errors import SolverOptionError

    with pytest.raises(SolverOptionError, match="bound_seconds"):
        solve(pigeonholes(buffers=4, holes=2), "cpsat", reproducible=True, bound_seconds=1.0)
