"""Time limits are one deadline read by every stage (issue 31, item 14), checked with a clock the test
drives: no timing, so the assertions hold on any machine. Wall time against the limit at large sizes
is measured by `python -m memplan.experiments.bench.time_limits`."""

from __future__ import annotations

import pytest

import memplan.solvers.deadline as deadline_module
from memplan.generate import random_problem
from memplan.plan import Outcome
from memplan.solvers import solve
from memplan.solvers.deadline import CHECK_EVERY, Deadline
from memplan.solvers.heuristics.orderings import best_of_orderings, in_order, with_arena
from memplan.solvers.heuristics.skyline import Skyline
from memplan.solvers.units import units_of
from memplan.validate import validate


class Clock:
    """Seconds that pass only when the test says so, plus `tick` per reading."""

    def __init__(self, tick: float = 0.0) -> None:
        self.now, self.tick, self.readings = 0.0, tick, 0

    def __call__(self) -> float:
        self.readings += 1
        self.now += self.tick
        return self.now


def test_a_deadline_counts_from_when_it_was_made_on_its_own_clock() -> None:
    clock = Clock()
    clock.now = 100.0
    deadline = Deadline(2.0, clock)
    assert deadline.left() == 2.0 and not deadline.passed()
    clock.now = 102.0
    assert deadline.spent() == 2.0 and deadline.passed()
    assert Deadline(None, clock).left() == float("inf")


def test_a_skyline_placement_stops_when_the_deadline_passes_and_finishes_without_one() -> None:
    units = units_of(random_problem(3 * CHECK_EVERY, seed=2))
    graph = Skyline(units)
    order = in_order(units, "start")
    clock = Clock()
    expired = Deadline(1.0, clock)
    clock.now = 5.0
    assert graph.place(order, expired) is None
    assert graph.place(order, Deadline(1.0, Clock())) == graph.place(order)  # the clock never moves


def test_no_ordering_starts_after_the_deadline_and_a_cut_first_one_leaves_no_plan() -> None:
    problem = random_problem(30, seed=3)
    units = units_of(problem)
    clock = Clock()
    deadline = Deadline(1.0, clock)
    tried: list[str] = []

    def place(name: str, _give_up_at: int | None):  # the first ordering uses the whole limit
        tried.append(name)
        clock.now += 2.0
        return with_arena(units, Skyline(units).place(in_order(units, name)))

    plan = best_of_orderings(
        problem, units, ["start", "lifetime"], place, solver="x", status="{}", deadline=deadline
    )
    assert tried == ["start"] and plan is not None and validate(problem, plan) == []
    cut = best_of_orderings(
        problem,
        units,
        ["start"],
        lambda _n, _g: None,
        solver="x",
        status="{}",
        deadline=Deadline(0.5, Clock(1.0)),
    )
    assert cut is None


@pytest.mark.parametrize("solver", ["skyline", "cpsat"])
def test_out_of_time_the_solvers_return_a_valid_plan_marked_not_proven(
    solver: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every reading of the deadlines' clock moves it 30 s, so the limit passes within the first stage:
    the plan is still valid and says the time ran out (skyline: best-fit's plan; cpsat: the heuristic
    plan, before any model is built)."""
    problem = random_problem(3 * CHECK_EVERY, seed=4)
    monkeypatch.setattr(deadline_module, "now", Clock(tick=30.0))
    plan = solve(problem, solver, time_limit_s=60, decompose=False) if solver == "cpsat" else None
    plan = plan or solve(problem, solver, time_limit_s=60)
    assert validate(problem, plan) == []
    assert not plan.proven_optimal and plan.outcome is Outcome.TIME_LIMIT
    assert "time limit" in plan.status, plan.status


def test_once_the_first_ordering_is_cut_no_other_starts() -> None:
    """A cut first ordering means the time kept back for what follows has come: trying the next
    orderings (each cut in turn) would spend it."""
    problem = random_problem(30, seed=3)
    units = units_of(problem)
    tried: list[str] = []

    def cut(name: str, _give_up_at: int | None):
        tried.append(name)
        return None

    deadline = Deadline(10.0, Clock())  # never passes: only the cut says the time is up
    plan = best_of_orderings(
        problem, units, ["start", "lifetime", "size"], cut, solver="x", status="{}", deadline=deadline
    )
    assert plan is None and tried == ["start"]
