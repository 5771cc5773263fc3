"""Lower bounds above the peak: windows of time proven not to fit.

Restrict any plan of the whole problem to the rectangles live in a window of
time, clipped to it, and it is a plan of the window in the same bytes. So a
window that CP-SAT proves cannot be planned in C bytes proves the whole needs
more than C; with every coordinate a multiple of g (`bounds.scale_of`: an
optimum can be settled onto that grid), it needs at least C + g.

The search: windows of elementary sections (between consecutive start/end
times of the pool) centred on the sections that hold the most bytes, each
twice as wide as the last, up to the whole pool. A window that fits at the
current bound is widened; one proven not to fit raises the bound (probes
1, 2, 4, ... steps higher, then bisection) and is probed again; one neither
proven nor planned in its probe's time ends that centre. Everything runs
within `time_limit_s`; whatever is not proven by then is not claimed, so the
result never drops below the bound it starts from (`bounds.pool_bounds`).

The setup (the units and the starting bound; seconds at 100,000 buffers)
counts against the budget but is not cut short: a budget it uses up gives
the starting bound. Single-worker CP-SAT per probe: the machines this runs on have two cores and
other work. Problems whose units claim more bytes than a gap window uses
(`units.planned_exactly`) keep the starting bound: a proof about their units
is not one about the problem.
"""

from __future__ import annotations

import itertools
import time
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import Enum

from ortools.sat.python import cp_model

from memplan.arith import ceil_div
from memplan.problem import Problem
from memplan.solvers.exact.arena_bounds import pool_bounds, scale_of, step_of
from memplan.solvers.units import Unit, planned_exactly, units_of

MIN_PROBE_SECONDS = 0.05
"""No probe gets less than this (CP-SAT needs a few milliseconds to load even a small window)."""

PROBE_SHARE = 0.25
"""A probe gets at most this share of the time left, so one hard window cannot eat the budget."""

CENTRES = 4
"""Sections (by bytes live, most first) that windows are centred on, per pool."""


class Verdict(Enum):
    FITS = "fits"
    PROVEN_NOT = "proven not to fit"
    UNKNOWN = "unknown"


@dataclass(frozen=True)
class Box:
    """One rectangle of a unit in section coordinates: sections [lo, hi), `size` in units of g."""

    unit: int
    lo: int
    hi: int
    size: int


@dataclass(frozen=True)
class WindowBounds:
    """Per pool, the bound proven (bytes) next to the one it started from, and how it was found."""

    bounds: dict[int, int]
    start: dict[int, int]
    probes: int
    proofs: int  # probes proven infeasible
    seconds: float
    windows: dict[int, tuple[int, int]]  # pool -> the times [start, end) of the window that proved it
    widest_fit: dict[int, tuple[int, int]]  # pool -> the times [start, end) of the widest window planned
    complete: bool  # every centre was widened to the whole pool (no probe ran out of time)


def window_lower_bounds(
    problem: Problem,
    time_limit_s: float,
    units: Sequence[Unit] | None = None,
    known: Mapping[int, int] | None = None,
) -> WindowBounds:
    """Per pool, a lower bound on the arena at least `bounds.pool_bounds`, proven within `time_limit_s`.

    `known`: per pool, the arena of a plan (e.g. best-fit's); a pool's search ends when its bound
    reaches it, since no bound passes an optimum."""
    began = time.perf_counter()
    deadline = began + time_limit_s
    units = units_of(problem) if units is None else units
    start = pool_bounds(problem, units)
    bounds, windows, widest = dict(start), {}, {}
    counter = _Counter()
    complete = True
    if planned_exactly(problem) and units:
        g = scale_of(units)
        for pool in sorted(start):
            pool_boxes, times = _boxes(units, pool, g)
            if not pool_boxes:
                continue
            search = _PoolSearch(units, pool_boxes, g, deadline, counter)
            if known is not None and pool in known:
                search.ceiling = known[pool] // g  # a plan settled onto the grid is no bigger
            level, window, done = search.run(ceil_div(start[pool], g))
            complete &= done
            if search.widest_fit is not None:
                widest[pool] = (times[search.widest_fit[0]], times[search.widest_fit[1]])
            if window is not None:
                bounds[pool], windows[pool] = level * g, (times[window[0]], times[window[1]])
    return WindowBounds(
        bounds, start, counter.probes, counter.proofs, time.perf_counter() - began, windows, widest, complete
    )


class _Counter:
    def __init__(self) -> None:
        self.probes = 0
        self.proofs = 0


