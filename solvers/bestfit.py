"""Best-fit offset placement, the best of several orderings.

The "greedy by size" offset planner of TFLite and XLA: take units one by one;
among the holes left between already-placed units that live at the same time,
put the unit in the smallest hole it fits (respecting alignment), else on top
of them. Which order the units come in matters a lot and no order wins
everywhere, so, like XLA's heap simulator, several orderings are run and the
smallest total arena kept.

Fixed units go first, at their offsets. A same-offset set is one unit with a
rectangle per buffer: it goes at the lowest offset of the tightest hole where
every rectangle fits (holes compared by slack: bytes left over). Placed units
are found through `LiveIndex`, so a unit costs about the number of units live
with it, not the number placed.
"""

from __future__ import annotations

import time
from bisect import bisect_left, bisect_right
from dataclasses import dataclass

import numpy as np

from memplan.planner.problem import InfeasibleError, Plan, Problem, align_up
from memplan.solvers.live_index import LiveIndex
from memplan.solvers.orderings import SORT_KEYS, UnitStats, best_of_orderings, check_names
from memplan.solvers.units import Unit, units_of

ORDERINGS = ("size", "lifetime", "area", "conflicts", "start")
"""The orders best-fit tries (keys in `orderings.SORT_KEYS`)."""


@dataclass(frozen=True)
class BestfitParams:
    orderings: tuple[str, ...] = ORDERINGS  # the placement orders tried (names from ORDERINGS)

    def __post_init__(self) -> None:
        object.__setattr__(self, "orderings", tuple(self.orderings))
        check_names("bestfit", self.orderings, ORDERINGS)


def solve_bestfit(
    problem: Problem, params: BestfitParams = BestfitParams(), *, time_limit_s: float | None = None
) -> Plan:
    """Best-fit under each of `params.orderings`; keep the smallest arena.

    Stops early when an ordering reaches the lower bound. With `time_limit_s`,
    no new ordering starts once the time is up (the first always runs).
    """
    began = time.perf_counter()
    orderings = params.orderings
    units = units_of(problem)
    placer = _Placer(units)
    degrees = placer.conflict_degrees() if "conflicts" in orderings else [0] * len(units)
    stats = [UnitStats.of(u, degrees[u.index]) for u in units if u.fixed is None]

    def place(name: str) -> list[int]:
        stats.sort(key=SORT_KEYS[name])
        return placer.run([units[u.unit_index] for u in stats])[0]

    return best_of_orderings(
        problem,
        units,
        orderings,
        place,
        solver="bestfit",
        status="heuristic (ordering: {})",
        began=began,
        time_limit_s=time_limit_s,
    )


