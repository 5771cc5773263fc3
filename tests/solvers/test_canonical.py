"""MiniMalloc's canonical search (solvers.exact.canonical) and how the cpsat solver uses it."""

from __future__ import annotations

import random
import threading

import pytest
from helpers.minimalloc_files import minimalloc_dir

from memplan.errors import SolverOptionError
from memplan.io import read_minimalloc_csv
from memplan.problem import Buffer, Problem
from memplan.solvers import solve
from memplan.solvers.exact import canonical
from memplan.solvers.units import Unit, units_of
from memplan.validate import validate


def random_problem(seed: int, buffers: int = 9, alignment: int = 1) -> Problem:
    rng = random.Random(seed)
    out = []
    for i in range(buffers):
        start = rng.randrange(0, 10)
        out.append(
            Buffer(f"b{i}", start, start + rng.randrange(1, 6), rng.randrange(1, 9), alignment=alignment)
        )
    return Problem(tuple(out))


def plan_errors(units: list[Unit], offsets: list[int], capacity: int) -> list[str]:
    """What is wrong with unit offsets: overlaps of units that live together, or past the capacity."""
    errors = [f"{u.index} ends above {capacity}" for u, o in zip(units, offsets) if o + u.size > capacity]
    errors += [f"{u.index} misaligned" for u, o in zip(units, offsets) if o % u.alignment]
    for a in units:
        for b in units[: a.index]:
            apart = (
                offsets[a.index] + a.size <= offsets[b.index] or offsets[b.index] + b.size <= offsets[a.index]
            )
            if a.conflicts(b) and not apart:
                errors.append(f"{a.index} overlaps {b.index}")
    return errors


@pytest.mark.parametrize("code", ["TWA", "WAT", "TAW", "Z"])
@pytest.mark.parametrize("seed", range(12))
def test_finds_a_plan_at_the_optimum_and_exhausts_below_it(seed: int, code: str) -> None:
    """Canonical plans suffice (MiniMalloc's claim): at the proven optimum the search finds a
    valid plan, one byte below it every branch is pruned. This checks each pruning rule."""
    problem = random_problem(seed)
    optimum = solve(problem, "cpsat", time_limit_s=30, canonical=())
    assert optimum.proven_optimal, optimum.status
    units = units_of(problem)
    found = canonical.search(units, optimum.arena_size, code)
    assert found.verdict is canonical.Verdict.FOUND
    assert found.offsets is not None
    assert plan_errors(units, found.offsets, optimum.arena_size) == []
    below = canonical.search(units, optimum.arena_size - 1, code)
    assert below.verdict is canonical.Verdict.EXHAUSTED
    assert below.offsets is None


@pytest.mark.parametrize("seed", range(6))
def test_aligned_plans_are_valid(seed: int) -> None:
    problem = random_problem(seed, buffers=10, alignment=4)
    units = units_of(problem)
    capacity = solve(problem, "bestfit").arena_size
    found = canonical.search(units, capacity, "TWA")
    assert found.offsets is not None, found.verdict
    assert plan_errors(units, found.offsets, capacity) == []


def test_minimalloc_example_is_decided_at_12_and_not_at_11() -> None:
    units = units_of(read_minimalloc_csv(minimalloc_dir() / "input.12.csv"))
    assert canonical.search(units, 12).verdict is canonical.Verdict.FOUND
    assert canonical.search(units, 11).verdict is canonical.Verdict.EXHAUSTED


def test_sweep_sections_are_the_units_live_before_each_end() -> None:
    # a [0, 4), b [1, 2), c [2, 6), d [4, 6): ends at 2, 4 and 6
    problem = Problem(
        (Buffer("a", 0, 4, 1), Buffer("b", 1, 2, 1), Buffer("c", 2, 6, 1), Buffer("d", 4, 6, 1))
    )
    sweep = canonical.Sweep(units_of(problem))
    assert sweep.sections == [[0, 1], [0, 2], [2, 3]]
    assert [sorted(o) for o in sweep.overlaps] == [[1, 2], [0], [0, 3], [2]]
    assert list(zip(sweep.span_start, sweep.span_end)) == [(0, 2), (0, 1), (1, 3), (2, 3)]


def test_a_node_limit_and_a_stop_flag_end_the_search_unproven() -> None:
    problem = random_problem(3, buffers=40)
    units = units_of(problem)
    tight = solve(problem, "bestfit").arena_size // 2  # far below the lower bound? then exhausted at once
    limited = canonical.search(units, max(tight, max(u.size for u in units)), node_limit=1)
    assert limited.verdict in (canonical.Verdict.STOPPED, canonical.Verdict.EXHAUSTED)
    assert limited.nodes <= 1
    stop = threading.Event()
    stop.set()
    stopped = canonical.search(units, 10**9, stop=stop)
    assert stopped.verdict is canonical.Verdict.STOPPED and stopped.offsets is None


def test_round_robin_returns_the_code_that_found_the_plan() -> None:
    problem = random_problem(5, buffers=12)
    units = units_of(problem)
    capacity = solve(problem, "cpsat", time_limit_s=30).arena_size
    found = canonical.round_robin(units, capacity, ("WAT", "TWA"))
    assert found is not None
    code, offsets = found
    assert code in ("WAT", "TWA")
    assert plan_errors(units, offsets, capacity) == []
    assert canonical.round_robin(units, capacity - 1, ("WAT", "TWA")) is None


