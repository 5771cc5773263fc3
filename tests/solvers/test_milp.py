"""MILP internals the cross-solver tests cannot see: pair finding, settling, failure handling."""

from __future__ import annotations

import pulp
import pytest
from helpers.strategies import problems
from hypothesis import given, settings

from memplan.generate import random_problem
from memplan.peak_bound import lower_bound
from memplan.plan import Outcome
from memplan.problem import Buffer, Problem
from memplan.solvers import solve
from memplan.solvers.exact.milp import overlapping_pairs, settle
from memplan.solvers.units import make_plan, units_of
from memplan.validate import validate


@settings(max_examples=60, deadline=None)
@given(problems(max_buffers=10, pools=(0, 1)))
def test_sweep_finds_exactly_the_conflicting_unit_pairs(problem: Problem) -> None:
    units = units_of(problem)
    found = overlapping_pairs(units)
    expected = {(a.index, b.index) for a in units for b in units if a.index < b.index and a.conflicts(b)}
    assert set(found) == expected
    for (i, j), (size_i, size_j) in found.items():
        assert size_i == max(r.size for r in units[i].rects if any(r.lives_with(o) for o in units[j].rects))
        assert size_j == max(r.size for r in units[j].rects if any(r.lives_with(o) for o in units[i].rects))


def test_settle_repairs_offsets_off_by_solver_tolerance() -> None:
    """Raw offsets that overlap by a hair (or round onto each other) still give a valid plan."""
    problem = Problem(
        (
            Buffer("a", 0, 2, 4),
            Buffer("b", 0, 2, 4),
            Buffer("c", 1, 3, 4, alignment=4),
            Buffer("w", 0, 3, 2, offset=12),
        )
    )
    units = units_of(problem)
    raw = [0.0, 3.9999997, 4.0000002, 12]  # b rounds onto a's bytes; c onto b's
    offsets = settle(units, overlapping_pairs(units), raw, divisor=1)
    plan = make_plan(problem, units, offsets, "milp", 0.0)
    assert validate(problem, plan) == []
    assert plan.offsets["w"] == 12  # fixed units never move
    assert plan.offsets["a"] == 0 and plan.offsets["b"] == 4 and plan.offsets["c"] == 8


def test_settle_never_raises_a_valid_plan() -> None:
    problem = Problem((Buffer("a", 0, 2, 3), Buffer("b", 1, 3, 2), Buffer("c", 2, 4, 5)))
    units = units_of(problem)
    raw = [10, 20, 0]  # valid but wasteful: a at 10, b at 20 (above a), c at 0 (below b)
    assert settle(units, overlapping_pairs(units), raw, divisor=1) == [0, 5, 0]


def test_solver_failure_falls_back_to_bestfit_and_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    def crash(self, lp, **kwargs):
        raise pulp.PulpSolverError("cbc exited with signal 11")

    monkeypatch.setattr(pulp.COIN_CMD, "actualSolve", crash)
    problem = Problem(
        tuple(Buffer(f"b{i}", 0, 2, 3) for i in range(4)) + (Buffer("wall", 0, 2, 1, offset=5),)
    )
    plan = solve(problem, "milp", backend="cbc", warm_start=False)
    assert validate(problem, plan) == []
    assert plan.arena_size <= solve(problem, "bestfit").arena_size
    assert plan.outcome is Outcome.SOLVER_FAILED
    assert "cbc failed" in plan.status and "signal 11" in plan.status


def test_a_model_too_big_for_the_time_limit_is_not_built_to_the_end() -> None:
    problem = random_problem(1500, seed=1)
    heuristic = solve(problem, "bestfit")
    assert heuristic.arena_size > lower_bound(problem)  # else the MILP would stop before building
    plan = solve(problem, "milp", time_limit_s=0.05)
    assert plan.outcome is Outcome.TIME_LIMIT and "did not build" in plan.status
    assert plan.arena_size == heuristic.arena_size
    assert plan.seconds < 10  # the build stops at its deadline instead of making all the pairs


@pytest.mark.parametrize("backend", ["cbc", "highs"])
def test_a_loosened_gap_is_not_reported_as_a_proof(backend: str) -> None:
    problem = Problem(
        tuple(Buffer(f"b{i}", 0, 2, 3) for i in range(4)) + (Buffer("wall", 0, 2, 1, offset=5),)
    )
    strict = solve(problem, "milp", backend=backend, warm_start=False)
    loose = solve(problem, "milp", backend=backend, warm_start=False, backend_options={"gapRel": 0.5})
    assert strict.proven_optimal and strict.arena_size == 15  # one buffer under the wall, three above
    assert loose.outcome is Outcome.GAP_LIMIT


# -- claims the numerics cannot support (issue 15) ------------------------------------------

