"""Where a call's time went once its limit had passed, stage by stage (issue 31, item 14).

Some work cannot stop at a time limit: the units must be built before anything
is placed, a cut search still needs a plan to return, and every plan is
validated. What such work costs past the limit is the overrun a caller sees,
so it is reported, not hidden. The stages a solver goes through run inside
`stage(name)`; `solvers.solve` opens one `StageLog` per call and reads from it,
once the plan is validated, the seconds each stage ran after the limit had
passed (time inside a nested stage counts for the innermost one, unless an
outer one is timed `whole`, as another solver's plan used as a fallback is;
time in no stage is "other"). Without an open log `stage` does nothing but look it up.
The log reads the deadline module's clock, so a test drives both with one
fake clock.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field

import memplan.solvers.deadline as deadline_clock

UNATTRIBUTED = "other"
"""The name under which time past the limit spent outside every stage is reported."""

_OPEN: ContextVar[StageLog | None] = ContextVar("memplan_stage_log", default=None)


def _now() -> float:
    return deadline_clock.now()  # looked up on every reading: a test may have replaced it


@dataclass
class StageLog:
    """Seconds past `limit_s` (None: no limit) per stage, from when the log was made."""

    limit_s: float | None
    clock: Callable[[], float] = _now
    began: float = field(init=False)
    past: dict[str, float] = field(init=False, default_factory=dict)
    _open: list[list[float]] = field(init=False, default_factory=list)  # [began, past in nested stages]
    _whole: bool = field(init=False, default=False)  # inside a stage timed whole: nested ones do not count

    def __post_init__(self) -> None:
        self.began = self.clock()

    @property
    def limit_at(self) -> float:
        """The clock reading at which the limit passes (infinite without one)."""
        return math.inf if self.limit_s is None else self.began + self.limit_s

    def left(self) -> float:
        """Seconds of the limit left (infinite without one)."""
        return self.limit_at - self.clock()

    def _past_limit(self, start: float, end: float) -> float:
        return max(0.0, end - max(start, self.limit_at))

    @contextmanager
    def stage(self, name: str, whole: bool = False) -> Iterator[None]:
        """Time the block as `name`; with `whole`, stages inside it count as this one."""
        if self._whole:
            yield
            return
        start = self.clock()
        self._open.append([start, 0.0])
        self._whole = whole
        try:
            yield
        finally:
            self._whole = False
            end = self.clock()
            _, nested = self._open.pop()
            past = self._past_limit(start, end)
            if past - nested > 0:
                self.past[name] = self.past.get(name, 0.0) + past - nested
            if self._open:
                self._open[-1][1] += past

    def overrun(self) -> tuple[float, dict[str, float]]:
        """Seconds from the limit to now, and how they split over the stages (largest first)."""
        total = self._past_limit(self.began, self.clock())
        by_stage = dict(self.past)
        other = total - sum(by_stage.values())
        if other > 0:
            by_stage[UNATTRIBUTED] = by_stage.get(UNATTRIBUTED, 0.0) + other
        return total, dict(sorted(by_stage.items(), key=lambda kv: -kv[1]))


@contextmanager
def opened(log: StageLog) -> Iterator[StageLog]:
    """`log` receives the stages run inside this block (in this thread)."""
    token = _OPEN.set(log)
    try:
        yield log
    finally:
        _OPEN.reset(token)


@contextmanager
def stage(name: str, whole: bool = False) -> Iterator[None]:
    """Time the block as stage `name` of the open log, if any; with `whole`, the stages it runs
    (another solver's, say) count as this one."""
    log = _OPEN.get()
    if log is None:
        yield
        return
    with log.stage(name, whole):
        yield


def in_words(limit_s: float, total: float, by_stage: Mapping[str, float]) -> str:
    """ "stopped 4.1 s after the 3 s limit: validation 2.2 s, units 1.3 s" (stages under 0.05 s left out)."""
    shown = [f"{name} {_seconds(s)}" for name, s in by_stage.items() if s >= 0.05]
    detail = f": {', '.join(shown)}" if shown else ""
    return f"stopped {_seconds(total)} after the {limit_s:g} s limit{detail}"


def _seconds(s: float) -> str:
    return f"{s:.1f} s" if s >= 0.1 else f"{s:.2f} s"
