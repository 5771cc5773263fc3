"""MiniMalloc's canonical depth-first search, in Python: a decision procedure for one pool.

M. D. Moffitt, "MiniMalloc" (ASPLOS 2023; github.com/google/minimalloc,
src/solver.cc and src/sweeper.cc) searches only *canonical* plans: the next
unit is one whose lowest legal offset is the lowest of all unplaced units
(ties by a static preorder), and offsets never decrease along a branch.
Its inferences, all kept here:

- sections: the time axis is cut before every end time; the units live in a
  section all meet, so its unplaced units stack above its floor (the top of
  the last unit placed in it, or the lowest offset any of its unplaced units
  can take, whichever is higher, and never below the offset being placed):
  floor + unplaced bytes > capacity prunes the branch ("section inference",
  "monotonic floor", "unallocated floor");
- dominance: a unit whose lowest offset is at or above the lowest top any
  unplaced unit can reach would leave a gap a canonical plan fills: skipped;
- hatless pruning: a unit that meets no unplaced unit cannot make its
  siblings' subtrees any better, so after its subtree fails the node fails.

The static preorders are MiniMalloc's letter codes (`PREORDERS`): T the
largest section total the unit lives in, W its lifetime, A its area, each
descending. On the instances where it decides quickly, a branch here is far
cheaper than one of CP-SAT's skyline search with its NoOverlap2D propagation
(timings: docs/exact_solver.md). This search is the same as MiniMalloc's, in
Python with numpy for the section arrays; `solvers.cpsat.driver` gives it a head start in decisions and a node-limited
bisection when minimising (`descend`), and `solvers.cpsat.searches` can run it in
a thread next to the CP-SAT portfolio (`round_robin`).

Only simple problems qualify (`applicable`): at most `MAX_UNITS` units, one
pool, one rectangle per unit, no fixed offsets (alignments are honoured). An exhausted search is reported
as such but not trusted as a proof: callers treat it as "not found".
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum

import numpy as np

from memplan.arith import align_up
from memplan.solvers.units import Unit

PREORDERS = ("TWA", "WAT", "TAW")
"""MiniMalloc's static preorders (its default round robin is WAT, TAW, TWA); TWA first: alone it
decides more of MiniMalloc's instances than either other (docs/exact_solver.md)."""

MAX_UNITS = 800
"""The search recurses once per placed unit (Python's default limit is 1,000 frames), and it sorts
the unplaced units at every node: not for bigger problems."""

CHECK_EVERY = 64
"""Nodes between looks at the clock and the stop flag."""


class Verdict(Enum):
    FOUND = "found"
    EXHAUSTED = "exhausted"  # every canonical branch pruned (MiniMalloc's proof of infeasibility)
    STOPPED = "stopped"  # out of time or nodes, or stopped from outside


@dataclass
class Result:
    verdict: Verdict
    offsets: list[int] | None
    nodes: int


def applicable(units: Sequence[Unit]) -> bool:
    """Whether `search` can plan these units: at most `MAX_UNITS`, one pool, one rectangle each,
    none fixed."""
    return (
        0 < len(units) <= MAX_UNITS
        and all(len(u.rects) == 1 and u.fixed is None for u in units)
        and len({u.rects[0].pool for u in units}) == 1
    )


class Sweep:
    """MiniMalloc's sweep: sections (the units live just before each end time), each unit's
    span of sections, and who meets whom."""

    def __init__(self, units: Sequence[Unit]) -> None:
        n = len(units)
        points = sorted(
            [(u.rects[0].start, 1, i) for i, u in enumerate(units)]
            + [(u.rects[0].end, 0, i) for i, u in enumerate(units)]
        )  # at one time, ends (0) before starts (1): lifetimes are half-open
        live: set[int] = set()
        sections: list[list[int]] = []
        first = [0] * n
        self.span_end = [0] * n
        self.overlaps: list[list[int]] = [[] for _ in range(n)]
        last_time: int | None = None
        for t, kind, i in points:
            if kind == 0:
                if last_time is None or last_time < t:
                    last_time = t
                    sections.append(sorted(live))
                live.discard(i)
                self.span_end[i] = len(sections)
            else:
                if last_time is None:
                    last_time = t
                for j in live:
                    self.overlaps[i].append(j)
                    self.overlaps[j].append(i)
                live.add(i)
                first[i] = len(sections)
        self.span_start = first
        self.sections = sections
        sizes = [u.size for u in units]
        totals = [sum(sizes[i] for i in s) for s in sections]
        self.totals = totals
        # per unit, the largest section total it lives in (MiniMalloc's "T")
        self.section_total = [max(totals[first[i] : self.span_end[i]], default=0) for i in range(n)]