class _Placer:
    """Best-fit placement of units, reusable across orderings of the same units.

    Rectangles that live over their pool's whole horizon (program inputs,
    state, caches) collide with everything, so instead of being reported by
    every query they are kept per pool as a merged list of occupied intervals.
    """

    def __init__(self, units: list[Unit]) -> None:
        self.units = units
        horizon: dict[int, tuple[int, int]] = {}
        for unit in units:
            for r in unit.rects:
                lo, hi = horizon.get(r.pool, (r.start, r.end))
                horizon[r.pool] = (min(lo, r.start), max(hi, r.end))
        # Per pool, the rectangles not spanning the horizon are numbered for LiveIndex.
        lifetimes: dict[int, tuple[list[int], list[int]]] = {p: ([], []) for p in horizon}
        # Per unit: (pool, number or -1 if spanning, size, start, end) of each rectangle.
        self.rects: list[list[tuple[int, int, int, int, int]]] = []
        for unit in units:
            mine = []
            for r in unit.rects:
                starts, ends = lifetimes[r.pool]
                spanning = (r.start, r.end) == horizon[r.pool]
                mine.append((r.pool, -1 if spanning else len(starts), r.size, r.start, r.end))
                if not spanning:
                    starts.append(r.start)
                    ends.append(r.end)
            self.rects.append(mine)
        self.lifetimes = lifetimes
        # Placed rectangles carry their address range [low, high) as LiveIndex payload.
        self.live = {p: LiveIndex(s, e, horizon[p]) for p, (s, e) in lifetimes.items()}
        self.arena = {p: 0 for p in horizon}
        self.floor: dict[int, list[tuple[int, int]]] = {p: [] for p in horizon}
        self.fixed = [u for u in units if u.fixed is not None]

    def conflict_degrees(self) -> list[int]:
        """Per unit: how many other rectangles live with its rectangles."""
        starts: dict[int, list[int]] = {p: [] for p in self.lifetimes}
        ends: dict[int, list[int]] = {p: [] for p in self.lifetimes}
        for rects in self.rects:
            for pool, _, _, s, e in rects:
                starts[pool].append(s)
                ends[pool].append(e)
        for pool in starts:
            starts[pool].sort()
            ends[pool].sort()
        return [
            sum(bisect_left(starts[p], e) - bisect_right(ends[p], s) - 1 for p, _, _, s, e in rects)
            for rects in self.rects
        ]

    def run(self, order: list[Unit]) -> tuple[list[int], dict[int, int]]:
        """Offsets per unit index and arena per pool: fixed units where pinned, then `order`."""
        for pool in self.live:
            self.live[pool].clear()
            self.floor[pool] = []
            self.arena[pool] = 0
        offsets = [0] * len(self.units)
        for unit in self.fixed:
            at = unit.fixed
            assert at is not None, "self.fixed holds the pinned units"
            lo, hi = self._regions(unit)
            if any(a < at < b for a, b in zip(lo - unit.size, hi)):
                raise InfeasibleError(
                    f"fixed buffers {list(unit.roots)} at {unit.fixed} overlap another fixed"
                    " buffer that lives at the same time",
                    unit.roots,
                    proven=True,
                )
            self._put(unit, at, offsets)
        live, floor, arena = self.live, self.floor, self.arena
        for unit in order:
            rects = self.rects[unit.index]
            if len(rects) == 1 and rects[0][1] >= 0:  # the common case, kept lean
                pool, i, size, start, end = rects[0]
                index = live[pool]
                found = index.overlapping(start, end)
                if isinstance(found, list):
                    found += floor[pool]
                    offset = _best_gap(found, size, unit.alignment) if found else 0
                else:
                    offset = self._best_offset_np(unit)
                offsets[unit.index] = offset
                index.add(i, offset, offset + size)
                if offset + size > arena[pool]:
                    arena[pool] = offset + size
            else:
                self._put(unit, self._best_offset_np(unit), offsets)
        return offsets, dict(arena)

    def _put(self, unit: Unit, offset: int, offsets: list[int]) -> None:
        offsets[unit.index] = offset
        for pool, i, size, _, _ in self.rects[unit.index]:
            if i < 0:
                self.floor[pool] = _merged(self.floor[pool], offset, offset + size)
            else:
                self.live[pool].add(i, offset, offset + size)
            self.arena[pool] = max(self.arena[pool], offset + size)

    def _regions(self, unit: Unit) -> tuple[np.ndarray, np.ndarray]:
        """Occupied [low, high) of everything placed that lives with the unit.

        Lows are shifted by (unit size - rectangle size), so that one size, the
        unit's, decides for every rectangle whether an offset collides.
        """
        lows, highs = [], []
        for pool, _, size, start, end in self.rects[unit.index]:
            found = self.live[pool].overlapping(start, end)
            if isinstance(found, list):
                pairs = np.asarray(found + self.floor[pool], dtype=np.int64).reshape(-1, 2)
                low, high = pairs[:, 0], pairs[:, 1]
            else:
                floor = np.asarray(self.floor[pool], dtype=np.int64).reshape(-1, 2)
                low, high = np.concatenate((found[0], floor[:, 0])), np.concatenate((found[1], floor[:, 1]))
            lows.append(low + (unit.size - size))
            highs.append(high)
        return np.concatenate(lows), np.concatenate(highs)

    def _best_offset_np(self, unit: Unit) -> int:
        lo, hi = self._regions(unit)
        return _best_gap_np(lo, hi, unit.size, unit.alignment) if len(lo) else 0


def _merged(intervals: list[tuple[int, int]], low: int, high: int) -> list[tuple[int, int]]:
    """Sorted disjoint intervals with [low, high) added; touching ones are joined."""
    out = []
    for a, b in intervals:
        if b < low or a > high:
            out.append((a, b))
        else:
            low, high = min(low, a), max(high, b)
    out.append((low, high))
    out.sort()
    return out


def _best_gap(pairs: list[tuple[int, int]], size: int, alignment: int) -> int:
    """Lowest aligned offset in the tightest hole between occupied [low, high); else on top.

    `free` is the first byte above everything seen so far (sorted by low); a
    hole [free, low) takes the unit if its aligned start fits, and its slack
    (low - free - size) ranks it: the smallest slack wins, then the lowest hole.
    """
    free = 0
    best, best_slack = -1, 0
    for low, high in sorted(pairs):
        slack = low - size - free
        if slack >= 0 and (best < 0 or slack < best_slack):
            x = align_up(free, alignment)
            if x + size <= low:
                best, best_slack = x, slack
        if high > free:
            free = high
    return best if best >= 0 else align_up(free, alignment)


def _best_gap_np(low: np.ndarray, high: np.ndarray, size: int, alignment: int) -> int:
    """`_best_gap` vectorised, for units that live with very many placed ones."""
    order = np.argsort(low, kind="stable")
    low, high = low[order], high[order]
    free = np.maximum.accumulate(np.concatenate(([0], high)))[:-1]
    x = -(-free // alignment) * alignment  # align_up over an array
    fits = x + size <= low
    if fits.any():
        slack = np.where(fits, low - size - free, np.iinfo(np.int64).max)
        return int(x[np.argmin(slack)])
    return align_up(int(max(high.max(), 0)), alignment)