PREPROCESSING_REPRODUCER = Problem(
    (
        Buffer("b4", 0, 2, 40, alignment=16),
        Buffer("w0", 0, 1, 11, alignment=4, offset=24),
        Buffer("w1", 0, 1, 1, alignment=16, offset=64),
        Buffer("w2", 0, 2, 5, alignment=16, offset=96),
    )
)
WALL_PROBLEM = Problem(
    tuple(Buffer(f"b{i}", 0, 2, 3) for i in range(4)) + (Buffer("wall", 0, 2, 1, offset=5),)
)
"""Best-fit needs 15 bytes, the lower bound is 13: the MILP has work to do."""
HUGE_REPRODUCER = Problem(
    (
        Buffer("b2", 2, 3, 1099511627792, alignment=2),
        Buffer("b3", 1, 4, 1099511627776, alignment=2),
        Buffer("b4", 2, 3, 608036),
        Buffer("b5", 2, 5, 91019, alignment=16),
    )
)


@pytest.mark.parametrize("options", [{}, {"warm_start": False}, {"decompose": False}])
def test_cbc_preprocessing_does_not_turn_a_feasible_model_infeasible(options: dict) -> None:
    plan = solve(PREPROCESSING_REPRODUCER, "milp", backend="cbc", **options)
    assert plan.arena_size == 152 and plan.proven_optimal  # cpsat and HiGHS prove 152 too


@pytest.mark.parametrize("backend", ["cbc", "highs"])
def test_coordinates_near_2_to_the_40_give_a_plan_but_no_proof(backend: str) -> None:
    plan = solve(HUGE_REPRODUCER, "milp", backend=backend, time_limit_s=5)
    assert validate(HUGE_REPRODUCER, plan) == []
    assert lower_bound(HUGE_REPRODUCER) == 2199023954623  # reachable (cpsat finds it): 624 is not optimal
    assert plan.arena_size == 2199023954623 or not plan.proven_optimal
    assert plan.proven_optimal or "not proven" in plan.status


def test_an_infeasibility_claim_that_best_fit_disproves_returns_the_plan(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from memplan.solvers.exact import milp_model

    def claims_infeasible(self, solver, seconds):
        return pulp.LpStatusInfeasible, False, 0

    monkeypatch.setattr(milp_model.MilpModel, "solve", claims_infeasible)
    problem = WALL_PROBLEM
    best_fit = solve(problem, "bestfit")
    assert best_fit.arena_size > lower_bound(problem)  # so the MILP runs at all
    for capacity in (None, best_fit.arena_size):
        plan = solve(problem, "milp", capacity=capacity, warm_start=False)
        assert plan.outcome is Outcome.SOLVER_FAILED and "disproves" in plan.status
        assert plan.arena_size == best_fit.arena_size


def test_an_infeasibility_claim_beyond_trusted_numbers_is_not_called_a_proof(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from memplan.errors import InfeasibleError
    from memplan.solvers.exact import milp_model

    monkeypatch.setattr(
        milp_model.MilpModel, "solve", lambda self, solver, seconds: (pulp.LpStatusInfeasible, False, 0)
    )
    k = 1 << 40  # the wall problem in units of 2^40 bytes, plus one byte that stops the scaling
    problem = Problem(
        tuple(Buffer(f"b{i}", 0, 2, 3 * k) for i in range(4))
        + (Buffer("wall", 0, 2, k, offset=5 * k), Buffer("byte", 0, 2, 1))
    )
    capacity = 14 * k  # above the lower bound, below best-fit's plan
    assert lower_bound(problem) < capacity < solve(problem, "bestfit").arena_size
    with pytest.raises(InfeasibleError, match="not proven infeasible"):
        solve(problem, "milp", capacity=capacity)


def test_a_solution_that_breaks_the_model_when_rounded_is_not_a_proof(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The solver's optimality claim is checked against its own values in exact integer arithmetic."""
    from memplan.solvers.exact import milp_model

    real_solve = milp_model.MilpModel.solve

    def sloppy(self, solver, seconds):
        status, proven, objective = real_solve(self, solver, seconds)
        for z in self.order.values():  # every order flipped: the rounded values break the big-M rows
            z.varValue = 1 - round(z.varValue)
        return status, proven, objective

    monkeypatch.setattr(milp_model.MilpModel, "solve", sloppy)
    problem = WALL_PROBLEM
    plan = solve(problem, "milp", warm_start=False, decompose=False)
    assert validate(problem, plan) == []
    assert plan.outcome is Outcome.NOT_PROVEN and "exact check" in plan.status


@pytest.mark.parametrize("backend", ["cbc", "highs"])
def test_numbers_beyond_what_the_backends_accept_give_best_fit_not_a_crash(backend: str) -> None:
    """HiGHS drops rows with values over 1e15 and PuLP then fails reading its solution (IndexError)."""
    k = 1 << 56  # the wall problem in units of 2^56 bytes, plus one byte that stops the scaling
    problem = Problem(
        tuple(Buffer(f"b{i}", 0, 2, 3 * k) for i in range(4))
        + (Buffer("wall", 0, 2, k, offset=5 * k), Buffer("byte", 0, 2, 1))
    )
    assert solve(problem, "bestfit").arena_size > lower_bound(problem)  # else the MILP never runs
    plan = solve(problem, "milp", backend=backend, decompose=False, time_limit_s=5)
    assert validate(problem, plan) == [] and not plan.proven_optimal
    assert "beyond the 1e+15 the backends accept" in plan.status
