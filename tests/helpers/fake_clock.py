"""A clock the test moves, in place of the solvers' deadline clock: time limits are tested by
making a stage "take" seconds on it, never by timing anything."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

import memplan.solvers as solvers_module
import memplan.solvers.deadline as deadline_module
from memplan.validate import check_plan


class StillClock:
    """A clock that moves only when the test moves it."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def still_clock(monkeypatch: pytest.MonkeyPatch) -> StillClock:
    """A StillClock read by every deadline made from now on."""
    still = StillClock()
    monkeypatch.setattr(deadline_module, "now", still)
    return still


def slow(clock: StillClock, seconds: float, work: Callable[..., Any]) -> Callable[..., Any]:
    """`work`, taking `seconds` on the clock."""

    def run(*args: Any, **kwargs: Any) -> Any:
        clock.now += seconds
        return work(*args, **kwargs)

    return run


def slow_validation_of(monkeypatch: pytest.MonkeyPatch, solver: str, seconds: float) -> StillClock:
    """A still clock on which validating `solver`'s plans takes `seconds` (others' take none)."""
    clock = still_clock(monkeypatch)

    def validate(problem: Any, plan: Any) -> None:
        clock.now += seconds if plan.solver == solver else 0.0
        check_plan(problem, plan)

    monkeypatch.setattr(solvers_module, "check_plan", validate)
    return clock