PREORDER_LETTERS = "TWAZ"
"""MiniMalloc's preorder letters supported here: section Total, Width (lifetime), Area, siZe."""


def preorder(units: Sequence[Unit], sweep: Sweep, code: str) -> list[int]:
    """Unit positions sorted by MiniMalloc's letter code: each letter descending, then position."""
    keys = {
        "T": lambda i: -sweep.section_total[i],
        "W": lambda i: -units[i].lifetime,
        "A": lambda i: -units[i].area,
        "Z": lambda i: -units[i].size,
    }
    return sorted(range(len(units)), key=lambda i: (*(keys[c](i) for c in code), i))


def search(
    units: Sequence[Unit],
    capacity: int,
    code: str = "TWA",
    *,
    deadline: float | None = None,
    node_limit: int | None = None,
    stop: threading.Event | None = None,
    sweep: Sweep | None = None,
) -> Result:
    """A canonical plan of `units` (one pool, see `applicable`) within `capacity` bytes, in
    MiniMalloc's search order under preorder `code`; offsets are per position in `units`."""
    return _Search(units, capacity, code, deadline, node_limit, stop, sweep or Sweep(units)).run()


class _Search:
    def __init__(
        self,
        units: Sequence[Unit],
        capacity: int,
        code: str,
        deadline: float | None,
        node_limit: int | None,
        stop: threading.Event | None,
        sweep: Sweep,
    ) -> None:
        n = len(units)
        order = preorder(units, sweep, code)
        rank = [0] * n
        for r, i in enumerate(order):
            rank[i] = r
        # everything below is indexed by preorder rank
        self.n, self.capacity = n, capacity
        self.size = [units[i].size for i in order]
        self.align = [units[i].alignment for i in order]
        self.align_one = all(a == 1 for a in self.align)
        self.overlaps = [[rank[j] for j in sweep.overlaps[i]] for i in order]
        self.lo = [sweep.span_start[i] for i in order]
        self.hi = [sweep.span_end[i] for i in order]
        self.order = order
        self.code = code
        self.ident = order  # the last tie-break: the unit's position in the input
        self.key = {
            "W": [-units[i].lifetime for i in order],
            "A": [-units[i].area for i in order],
            "Z": [-units[i].size for i in order],
        }
        s = len(sweep.sections)
        self.floor = np.zeros(s, dtype=np.int64)
        self.total = np.array(sweep.totals, dtype=np.int64)
        width = max((len(m) for m in sweep.sections), default=0)
        members = np.full((s, max(width, 1)), n, dtype=np.int64)  # n: a sentinel that is never unplaced
        for k, m in enumerate(sweep.sections):
            members[k, : len(m)] = [rank[i] for i in m]
        self.members = members
        self.never = capacity + 1
        self.lowest = np.zeros(
            n + 1, dtype=np.int64
        )  # lowest offset of each unplaced unit; `never` if placed
        self.lowest[n] = self.never
        self.min_offset = [0] * n
        self.offset = [-1] * n
        self.solution = [0] * n
        self.cuts = np.zeros(max(s - 1, 0), dtype=np.int64)  # units crossing each section boundary
        for r in range(n):
            self.cuts[self.lo[r] : self.hi[r] - 1] += 1
        self.deadline, self.node_limit, self.stop = deadline, node_limit, stop
        self.nodes = 0
        self.stopped = False

    def run(self) -> Result:
        if self.n and (self.total.max(initial=0) > self.capacity or max(self.size) > self.capacity):
            return Result(Verdict.EXHAUSTED, None, 0)
        if self._split(list(range(self.n)), 0, len(self.total)):
            offsets = [0] * self.n
            for r, i in enumerate(self.order):
                offsets[i] = self.solution[r]
            return Result(Verdict.FOUND, offsets, self.nodes)
        return Result(Verdict.STOPPED if self.stopped else Verdict.EXHAUSTED, None, self.nodes)

    def _out_of_budget(self) -> bool:
        if self.node_limit is not None and self.nodes >= self.node_limit:
            return True
        if self.nodes % CHECK_EVERY == 0:
            if self.deadline is not None and time.perf_counter() > self.deadline:
                return True
            if self.stop is not None and self.stop.is_set():
                return True
        return False

    def _split(self, unplaced: list[int], slo: int, shi: int) -> bool:
        """Solve the sections [slo, shi) holding `unplaced`, each run between boundaries that no
        unplaced unit crosses on its own (MiniMalloc's dynamic decomposition), each in its own
        preorder (section totals as they are now)."""
        cuts = np.flatnonzero(self.cuts[slo : shi - 1] == 0) + slo + 1
        bounds = [slo, *cuts.tolist(), shi]
        for a, b in zip(bounds, bounds[1:]):
            part = [r for r in unplaced if self.lo[r] < b and a < self.hi[r]]
            if part and not self._dfs(self._preordered(part), a, b, 0, -1):
                return False
        return True

    def _preordered(self, part: list[int]) -> list[tuple[int, int]]:
        """(preorder index, unit) of `part` in this search's preorder, "T" read from the sections now."""
        total = self.total
        keyed = []
        for r in part:
            t = int(total[self.lo[r] : self.hi[r]].max())
            keyed.append((*(-t if c == "T" else self.key[c][r] for c in self.code), self.ident[r], r))
        return list(enumerate(k[-1] for k in sorted(keyed)))

    def _raise_neighbours(self, r: int, top: int) -> tuple[list[tuple[int, int]], bool, int, int]:
        """With r placed up to `top`: the unplaced units overlapping it may start no lower than `top`
        (aligned). Returns (unit, its old lowest offset) for each raised one, whether r has unplaced
        neighbours (a hat: without one no other placement of r can do better), and the span of
        sections of the raised units."""
        lowest, lowest_np, offset = self.min_offset, self.lowest, self.offset
        changed: list[tuple[int, int]] = []
        hat = False
        flo, fhi = len(self.total), 0
        aligned = self.align_one
        for q in self.overlaps[r]:
            if offset[q] >= 0:
                continue
            hat = True
            old = lowest[q]
            if old < top:
                changed.append((q, old))
                new = top if aligned else align_up(top, self.align[q])
                lowest[q] = new
                lowest_np[q] = new
                if self.lo[q] < flo:
                    flo = self.lo[q]
                if self.hi[q] > fhi:
                    fhi = self.hi[q]
        return changed, hat, flo, fhi

    def _dfs(self, unplaced: list[tuple[int, int]], slo: int, shi: int, at: int, after: int) -> bool:
        """Place `unplaced` ((preorder index, unit), living in sections [slo, shi)) with offsets
        from `at` up, and at `at` only preorder indices above `after` (canonical order). False: pruned, or out of
        budget (`stopped`). Every placement is recorded in `solution`; the state is restored on
        the way back, found or not, as in MiniMalloc."""
        if self.stopped or self._out_of_budget():
            self.stopped = True
            return False
        self.nodes += 1
        if not unplaced:
            return True
        lowest, size, offset = self.min_offset, self.size, self.offset
        ordering = sorted((lowest[r], k, r) for k, r in unplaced)
        ceiling = min(o + size[r] for o, _, r in ordering)  # dominance: nothing may start at or above it
        capacity, floor, total = self.capacity, self.floor, self.total
        lowest_np, never = self.lowest, self.never
        # Placing r at o leaves o + total[s] in r's sections and at least that elsewhere: nothing at
        # an offset above `capacity - most` passes the check, and at offset o only units whose
        # sections cover every section that o alone already overfills (`over`).
        most = int(total[slo:shi].max(initial=0))
        over_at, over = -1, (0, -1)
        for o, k, r in ordering:
            if o >= ceiling or o + most > capacity:
                break
            if o < at or (o == at and k < after):
                continue
            top = o + size[r]
            if top > capacity:
                continue
            if o != over_at:
                overfull = np.flatnonzero(np.maximum(floor[slo:shi], o) + total[slo:shi] > capacity)
                over_at = o
                over = (int(overfull[0]) + slo, int(overfull[-1]) + slo) if len(overfull) else (0, -1)
            if over[1] >= 0 and (over[0] < self.lo[r] or over[1] >= self.hi[r]):
                continue
            offset[r] = o
            self.solution[r] = o
            lowest_np[r] = never
            changed, hat, flo, fhi = self._raise_neighbours(r, top)
            lo, hi = self.lo[r], self.hi[r]
            saved_floor = floor[lo:hi].copy()
            floor[lo:hi] = top
            total[lo:hi] -= size[r]
            # the unplaced units of a section cannot go below the lowest of their offsets
            saved_low = floor[flo:fhi].copy()
            if fhi > flo:
                least = lowest_np[self.members[flo:fhi]].min(axis=1)
                np.maximum(floor[flo:fhi], np.where(least < never, least, 0), out=floor[flo:fhi])
            found = False
            if int((np.maximum(floor[slo:shi], o) + total[slo:shi]).max(initial=0)) <= capacity:
                self.cuts[lo : hi - 1] -= 1
                rest = [kq for kq in unplaced if kq[1] != r]
                if (self.cuts[lo : hi - 1] == 0).any():
                    found = self._split([q for _, q in rest], slo, shi)
                else:
                    found = self._dfs(rest, slo, shi, o, k)
                self.cuts[lo : hi - 1] += 1
            floor[flo:fhi] = saved_low
            floor[lo:hi] = saved_floor
            total[lo:hi] += size[r]
            for q, old in reversed(changed):
                lowest[q] = old
                lowest_np[q] = old
            offset[r] = -1
            lowest_np[r] = lowest[r]
            if found:
                return True
            if self.stopped or not hat:
                return False
        return False


