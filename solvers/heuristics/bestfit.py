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

from bisect import bisect_left, bisect_right
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from memplan.errors import InfeasibleError
from memplan.plan import Plan
from memplan.problem import Problem
from memplan.solvers.deadline import Deadline
from memplan.solvers.heuristics.gc_pause import gc_paused
from memplan.solvers.heuristics.holes import best_gap, best_gap_np, merged
from memplan.solvers.heuristics.live_index import LiveIndex
from memplan.solvers.heuristics.orderings import (
    SORT_KEYS,
    Placement,
    UnitStats,
    best_of_orderings,
    check_names,
    order_of,
)
from memplan.solvers.heuristics.wave_placer import WavePlacer
from memplan.solvers.stages import stage
from memplan.solvers.units import Unit, units_of

ORDERINGS = ("size", "lifetime", "area", "conflicts", "start")
"""The orders best-fit tries (keys in `orderings.SORT_KEYS`)."""

WAVES_FROM = 48
"""Units from which `WavePlacer` is used when it can be: below, numpy's cost per call makes it slower
than `_Placer` (same plans either way; 10 units: 0.24 vs 0.12 ms, 120: 1.8 vs 1.8-2.1 ms)."""


@dataclass(frozen=True)
class BestfitParams:
    orderings: tuple[str, ...] = ORDERINGS  # the placement orders tried (names from ORDERINGS)

    def __post_init__(self) -> None:
        object.__setattr__(self, "orderings", tuple(self.orderings))
        check_names("bestfit", self.orderings, ORDERINGS)


@gc_paused()
def solve_bestfit(
    problem: Problem, params: BestfitParams = BestfitParams(), *, time_limit_s: float | None = None
) -> Plan:
    """Best-fit under each of `params.orderings`; keep the smallest arena.

    Stops early when an ordering reaches the lower bound, and abandons an
    ordering once its arena reaches the best so far. With `time_limit_s`,
    no new ordering starts once the time is up (the first always runs: it is
    the plan every other solver falls back to).
    """
    deadline = Deadline(time_limit_s)
    with stage("units"):
        units = units_of(problem)
    return bestfit_plan(problem, units, params.orderings, deadline)


@gc_paused()
def bestfit_plan(
    problem: Problem,
    units: list[Unit],
    orderings: Sequence[str],
    deadline: Deadline,
    bounds: dict[int, int] | None = None,
) -> Plan:
    """`solve_bestfit` on `problem`'s units (`units_of`) and, if known, its `lower_bounds`: for the
    solvers that have them already and fall back to best-fit's plan."""
    with stage("best-fit's placer"):
        waves = WavePlacer.build(units) if len(units) >= WAVES_FROM else None
        if waves is not None:
            stats = waves.stats()
        else:
            placer = _Placer(units)
            degrees = placer.conflict_degrees() if "conflicts" in orderings else [0] * len(units)
            unit_stats = [UnitStats.of(u, degrees[u.index]) for u in units if u.fixed is None]
    if waves is not None:

        def place(name: str, give_up_at: int | None) -> Placement | None:
            return waves.run(order_of(name, stats), give_up_at)

    else:

        def place(name: str, give_up_at: int | None) -> Placement | None:
            unit_stats.sort(key=SORT_KEYS[name])
            return placer.run([units[u.unit_index] for u in unit_stats], give_up_at)

    plan = best_of_orderings(
        problem,
        units,
        orderings,
        place,
        solver="bestfit",
        status="heuristic (ordering: {})",
        deadline=deadline,
        bounds=bounds,
    )
    assert plan is not None, "best-fit's placers are never cut, so its first ordering always runs"
    return plan


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

    def run(self, order: list[Unit], give_up_at: int | None = None) -> Placement | None:
        """Offsets per unit index (fixed units where pinned, then `order`) and arena per pool;
        None once the total arena reaches `give_up_at`."""
        for pool in self.live:
            self.live[pool].clear()
            self.floor[pool] = []
            self.arena[pool] = 0
        offsets = [0] * len(self.units)
        for unit in self.fixed:
            at = unit.fixed
            assert at is not None, "self.fixed holds the pinned units"
            lo, hi = self._regions(unit)
            if unit.size and any(a < at < b for a, b in zip(lo - unit.size, hi)):
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
                    offset = best_gap(found, size, unit.alignment) if found else 0
                else:
                    offset = self._best_offset_np(unit)
                offsets[unit.index] = offset
                index.add(i, offset, offset + size)
                if offset + size <= arena[pool]:
                    continue
                arena[pool] = offset + size
            else:
                self._put(unit, self._best_offset_np(unit), offsets)
            if give_up_at is not None and sum(arena.values()) >= give_up_at:
                return None
        return offsets, dict(arena)

    def _put(self, unit: Unit, offset: int, offsets: list[int]) -> None:
        offsets[unit.index] = offset
        for pool, i, size, _, _ in self.rects[unit.index]:
            if not size:  # holds no bytes: in nobody's way
                continue
            if i < 0:
                self.floor[pool] = merged(self.floor[pool], offset, offset + size)
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
        return best_gap_np(lo, hi, unit.size, unit.alignment) if len(lo) else 0
