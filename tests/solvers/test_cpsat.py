"""The CP-SAT solver: optimum and proof, decision mode, time-outs, constraints, switches."""

from __future__ import annotations

import dataclasses
import time

import pytest
from helpers.minimalloc_files import minimalloc_dir
from helpers.strategies import problems
from hypothesis import HealthCheck, given, settings

from memplan.arith import align_up
from memplan.errors import InfeasibleError
from memplan.generate import layered_problem, random_problem
from memplan.io import read_minimalloc_csv
from memplan.peak_bound import lower_bound
from memplan.plan import Outcome
from memplan.problem import Buffer, ContiguousGroup, Problem, SameOffset
from memplan.solvers import solve
from memplan.solvers.cpsat import params as cpsat_params
from memplan.solvers.cpsat import placement_model as cpsat_model
from memplan.solvers.cpsat import searches as cpsat_search
from memplan.solvers.exact.arena_bounds import pool_bounds
from memplan.solvers.units import arena_of, make_plan, units_of
from memplan.validate import validate

SWITCHES = ("warm_start", "cumulative", "symmetry", "decompose", "skyline_heuristic")
SKYLINE = cpsat_search.SkylineSettings(cpsat_params.PORTFOLIO, presolve=None, log=False)


def walls(buffers: int, holes: int) -> Problem:
    """3-byte buffers all live at once, 1-byte fixed walls every 6 bytes: each 5-byte hole
    below a wall takes one buffer, so the optimum (6 * holes + 3 * rest) is above the bound."""
    free = [Buffer(f"b{i}", 0, 2, 3) for i in range(buffers)]
    fixed = [Buffer(f"w{j}", 0, 2, 1, offset=5 + 6 * j) for j in range(holes)]
    return Problem(tuple(free + fixed), name=f"walls-{buffers}-{holes}")


def test_input_12_is_solved_at_12_and_proven() -> None:
    problem = read_minimalloc_csv(minimalloc_dir() / "input.12.csv")
    plan = solve(problem, "cpsat", time_limit_s=30)
    assert plan.arena_size == 12
    assert plan.proven_optimal, plan.status
    assert plan.solver == "cpsat"


@pytest.mark.parametrize("switch", SWITCHES)
def test_optimum_above_the_bound_is_proven_with_each_switch_off(switch: str) -> None:
    problem = walls(buffers=4, holes=2)
    assert lower_bound(problem) == 14
    plan = solve(problem, "cpsat", time_limit_s=30, **{switch: False})
    assert plan.arena_size == 18
    assert plan.proven_optimal, plan.status
    assert plan.outcome is Outcome.OPTIMAL


def test_heuristic_at_the_lower_bound_is_returned_as_proven() -> None:
    problem = Problem((Buffer("a", 0, 2, 4), Buffer("b", 1, 3, 4), Buffer("c", 2, 4, 4)))
    plan = solve(problem, "cpsat")
    assert plan.arena_size == 8
    assert plan.outcome is Outcome.OPTIMAL
    assert "heuristic equals lower bound" in plan.status  # the shortcut, not a search


def test_decision_mode_finds_a_plan_within_the_capacity() -> None:
    problem = walls(buffers=4, holes=2)
    plan = solve(problem, "cpsat", time_limit_s=30, capacity=18)
    assert plan.arena_size <= 18
    assert plan.outcome in (Outcome.FEASIBLE, Outcome.OPTIMAL)


def test_decision_mode_proves_infeasibility_by_search() -> None:
    """The bound (14) fits in 17 bytes; only search shows no plan does."""
    with pytest.raises(InfeasibleError, match="cpsat: proven that no plan fits the capacity 17"):
        solve(walls(buffers=4, holes=2), "cpsat", time_limit_s=30, capacity=17)


def test_capacity_below_the_bound_is_refused_before_search() -> None:
    problem = Problem((Buffer("a", 0, 2, 4), Buffer("b", 1, 3, 4)), capacity=7)
    with pytest.raises(InfeasibleError, match="8 bytes.*over the capacity 7"):
        solve(problem, "cpsat", decompose=False)


def test_minimise_within_a_capacity_returns_the_optimum() -> None:
    plan = solve(walls(buffers=4, holes=2), "cpsat", time_limit_s=30, capacity=30, minimise=True)
    assert plan.arena_size == 18
    assert plan.proven_optimal


def test_time_limit_returns_a_valid_unproven_plan_no_worse_than_bestfit() -> None:
    problem = read_minimalloc_csv(minimalloc_dir() / "D.1048576.csv")  # optimum well above the bound
    heuristic = solve(problem, "bestfit")
    plan = solve(problem, "cpsat", time_limit_s=0.5)
    assert validate(problem, plan) == []
    assert plan.arena_size <= heuristic.arena_size
    assert plan.outcome is Outcome.TIME_LIMIT


