"""Time past a limit is reported, stage by stage (issue 31, item 14): driven by a clock the test
moves, never timed. A stage made to take longer than the limit must show up in the plan's
`seconds_over_limit`, `over_limit_stages` and status, and the plan must still be valid; a call that
keeps to its limit says nothing extra."""

from __future__ import annotations

import pytest
from helpers.fake_clock import StillClock, slow, still_clock

import memplan.solvers as solvers_module
import memplan.solvers.cpsat.driver as cpsat_driver
import memplan.solvers.heuristics.skyline as skyline_module
from memplan.generate import random_problem
from memplan.plan import Outcome
from memplan.solvers import solve
from memplan.solvers.stages import UNATTRIBUTED, StageLog, in_words
from memplan.validate import check_plan, validate


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> StillClock:
    return still_clock(monkeypatch)


def test_time_past_the_limit_goes_to_the_innermost_stage_or_to_a_stage_timed_whole(clock) -> None:
    log = StageLog(5.0)
    with log.stage("units"):
        clock.now += 4.0  # inside the limit: nothing to report
    with log.stage("heuristics"):
        clock.now += 2.0  # 1 s past it
        with log.stage("bounds"):
            clock.now += 3.0
    with log.stage("fallback", whole=True):
        with log.stage("orderings"):  # counts as the fallback's
            clock.now += 1.5
    clock.now += 0.5  # in no stage
    total, by_stage = log.overrun()
    assert total == 6.0
    assert by_stage == {"bounds": 3.0, "fallback": 1.5, "heuristics": 1.0, UNATTRIBUTED: 0.5}
    assert list(by_stage) == ["bounds", "fallback", "heuristics", UNATTRIBUTED]  # largest first
    assert in_words(5.0, total, by_stage) == (
        "stopped 6.0 s after the 5 s limit: bounds 3.0 s, fallback 1.5 s, heuristics 1.0 s, other 0.5 s"
    )
    assert StageLog(None).overrun()[0] == 0.0


def test_a_plan_validated_past_its_limit_says_so_and_one_inside_it_says_nothing(
    clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    problem = random_problem(30, seed=5)
    inside = solve(problem, "bestfit", time_limit_s=5)
    assert inside.seconds_over_limit == 0.0 and inside.over_limit_stages == {} and inside.overran_in == ""
    assert inside.status.startswith("heuristic (ordering:") and "limit" not in inside.status
    monkeypatch.setattr(solvers_module, "check_plan", slow(clock, 7.0, check_plan))
    late = solve(problem, "bestfit", time_limit_s=5)
    assert late.seconds_over_limit == 2.0 and dict(late.over_limit_stages) == {"validation": 2.0}
    assert late.overran_in == "validation"
    assert late.status == f"{inside.status}; stopped 2.0 s after the 5 s limit: validation 2.0 s"
    assert late.offsets == inside.offsets and late.outcome is inside.outcome


def test_a_skyline_whose_units_take_past_the_limit_reports_them_and_returns_best_fits_plan(
    clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The limit passes while the units are built: no skyline order starts; best-fit's plan is
    valid, marked as cut by the time limit, and the report names the units."""
    problem = random_problem(40, seed=6)
    monkeypatch.setattr(skyline_module, "units_of", slow(clock, 10.0, skyline_module.units_of))
    plan = solve(problem, "skyline", time_limit_s=3)
    assert validate(problem, plan) == []
    assert plan.outcome is Outcome.TIME_LIMIT and not plan.proven_optimal
    assert plan.seconds_over_limit == 7.0 and plan.overran_in == "units"
    assert (
        "best-fit's plan" in plan.status and "stopped 7.0 s after the 3 s limit: units 7.0 s" in plan.status
    )


def test_cpsat_whose_bounds_take_past_the_limit_reports_them_and_returns_a_valid_plan_not_proven(
    clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    problem = random_problem(40, seed=22)  # best-fit does not reach its lower bound
    monkeypatch.setattr(cpsat_driver, "pool_bounds", slow(clock, 10.0, cpsat_driver.pool_bounds))
    plan = solve(problem, "cpsat", time_limit_s=3, decompose=False)
    assert validate(problem, plan) == []
    assert plan.outcome is Outcome.TIME_LIMIT and not plan.proven_optimal
    assert plan.seconds_over_limit == 7.0 and dict(plan.over_limit_stages) == {"bounds": 7.0}
    assert plan.status.endswith("stopped 7.0 s after the 3 s limit: bounds 7.0 s")