@pytest.mark.parametrize(
    ("options", "winner"),
    [
        ({}, "canonical search"),
        ({"canonical": ()}, None),
        ({"canonical_head_start": 0}, None),
        ({"canonical_head_start": 0, "canonical_in_portfolio": True}, ""),
    ],
)
def test_cpsat_decides_by_the_canonical_head_start_unless_switched_off(
    options: dict, winner: str | None
) -> None:
    problem = random_problem(7, buffers=30)
    capacity = solve(problem, "cpsat", time_limit_s=30, canonical=()).arena_size
    plan = solve(problem, "cpsat", time_limit_s=30, capacity=capacity, minimise=False, **options)
    assert validate(problem, plan) == []
    assert plan.arena_size <= capacity
    if winner == "":  # the canonical thread races the skyline portfolio: either may win
        return
    if winner:
        assert winner in plan.status
    else:
        assert "canonical" not in plan.status


def test_only_single_pool_problems_without_pinned_buffers_qualify() -> None:
    units = units_of(read_minimalloc_csv(minimalloc_dir() / "input.12.csv"))
    assert canonical.applicable(units)
    pinned = Problem((Buffer("a", 0, 2, 4, offset=0), Buffer("b", 1, 3, 4)))
    assert not canonical.applicable(units_of(pinned))
    two_pools = Problem((Buffer("a", 0, 2, 4, pool=0), Buffer("b", 1, 3, 4, pool=1)))
    assert not canonical.applicable(units_of(two_pools))


@pytest.mark.parametrize(
    "bad",
    [{"canonical": ("TWX",)}, {"canonical": ("",)}, {"canonical_descent": -1}, {"canonical_head_start": -2}],
)
def test_bad_canonical_options_are_refused(bad: dict) -> None:
    with pytest.raises(SolverOptionError, match="canonical"):
        solve(random_problem(0), "cpsat", **bad)


@pytest.mark.parametrize("seed", range(6))
def test_descent_without_node_limit_bisects_down_to_the_optimum(seed: int) -> None:
    """With nodes enough to exhaust every probe, the bisection is exact: it ends at the optimum."""
    problem = random_problem(seed, buffers=10)
    optimum = solve(problem, "cpsat", time_limit_s=30, canonical_descent=0)
    assert optimum.proven_optimal, optimum.status
    units = units_of(problem)
    top = solve(problem, "bestfit").arena_size + 5
    found = canonical.descend(units, top, optimum.lower_bound, ("TWA",), 10**6, 1, deadline=float("inf"))
    assert found is not None
    code, offsets, arena = found
    assert (code, arena) == ("TWA", optimum.arena_size)
    assert plan_errors(units, offsets, arena) == []


@pytest.mark.parametrize("descent", [0, 3])
def test_minimising_with_and_without_the_descent_gives_valid_plans(descent: int) -> None:
    problem = random_problem(11, buffers=40)
    plan = solve(problem, "cpsat", time_limit_s=5, canonical_descent=descent)
    assert validate(problem, plan) == []
    assert plan.arena_size <= solve(problem, "bestfit").arena_size


@pytest.mark.slow
@pytest.mark.parametrize("name", ["I", "J", "K"])
def test_minimalloc_instances_decided_by_the_canonical_search(name: str) -> None:
    problem = read_minimalloc_csv(minimalloc_dir() / f"{name}.1048576.csv")
    plan = solve(problem, "cpsat", time_limit_s=30, capacity=1_048_576)
    assert validate(problem, plan) == []
    assert plan.arena_size <= 1_048_576


@pytest.mark.parametrize("seed", range(4))
def test_descent_asks_for_the_floor_first_when_given_nodes_for_it(seed: int) -> None:
    """The bisection gets no nodes here (node_limit=0), so only the probe at the floor can find."""
    problem = random_problem(seed, buffers=10)
    optimum = solve(problem, "cpsat", time_limit_s=30).arena_size
    units = units_of(problem)
    top = solve(problem, "bestfit").arena_size + 5
    args = (units, top, optimum, ("TWA",), 0, 1)
    assert canonical.descend(*args, deadline=float("inf")) is None
    found = canonical.descend(*args, deadline=float("inf"), floor_node_limit=10**6)
    assert found is not None and found[2] == optimum


@pytest.mark.parametrize("stops", [False, True])
def test_minimising_with_either_timeout_rule_gives_valid_plans(stops: bool) -> None:
    problem = random_problem(13, buffers=60)
    plan = solve(problem, "cpsat", time_limit_s=3, timeout_stops_lower=stops, canonical_descent=0)
    assert validate(problem, plan) == []
    assert plan.arena_size <= solve(problem, "bestfit").arena_size


def test_the_deepest_search_it_accepts_does_not_overflow_the_stack() -> None:
    """MAX_UNITS units live at once: one branch placing every one of them."""
    stack = Problem(tuple(Buffer(f"b{i}", 0, 1, 1) for i in range(canonical.MAX_UNITS)))
    units = units_of(stack)
    assert canonical.applicable(units)
    found = canonical.search(units, canonical.MAX_UNITS)
    assert found.offsets is not None and sorted(found.offsets) == list(range(canonical.MAX_UNITS))
    one_more = Problem((*stack.buffers, Buffer("extra", 0, 1, 1)))
    assert not canonical.applicable(units_of(one_more))


@pytest.mark.slow
def test_the_canonical_thread_beside_the_portfolio_decides_minimallocs_j() -> None:
    """Without the head start the heuristics do not fit J: the portfolio runs, the canonical
    thread among it (TWA needs 410 nodes there; CP-SAT's orders take seconds)."""
    problem = read_minimalloc_csv(minimalloc_dir() / "J.1048576.csv")
    plan = solve(
        problem,
        "cpsat",
        time_limit_s=30,
        capacity=1_048_576,
        canonical_head_start=0,
        canonical_in_portfolio=True,
    )
    assert validate(problem, plan) == []
    assert plan.arena_size <= 1_048_576
    assert "search" in plan.status  # the canonical or a skyline search decided it