def test_alignment_fixed_offsets_groups_and_same_offsets_are_honoured() -> None:
    problem = Problem(
        (
            Buffer("fixed", 0, 10, 8, offset=8, alignment=8),
            Buffer("parent", 2, 6, 20, alignment=4),
            Buffer("member", 3, 5, 6, alignment=2),
            Buffer("s1", 0, 3, 5, alignment=4),
            Buffer("s2", 6, 9, 7),
            Buffer("free", 1, 8, 3, alignment=4),
        ),
        groups=(ContiguousGroup("parent", (("member", 10),)),),
        same_offsets=(SameOffset(("s1", "s2")),),
    )
    for options in ({}, {"decompose": False}, {"warm_start": False}):
        plan = solve(problem, "cpsat", time_limit_s=30, **options)
        assert validate(problem, plan) == [], options
        assert plan.offsets["fixed"] == 8
        assert plan.offsets["member"] == plan.offsets["parent"] + 10
        assert plan.offsets["s1"] == plan.offsets["s2"]
        assert plan.offsets["parent"] % 4 == 0 and plan.offsets["free"] % 4 == 0
        assert plan.proven_optimal, plan.status


@pytest.mark.parametrize("seed", range(4))
def test_generated_problems_with_every_constraint_give_valid_plans(seed: int) -> None:
    problem = random_problem(
        40, seed, alignment=(1, 4, 16), with_groups=True, with_fixed=True, with_same_offset=True, n_pools=2
    )
    heuristic = solve(problem, "bestfit")
    plan = solve(problem, "cpsat", time_limit_s=5)
    assert validate(problem, plan) == []
    assert lower_bound(problem) <= plan.arena_size <= heuristic.arena_size


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(problems(max_buffers=6, pools=(0, 1)))
def test_every_switch_off_gives_the_same_proven_optimum(problem: Problem) -> None:
    reference = solve(problem, "cpsat", time_limit_s=20)
    assert reference.proven_optimal, reference.status
    for switch in SWITCHES:
        plan = solve(problem, "cpsat", time_limit_s=20, **{switch: False})
        assert validate(problem, plan) == [], switch
        assert plan.proven_optimal, (switch, plan.status)
        assert plan.arena_size == reference.arena_size, switch


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(problems(max_buffers=7))
def test_each_ladder_descends_from_no_plan_to_the_default_search_optimum(problem: Problem) -> None:
    """With alignment, fixed offsets, groups and same-offset sets: starting from no plan at
    all, the probes find plans on the way down, and each one is valid."""
    reference = solve(problem, "cpsat", time_limit_s=20, search="default")
    assert reference.proven_optimal, reference.status
    units = units_of(problem)
    bounds = pool_bounds(problem, units)
    (pool,) = bounds
    top = cpsat_model.arena_limits(units, bounds, [], None, False)[pool]
    for ladder in (cpsat_search.LADDER, (("between", 0.5),)):
        model = cpsat_model.PlacementModel(
            units, bounds, {pool: top}, cumulative=True, symmetry=True, minimise=False
        )
        floor = align_up(bounds[pool], model.divisor)
        probes = cpsat_search.Probes(model, pool, SKYLINE, ladder, 1, time.perf_counter() + 20, 0.0)
        best, arena, _, proven, _ = probes.descend(None, top + 1, floor, "none yet")
        assert best is not None and proven, ladder
        assert arena == reference.arena_size, ladder
        plan = make_plan(problem, units, best, "cpsat", 0.0)
        assert validate(problem, plan) == [], ladder


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(problems(max_buffers=6))
def test_capacity_at_the_optimum_fits_and_one_byte_less_raises(problem: Problem) -> None:
    optimum = solve(problem, "cpsat", time_limit_s=20)
    assert optimum.proven_optimal
    fitting = solve(problem, "cpsat", time_limit_s=20, capacity=optimum.arena_size)
    assert fitting.arena_size <= optimum.arena_size
    if optimum.arena_size > 1:
        with pytest.raises(InfeasibleError):
            solve(dataclasses.replace(problem, capacity=optimum.arena_size - 1), "cpsat", time_limit_s=20)


def test_bad_worker_count_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="num_workers"):
        solve(Problem((Buffer("a", 0, 1, 1),)), "cpsat", num_workers=0)


@pytest.mark.slow
@pytest.mark.parametrize("name", list("ABCDEFGHIJK"))
def test_minimalloc_challenging_instances_fit_their_capacity(name: str) -> None:
    """MiniMalloc's decision problems; about 0.1-7 s each on two quiet cores, 30 s allowed."""
    problem = read_minimalloc_csv(minimalloc_dir() / f"{name}.1048576.csv", capacity_from_name=True)
    plan = solve(problem, "cpsat", time_limit_s=30)
    assert validate(problem, plan) == []
    assert plan.arena_size <= 1_048_576


