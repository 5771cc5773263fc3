"""Properties every registered solver must keep, on small random problems.

The solvers check each other: exact solvers never lose to best-fit, a proven
optimum is never beaten by anyone, and nothing goes below the lower bound.
"""

from __future__ import annotations

import dataclasses

import pytest
from helpers.strategies import has_fixed_or_same_offset, problems
from hypothesis import HealthCheck, given, settings

from memplan.errors import InfeasibleError, UnsupportedProblemError
from memplan.peak_bound import lower_bound
from memplan.plan import Plan
from memplan.problem import Problem
from memplan.solvers import available, solve
from memplan.validate import validate

EXACT = ("cpsat", "milp")
TIME_LIMIT_S = 20.0  # far above what these problems need; a time-out shows up as "not proven"
PROPERTY_SETTINGS = settings(
    max_examples=100,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)


# The MILP returns best-fit's plan untouched when it meets the lower bound, so
# it also runs cold here: that makes the model itself prove every optimum; and
# once without decomposition, so one model sees every pool and part.
MILP_VARIANTS = {
    "milp/cbc": dict(backend="cbc"),
    "milp/highs": dict(backend="highs"),
    "milp/cbc-cold": dict(backend="cbc", warm_start=False),
    "milp/highs-cold": dict(backend="highs", warm_start=False),
    "milp/highs-cold-whole": dict(backend="highs", warm_start=False, decompose=False),
}


# CP-SAT with each of its switches away from the default (the canonical search off, beside the
# portfolio, timed-out probes stopping the ones below, window lower bounds).
CPSAT_VARIANTS = {
    "cpsat": {},
    "cpsat/no-canonical": dict(canonical=(), canonical_head_start=0, canonical_descent=0),
    "cpsat/canonical-in-portfolio": dict(canonical_in_portfolio=True),
    "cpsat/timeout-stops-lower": dict(timeout_stops_lower=True),
    "cpsat/window-bounds": dict(bound_seconds=1.0),
}
VARIANTS = {"milp": MILP_VARIANTS, "cpsat": CPSAT_VARIANTS}


def plans_of_every_solver(problem: Problem) -> dict[str, Plan]:
    """One plan per solver (MILP in every variant); greedy must refuse what it cannot honour."""
    plans = {}
    for name in available():
        if name == "greedy" and has_fixed_or_same_offset(problem):
            with pytest.raises(UnsupportedProblemError):
                solve(problem, name)
            continue
        variants = VARIANTS.get(name, {name: {}})
        for label, options in variants.items():
            plans[label] = solve(problem, name, time_limit_s=TIME_LIMIT_S, **options)
    return plans


@PROPERTY_SETTINGS
@given(problems(pools=(0, 1)))
def test_solvers_agree(problem: Problem) -> None:
    plans = plans_of_every_solver(problem)
    bound = lower_bound(problem)
    best = min(plan.arena_size for plan in plans.values())
    for name, plan in plans.items():
        assert validate(problem, plan) == [], name
        assert plan.arena_size >= bound, name
        assert plan.lower_bound <= best, f"{name} claims a lower bound above an arena some solver found"
        if name.split("/")[0] in EXACT:
            assert plan.arena_size <= plans["bestfit"].arena_size, f"{name} lost to bestfit"
            if plan.arena_size == bound:
                assert plan.proven_optimal, f"{name} reached the lower bound but does not claim optimality"
        if plan.proven_optimal:
            assert plan.arena_size == best, f"{name} claims optimality but another solver found {best}"


@PROPERTY_SETTINGS
@given(problems(pools=(0, 1)))
def test_exact_solvers_prove_small_problems(problem: Problem) -> None:
    """With time to spare, both exact solvers (MILP cold, on both back ends) prove the same optimum."""
    runs = {"cpsat": ("cpsat", {})} | {
        label: ("milp", options) for label, options in MILP_VARIANTS.items() if "cold" in label
    }
    arenas = {}
    for label, (name, options) in runs.items():
        plan = solve(problem, name, time_limit_s=TIME_LIMIT_S, **options)
        assert plan.proven_optimal, (
            f"{label} did not prove a {len(problem.buffers)}-buffer problem: {plan.status}"
        )
        arenas[label] = plan.arena_size
    assert len(set(arenas.values())) == 1, arenas


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(problems(max_buffers=6))
def test_capacity_at_the_optimum_is_feasible_and_one_byte_less_is_not(problem: Problem) -> None:
    optimum = solve(problem, "milp", backend="highs", time_limit_s=TIME_LIMIT_S)
    assert optimum.proven_optimal, optimum.status
    runs = {label: ("cpsat", options) for label, options in CPSAT_VARIANTS.items()} | {"milp": ("milp", {})}
    for label, (name, options) in runs.items():
        fitting = solve(problem, name, time_limit_s=TIME_LIMIT_S, capacity=optimum.arena_size, **options)
        assert fitting.arena_size <= optimum.arena_size, label
        if optimum.arena_size > 1:
            too_small = dataclasses.replace(problem, capacity=optimum.arena_size - 1)
            with pytest.raises(InfeasibleError):
                solve(too_small, name, time_limit_s=TIME_LIMIT_S, **options)