def round_robin(
    units: Sequence[Unit],
    capacity: int,
    codes: Sequence[str],
    *,
    deadline: float | None = None,
    stop: threading.Event | None = None,
) -> tuple[str, list[int]] | None:
    """(preorder code, offsets) of the first plan within `capacity` found by `search` under
    `codes`, or None. One code searches without a node limit; several take turns, as in
    MiniMalloc, each with a node limit that starts at twice the number of units and doubles
    every round, until one finds a plan or all exhaust their search."""
    sweep = Sweep(units)
    limit: int | None = None if len(codes) == 1 else len(units)
    live = list(codes)
    while live:
        limit = None if limit is None else 2 * limit
        for code in list(live):
            result = search(
                units, capacity, code, deadline=deadline, node_limit=limit, stop=stop, sweep=sweep
            )
            if result.verdict is Verdict.FOUND:
                assert result.offsets is not None
                return code, result.offsets
            if result.verdict is Verdict.EXHAUSTED:
                live.remove(code)
            elif limit is None or result.nodes < limit:
                return None  # out of time or stopped, not out of nodes
    return None


def descend(
    units: Sequence[Unit],
    top: int,
    floor: int,
    codes: Sequence[str],
    node_limit: int,
    granule: int,
    deadline: float,
    floor_node_limit: int = 0,
) -> tuple[str, list[int], int] | None:
    """Bisect [floor, top) with `search`: each probe tries `codes` in turn, `node_limit` nodes
    each; a plan lowers the top to its arena, a probe that finds none raises the floor past it
    (not a proof). With `floor_node_limit`, the floor itself is asked first, with that many
    nodes; the bisection after it is the same either way. (code, offsets, arena) of the lowest
    plan found, or None."""
    sweep = Sweep(units)

    def probe(cap: int, nodes: int) -> tuple[str, list[int], int] | None:
        for code in codes:
            result = search(units, cap, code, deadline=deadline, node_limit=nodes, sweep=sweep)
            if result.offsets is not None:
                return code, result.offsets, max(o + u.size for o, u in zip(result.offsets, units))
        return None

    if floor_node_limit and floor < top:
        at_floor = probe(floor, floor_node_limit)
        if at_floor is not None:
            return at_floor
    best: tuple[str, list[int], int] | None = None
    while floor < top and time.perf_counter() < deadline:
        cap = max(floor, (floor + (top - floor) // 2) // granule * granule)
        found = probe(cap, node_limit)
        if found is not None:
            best, top = found, found[2]
        else:
            floor = cap + granule
    return best