def test_a_limit_used_up_by_the_heuristics_returns_their_plan() -> None:
    problem = layered_problem(3000, seed=2)  # the heuristics land 1.5% above the bound
    plan = solve(problem, "cpsat", time_limit_s=0.001)
    assert validate(problem, plan) == []
    assert plan.outcome is Outcome.TIME_LIMIT
    assert "were left after the heuristics, less than building the exact model of" in plan.status


@pytest.mark.parametrize("search", ["default", "skyline"])
def test_each_search_alone_proves_an_optimum_above_the_bound(search: str) -> None:
    plan = solve(walls(buffers=4, holes=2), "cpsat", time_limit_s=30, search=search)
    assert plan.arena_size == 18
    assert plan.proven_optimal, plan.status


@pytest.mark.parametrize(
    "ladder",
    [
        (("between", 0.5),),  # plain bisection
        (("below", 0.01),),  # only ever asks for a little less than the best plan
        (("between", 0.0), ("below", 0.5)),  # rungs cycled over five orders
    ],
)
def test_every_probe_ladder_finds_and_proves_an_optimum_above_the_bound(ladder) -> None:
    problem = walls(buffers=7, holes=3)  # bound 7 * 3 + 3 = 24, optimum 6 * 3 + 4 * 3 = 30
    orders = ("start", "lifetime", "start-area", "area", "size")
    plan = solve(problem, "cpsat", time_limit_s=30, search="skyline", ladder=ladder, skyline_orders=orders)
    assert lower_bound(problem) == 24
    assert plan.arena_size == 30
    assert plan.proven_optimal, plan.status


@pytest.mark.parametrize("ladder", [cpsat_search.LADDER, (("between", 0.5),), (("below", 0.01),)])
def test_the_ladder_descends_from_no_plan_to_the_proven_optimum(ladder) -> None:
    problem = walls(buffers=7, holes=3)  # optimum 30
    units = units_of(problem)
    bounds = pool_bounds(problem, units)
    model = cpsat_model.PlacementModel(units, bounds, {0: 60}, cumulative=True, symmetry=True, minimise=False)
    probes = cpsat_search.Probes(model, 0, SKYLINE, ladder, 1, time.perf_counter() + 30, 0.0)
    best, top, floor, proven, _ = probes.descend(None, 60, lower_bound(problem), "none yet")
    assert (top, floor, proven) == (30, 30, True)
    assert arena_of(units, best) == {0: 30}
    assert probes.count > 2  # plans were found on the way down, not only proofs


@pytest.mark.parametrize("failing", ["portfolio", "ladder"])
def test_an_error_inside_a_search_thread_is_raised_not_swallowed(failing, monkeypatch) -> None:
    real = cpsat_search.with_skyline_order
    calls = []

    def fail_in_the_ladder(model, order, caps=None):
        calls.append(order)
        if failing == "portfolio" or len(calls) > len(
            cpsat_params.PORTFOLIO
        ):  # the lower-bound probe comes first
            raise RuntimeError("boom in a search thread")
        return real(model, order, caps)

    monkeypatch.setattr(cpsat_search, "with_skyline_order", fail_in_the_ladder)
    with pytest.raises(RuntimeError, match="boom in a search thread"):
        solve(walls(buffers=7, holes=3), "cpsat", time_limit_s=10, search="skyline")


def test_bad_ladder_is_a_clear_error() -> None:
    problem = Problem((Buffer("a", 0, 1, 1),))
    with pytest.raises(ValueError, match="bad ladder rungs"):
        solve(problem, "cpsat", ladder=(("above", 0.5),))
    with pytest.raises(ValueError, match="bad ladder rungs"):
        solve(problem, "cpsat", ladder=())


def test_skyline_search_alone_finds_a_plan_within_a_tight_capacity() -> None:
    problem = read_minimalloc_csv(minimalloc_dir() / "G.1048576.csv", capacity_from_name=True)
    plan = solve(problem, "cpsat", time_limit_s=60, search="skyline", skyline_heuristic=False)
    assert validate(problem, plan) == []
    assert plan.arena_size == 1_048_576


def test_unknown_search_or_order_is_a_clear_error() -> None:
    problem = Problem((Buffer("a", 0, 1, 1),))
    with pytest.raises(ValueError, match="unknown search 'magic'"):
        solve(problem, "cpsat", search="magic")
    with pytest.raises(ValueError, match="unknown skyline orders"):
        solve(problem, "cpsat", skyline_orders=("diagonal",))
