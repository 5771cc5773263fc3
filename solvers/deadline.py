"""A time limit as one moment that every stage of a solver reads, so their times add up to the limit.

Building indexes, heuristic plans, the exact model and the search each used to get a
share of the limit measured from their own start, so at a million buffers the
stages together overran it several times (issue 31, item 14). A `Deadline` is made
once per call; each stage asks how much is `left` and whether it has `passed`.
The clock is a field, so a test can drive the logic with a clock of its own
instead of timing anything.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field

CHECK_EVERY = 1024
"""Units placed between two looks at the clock inside a placement (a look costs about 0.1 us)."""

FINISH_SECONDS_PER_UNIT = 8e-6
"""Time a heuristic keeps back per unit for what follows its last placement, building the plan and
validating it, so that these land inside the limit (measured, on a shared machine: 100,000 buffers
about 0.1 s and 0.25-0.3 s; 1,000,000 about 1 s and 4 s; a margin for load on top)."""

FALLBACK_SECONDS_PER_UNIT = 5e-6
"""Time the skyline keeps back per unit for best-fit's plan, its fallback when the first order is cut
(100,000 buffers: about 0.4 s)."""


def now() -> float:
    """The clock a deadline reads unless given one (a test replaces it to drive a whole solver)."""
    return time.perf_counter()


@dataclass
class Deadline:
    """`limit_s` seconds (None: no limit) from when it was made, on `clock`."""

    limit_s: float | None
    clock: Callable[[], float] = field(default_factory=lambda: now)
    began: float = field(init=False)

    def __post_init__(self) -> None:
        self.began = self.clock()

    def spent(self) -> float:
        """Seconds since the deadline was made."""
        return self.clock() - self.began

    def left(self) -> float:
        """Seconds until the deadline (negative once passed; infinite without a limit)."""
        return math.inf if self.limit_s is None else self.limit_s - self.spent()

    def passed(self, reserve: float = 0.0) -> bool:
        """True once less than `reserve` seconds are left (the time the work after this needs)."""
        return self.left() <= reserve