def _boxes(units: Sequence[Unit], pool: int, g: int) -> tuple[list[Box], list[int]]:
    """The pool's non-empty rectangles with times replaced by elementary-section indices, and the
    times (section k is [times[k], times[k + 1]))."""
    rects = [
        (u.index, r) for u in units for r in u.rects if r.pool == pool and r.size > 0 and r.start < r.end
    ]
    times = sorted({t for _, r in rects for t in (r.start, r.end)})
    rank = {t: k for k, t in enumerate(times)}
    return [Box(i, rank[r.start], rank[r.end], ceil_div(r.size, g)) for i, r in rects], times


class _PoolSearch:
    """Windows of one pool, widened around the fullest sections; the bound in units of g."""

    def __init__(
        self, units: Sequence[Unit], boxes: list[Box], g: int, deadline: float, counter: _Counter
    ) -> None:
        self.units = {u.index: u for u in units}
        self.boxes, self.g, self.deadline, self.counter = boxes, g, deadline, counter
        self.sections = max(b.hi for b in boxes)
        change = [0] * (self.sections + 1)
        for b in boxes:
            change[b.lo] += b.size
            change[b.hi] -= b.size
        self.load = list(itertools.accumulate(change[:-1]))
        self.widest_fit: tuple[int, int] | None = None  # sections [lo, hi) of the widest window planned
        self.tried: set[tuple[int, int, int]] = set()  # (lo, hi, level) of windows already probed
        self.share = PROBE_SHARE  # of the time left, per probe
        self.ceiling: int | None = None  # the level of a known plan: the search ends there

    def run(self, level: int) -> tuple[int, tuple[int, int] | None, bool]:
        """The highest level (arena in units of g) proven, the window that proved it (None: none
        did), and whether the search ended by itself rather than by the deadline or an unproven probe.

        Once every centre has stopped, the narrowest window left unknown gets all the time left."""
        proving: tuple[int, int] | None = None
        unknown: list[tuple[int, int]] = []
        if self.ceiling is not None and level >= self.ceiling:
            return level, proving, True
        for centre in self._centres():
            width = 1
            while time.perf_counter() < self.deadline:
                lo = max(0, min(centre - width // 2, self.sections - width))
                hi = min(self.sections, lo + width)
                if (lo, hi, level) in self.tried:  # a window another centre grew into
                    break
                self.tried.add((lo, hi, level))
                raised, verdict = self._raise(lo, hi, level)
                if raised > level:
                    level, proving = raised, (lo, hi)
                if self.ceiling is not None and level >= self.ceiling:
                    return level, proving, True  # a plan meets the bound: proven optimal
                if verdict is Verdict.UNKNOWN:
                    unknown.append((lo, hi))
                    break
                if (lo, hi) == (0, self.sections):
                    break
                width *= 2
        if unknown and self.deadline - time.perf_counter() >= MIN_PROBE_SECONDS:
            lo, hi = min(unknown, key=lambda w: w[1] - w[0])
            self.share = 1.0
            raised, verdict = self._raise(lo, hi, level)
            if raised > level:
                level, proving = raised, (lo, hi)
            if verdict is not Verdict.UNKNOWN:
                unknown.remove((lo, hi))
        return level, proving, not unknown and time.perf_counter() < self.deadline

    def _centres(self) -> list[int]:
        """The fullest sections, one per run of equal load (neighbours with the same bytes are alike)."""
        runs = [s for s in range(self.sections) if s == 0 or self.load[s] != self.load[s - 1]]
        return sorted(runs, key=lambda s: -self.load[s])[:CENTRES]

    def _raise(self, lo: int, hi: int, level: int) -> tuple[int, Verdict]:
        """The lowest level at which the window [lo, hi) is not proven not to fit (at least `level`),
        and the verdict of the probe there (FITS or UNKNOWN): probes 1, 2, 4, ... higher, then bisection."""
        verdict = self._probe(lo, hi, level)
        if verdict is not Verdict.PROVEN_NOT:
            return level, verdict
        proven, step = level + 1, 1  # the window needs at least `proven`
        while True:
            verdict = self._probe(lo, hi, proven + step - 1)
            if verdict is not Verdict.PROVEN_NOT:
                top, top_verdict = proven + step - 1, verdict
                break
            proven, step = proven + step, step * 2
        while proven < top:  # the window needs `proven` and is not proven not to fit at `top`
            mid = (proven + top) // 2
            verdict = self._probe(lo, hi, mid)
            if verdict is Verdict.PROVEN_NOT:
                proven = mid + 1
            else:
                top, top_verdict = mid, verdict
        return proven, top_verdict

    def _probe(self, lo: int, hi: int, level: int) -> Verdict:
        """Whether the rectangles of sections [lo, hi), clipped to them, fit in `level` units of g."""
        left = self.deadline - time.perf_counter()
        if left < MIN_PROBE_SECONDS:
            return Verdict.UNKNOWN
        clipped = [
            Box(b.unit, max(b.lo, lo), min(b.hi, hi), b.size) for b in self.boxes if b.lo < hi and lo < b.hi
        ]
        model = cp_model.CpModel()
        y: dict[int, cp_model.IntVar | int] = {}
        x_intervals, y_intervals = [], []
        for b in clipped:
            if b.unit not in y:
                offset = self._offset(model, self.units[b.unit], clipped, level)
                if offset is None:
                    return self._count(Verdict.PROVEN_NOT)
                y[b.unit] = offset
            x_intervals.append(model.new_fixed_size_interval_var(b.lo, b.hi - b.lo, ""))
            y_intervals.append(model.new_fixed_size_interval_var(y[b.unit], b.size, ""))
        model.add_no_overlap_2d(x_intervals, y_intervals)
        self._break_symmetry(model, clipped, y)
        budget = max(MIN_PROBE_SECONDS, left * self.share)
        status = self._solve(model, [v for v in y.values() if not isinstance(v, int)], budget / 2, True)
        if status == cp_model.UNKNOWN:
            status = self._solve(model, [], budget / 2, False)
        if status == cp_model.INFEASIBLE:
            return self._count(Verdict.PROVEN_NOT)
        if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
            return self._count(Verdict.UNKNOWN)
        if self.widest_fit is None or hi - lo > self.widest_fit[1] - self.widest_fit[0]:
            self.widest_fit = (lo, hi)
        return self._count(Verdict.FITS)

    @staticmethod
    def _solve(
        model: cp_model.CpModel, offsets: list[cp_model.IntVar], seconds: float, skyline: bool
    ) -> cp_model.CpSolverStatus:
        """One single-worker search: the skyline one (lowest offset first, as `cpsat_search`; finds
        plans of tight windows fast) or CP-SAT's own (better at proofs). Both are complete."""
        if skyline:
            model = model.clone()
            model.add_decision_strategy(
                [model.get_int_var_from_proto_index(v.index) for v in offsets],
                cp_model.CHOOSE_LOWEST_MIN,
                cp_model.SELECT_MIN_VALUE,
            )
        solver = cp_model.CpSolver()
        solver.parameters.num_workers = 1
        solver.parameters.max_time_in_seconds = seconds
        if skyline:
            solver.parameters.search_branching = cp_model.FIXED_SEARCH
        return solver.solve(model)

    def _offset(
        self, model: cp_model.CpModel, unit: Unit, clipped: list[Box], level: int
    ) -> cp_model.IntVar | int | None:
        """The unit's offset in units of g (an int if fixed), low enough for its tallest clipped box
        to end by `level`; None if it cannot."""
        room = level - max(b.size for b in clipped if b.unit == unit.index)
        if unit.fixed is not None:
            at = unit.fixed // self.g  # fixed offsets are multiples of g (scale_of)
            return at if at <= room else None
        if room < 0:
            return None
        step = step_of(unit, self.g)
        k = model.new_int_var(0, room // step, "")
        if step == 1:
            return k
        offset = model.new_int_var(0, room // step * step, "")
        model.add(offset == step * k)
        return offset

    def _break_symmetry(
        self, model: cp_model.CpModel, clipped: list[Box], y: dict[int, cp_model.IntVar | int]
    ) -> None:
        """Free units with the same clipped boxes and step are interchangeable: order them by offset."""
        shapes: dict[int, list[tuple[int, int, int]]] = defaultdict(list)
        for b in clipped:
            shapes[b.unit].append((b.lo, b.hi, b.size))
        alike: dict[tuple[object, ...], list[cp_model.IntVar]] = defaultdict(list)
        for unit, shape in shapes.items():
            offset = y[unit]
            if not isinstance(offset, int):
                alike[(step_of(self.units[unit], self.g), *sorted(shape))].append(offset)
        for group in alike.values():
            for lower, upper in zip(group, group[1:]):
                model.add(lower <= upper)

    def _count(self, verdict: Verdict) -> Verdict:
        self.counter.probes += 1
        self.counter.proofs += verdict is Verdict.PROVEN_NOT
        return verdict
