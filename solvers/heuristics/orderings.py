""" "Best of several orderings": run one placement heuristic under each ordering, keep the best.

Like XLA's heap simulator, the heuristics (bestfit, skyline) only know how to
place units in a given order; trying orders, stopping at the lower bound and
honouring the time limit live here, once.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from typing import NamedTuple

import numpy as np

from memplan.errors import SolverOptionError
from memplan.peak_bound import lower_bounds
from memplan.plan import Outcome, Plan
from memplan.problem import Problem
from memplan.solvers.deadline import FINISH_SECONDS_PER_UNIT, Deadline
from memplan.solvers.stages import stage
from memplan.solvers.units import Unit, arena_of, make_plan


class UnitStats(NamedTuple):
    """What orderings sort by, computed once per unit."""

    size: int
    lifetime: int
    area: int
    start: int  # the earliest start of its rectangles
    conflicts: int  # rectangles of other units live at the same time (best-fit counts them; else 0)
    unit_index: int  # `Unit.index`: the last tie-break

    @classmethod
    def of(cls, unit: Unit, conflicts: int = 0) -> UnitStats:
        return cls(
            unit.size, unit.lifetime, unit.area, min(r.start for r in unit.rects), conflicts, unit.index
        )


# The one table of placement orders: name -> sort key (smaller first); the unit index last keeps ties
# stable. Best-fit, skyline and CP-SAT's skyline search each try a subset of these names.
SORT_KEYS: dict[str, Callable[[UnitStats], tuple]] = {
    "size": lambda u: (-u.size, -u.lifetime, u.unit_index),
    "lifetime": lambda u: (-u.lifetime, -u.size, u.unit_index),
    "area": lambda u: (-u.area, -u.size, u.unit_index),
    "conflicts": lambda u: (-u.conflicts, -u.size, u.unit_index),
    "start": lambda u: (u.start, -u.size, u.unit_index),
    "start-area": lambda u: (u.start, -u.area, u.unit_index),
}


# The same orders over numpy columns of unit stats (`UnitStats` field -> array), primary key first:
# `order_of` sorts 100,000 units in milliseconds where `SORT_KEYS` takes a tenth of a second.
ARRAY_KEYS: dict[str, Callable[[Mapping[str, np.ndarray]], tuple[np.ndarray, ...]]] = {
    "size": lambda s: (-s["size"], -s["lifetime"], s["unit_index"]),
    "lifetime": lambda s: (-s["lifetime"], -s["size"], s["unit_index"]),
    "area": lambda s: (-s["area"], -s["size"], s["unit_index"]),
    "conflicts": lambda s: (-s["conflicts"], -s["size"], s["unit_index"]),
    "start": lambda s: (s["start"], -s["size"], s["unit_index"]),
    "start-area": lambda s: (s["start"], -s["area"], s["unit_index"]),
}


def order_of(name: str, stats: Mapping[str, np.ndarray]) -> np.ndarray:
    """Positions in `stats` in the named order: the order `SORT_KEYS[name]` gives (keys are unique)."""
    return np.lexsort(ARRAY_KEYS[name](stats)[::-1])


def in_order(units: Iterable[Unit], name: str) -> list[Unit]:
    """`units` sorted by the named order of `SORT_KEYS` (with numpy, `order_of`, when their stats fit int64)."""
    units = list(units)
    stats = _stat_columns(units)
    if stats is None:
        key = SORT_KEYS[name]
        return sorted(units, key=lambda u: key(UnitStats.of(u)))
    return [units[k] for k in order_of(name, stats).tolist()]


def _stat_columns(units: Sequence[Unit]) -> dict[str, np.ndarray] | None:
    """The `UnitStats` of `units` as int64 columns (conflicts 0), or None if one is past int64."""
    if not units:
        return None
    columns = {
        "size": [u.size for u in units],
        "lifetime": [u.lifetime for u in units],
        "area": [u.area for u in units],
        "start": [u.rects[0].start if len(u.rects) == 1 else min(r.start for r in u.rects) for u in units],
        "unit_index": [u.index for u in units],
    }
    if any(max(columns[field]) >= 1 << 62 for field in ("size", "lifetime", "area")):
        return None
    stats = {field: np.array(values, dtype=np.int64) for field, values in columns.items()}
    stats["conflicts"] = np.zeros(len(units), dtype=np.int64)
    return stats


def check_names(solver: str, names: Sequence[str], known: Collection[str]) -> None:
    """Refuse an empty or unknown list of ordering names, listing the valid ones."""
    unknown = [name for name in names if name not in known]
    if unknown or not names:
        raise SolverOptionError(f"{solver}: unknown orderings {unknown}; choose from {list(known)}")


Placement = tuple[Sequence[int], dict[int, int]]
"""Unit offsets and the arena they make per pool (`units.arena_of`)."""


def with_arena(units: Sequence[Unit], offsets: Sequence[int]) -> Placement:
    """`offsets` with their arena per pool, for placers that do not track it."""
    return offsets, arena_of(units, offsets)


def best_of_orderings(
    problem: Problem,
    units: Sequence[Unit],
    names: Sequence[str],
    place: Callable[[str, int | None], Placement | None],
    *,
    solver: str,
    status: str,
    deadline: Deadline,
    bounds: dict[int, int] | None = None,
) -> Plan | None:
    """The plan of the ordering whose placement (`place(name, give_up_at)`) has the smallest arena.

    `place` returns unit offsets and the arena per pool, or None once its total arena has reached
    `give_up_at` (the best total so far, None for the first ordering): such an
    ordering can no longer win, since arenas only grow as units are placed and
    a tie goes to the earlier ordering. Placers that cannot stop early ignore
    it; a placer may also return None when `deadline` passed mid-placement.
    Stops early when an ordering reaches the lower bound; no new ordering starts
    when the time left is less than the last one took plus `FINISH_SECONDS_PER_UNIT`
    per unit (the plan must still be built and validated inside the limit). None
    when no ordering was placed.
    `status` is formatted with the winning ordering's name; `bounds` are the
    problem's `lower_bounds` when the caller has them already.
    """
    if bounds is None:
        with stage("bounds"):
            bounds = lower_bounds(problem)
    bound = sum(bounds.values())
    best: tuple[int, str, Sequence[int], dict[int, int]] | None = None
    finish = FINISH_SECONDS_PER_UNIT * len(units)
    took = 0.0  # how long the last ordering took: one started with less time left ends past the limit
    for name in names:
        if best is not None and deadline.passed(took + finish):
            break
        began = deadline.spent()
        with stage("orderings"):
            placed = place(name, None if best is None else best[0])
        took = deadline.spent() - began
        if placed is None:  # gave up above the best (then the next may still win), or was cut
            if best is None or deadline.passed():  # the first is never given up: it was cut
                break
            continue
        offsets, arena = placed
        total = sum(arena.values())
        if best is None or total < best[0]:
            best = (total, name, offsets, arena)
        if total == bound:
            break
    if best is None:
        return None
    _, name, offsets, arena = best
    with stage("plan"):
        return make_plan(
            problem,
            units,
            offsets,
            solver,
            deadline.spent(),
            outcome=Outcome.OPTIMAL
            if all(arena.get(pool, 0) == need for pool, need in bounds.items())
            else Outcome.HEURISTIC,
            status=status.format(name),
            bound=bound,
        )
