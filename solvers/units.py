"""Placement units: what a solver actually positions.

A contiguous group moves as one rectangle (its outermost parent); a same-offset
set is several rectangles that move together. Collapsing both here means each
solver only sees `Unit`s with one offset variable each, and `expand` turns unit
offsets back into an offset for every buffer.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import replace
from operator import attrgetter
from typing import NamedTuple

from memplan.errors import ProblemError
from memplan.peak_bound import lower_bound
from memplan.plan import Outcome, Plan, arena_sizes_of
from memplan.problem import Buffer, Problem
from memplan.solvers.heuristics.gc_pause import gc_paused


class Rect(NamedTuple):
    """One lifetime-by-bytes rectangle of a unit, in one pool (a tuple: cheap to build by the 100,000)."""

    pool: int
    start: int
    end: int
    size: int

    def lives_with(self, other: Rect) -> bool:
        return self.pool == other.pool and self.start < other.end and other.start < self.end


class Unit(NamedTuple):
    """Rectangles that share one offset; `alignment` and `fixed` apply to that offset.

    `size` (the tallest rectangle), `lifetime` and `area` (summed over the
    rectangles) are stored, not recomputed: orderings sort by them. Build
    units with `make_unit`.
    """

    index: int  # type: ignore[assignment]  # shadows tuple.index on purpose: units are indexed by it
    roots: tuple[str, ...]
    rects: tuple[Rect, ...]
    alignment: int
    fixed: int | None
    size: int
    lifetime: int
    area: int

    def conflicts(self, other: Unit) -> bool:
        return any(a.lives_with(b) for a in self.rects for b in other.rects)


def make_unit(
    index: int, roots: tuple[str, ...], rects: tuple[Rect, ...], alignment: int, fixed: int | None
) -> Unit:
    """A `Unit` with its size, lifetime and area computed from the rectangles."""
    return Unit(
        index,
        roots,
        rects,
        alignment,
        fixed,
        max(r.size for r in rects),
        sum(r.end - r.start for r in rects),
        sum(r.size * (r.end - r.start) for r in rects),
    )


_SHARED: ContextVar[dict[int, tuple[Problem, list[Unit]]] | None] = ContextVar("memplan_units", default=None)


@contextmanager
def shared_units() -> Iterator[None]:
    """Inside this block (one `solvers.solve` call) `units_of` builds a problem's units once and every
    later stage gets a copy of the list: at 100,000 buffers a build is about half a second."""
    token = _SHARED.set({})
    try:
        yield
    finally:
        _SHARED.reset(token)


def share_units(problem: Problem, units: list[Unit]) -> None:
    """Inside `shared_units`: `units` are `units_of(problem)`, known without building them."""
    shared = _SHARED.get()
    if shared is not None:
        shared[id(problem)] = (problem, units)


def units_of(problem: Problem) -> list[Unit]:
    """One unit per group root or same-offset set, with merged alignment and fixed offset."""
    shared = _SHARED.get()
    if shared is None:
        return _built_units(problem)
    known = shared.get(id(problem))  # the problem is held there, so its id stays its own
    if known is None:
        known = (problem, _built_units(problem))
        shared[id(problem)] = known
    return list(known[1])


@gc_paused()
def _built_units(problem: Problem) -> list[Unit]:
    """`units_of`, built (tuples by the 100,000: with the collector paused, `gc_pause`)."""
    if not problem.groups and not problem.same_offsets:
        return _single_buffer_units(problem)
    alignment: dict[str, int] = {}
    fixed: dict[str, int | None] = {}
    for buf in problem.buffers:
        root, rel = problem.root_of(buf.id)
        alignment[root] = math.lcm(alignment.get(root, 1), buf.alignment)
        if buf.offset is not None:
            want = buf.offset - rel
            have = fixed.get(root)
            if want < 0 or (have is not None and have != want):
                raise ProblemError(
                    f"fixed offset {buf.offset} of {buf.id!r} is inconsistent with its group"
                    f" root {root!r} (needs root at {want}, other fixed members say {have})"
                )
            fixed[root] = want

    clusters = problem.joined_same_offsets()
    clustered = {b for c in clusters for b in c}
    clusters += [[b.id] for b in problem.roots() if b.id not in clustered]

    units = []
    for index, roots in enumerate(clusters):
        align = math.lcm(*(alignment[r] for r in roots))
        fixes = {f for r in roots if (f := fixed.get(r)) is not None}
        if len(fixes) > 1:
            raise ProblemError(f"buffers {roots} must share an offset but are fixed at {sorted(fixes)}")
        fix = fixes.pop() if fixes else None
        if fix is not None and fix % align:
            raise ProblemError(
                f"fixed offset {fix} of {roots} breaks the alignment {align} their group needs"
            )
        units.append(make_unit(index, tuple(roots), _rects([problem.buffer(r) for r in roots]), align, fix))
    return units


def _single_buffer_units(problem: Problem) -> list[Unit]:
    """`units_of` when every buffer is its own unit (no groups, no same-offset sets): one pass.

    Problems this simple come by the 100,000 (the scale benchmarks), so fields
    are read with one attrgetter and the tuples built with `tuple.__new__`
    (what the named tuples' own constructors call, minus a Python frame each).
    """
    units = []
    fields = attrgetter("id", "pool", "start", "end", "size", "alignment", "offset", "gaps")
    new = tuple.__new__
    for index, (buffer_id, pool, start, end, size, alignment, offset, gaps) in enumerate(
        map(fields, problem.buffers)
    ):
        if offset is not None and offset % alignment:
            raise ProblemError(
                f"fixed offset {offset} of {[buffer_id]} breaks the alignment {alignment} their group needs"
            )
        if gaps:
            units.append(make_unit(index, (buffer_id,), _rects([problem.buffers[index]]), alignment, offset))
            continue
        life = end - start
        rect = new(Rect, (pool, start, end, size))
        units.append(new(Unit, (index, (buffer_id,), (rect,), alignment, offset, size, life, size * life)))
    return units


def _rects(buffers: list[Buffer]) -> tuple[Rect, ...]:
    """One rectangle per segment of each buffer's life that holds bytes.

    A segment holding bytes `[low, high)` above the offset becomes `[0, high)`:
    what a solver places above or below is then never closer than allowed (the
    bytes under `low` are given away; `planned_exactly` says whether any were).
    A unit holding no bytes at all keeps one empty rectangle over its lifetime.
    """
    rects = tuple(
        Rect(b.pool, seg.start, seg.end, seg.high)
        for b in buffers
        for seg in b.segments()
        if seg.high > seg.low
    )
    return rects or (Rect(buffers[0].pool, buffers[0].start, buffers[0].end, 0),)


def planned_exactly(problem: Problem) -> bool:
    """False if a gap's window starts above its buffer's offset: units then claim more bytes than
    the buffer uses, so a plan of the units is valid but a proof about them is not one about the problem."""
    return not any(g.window is not None and g.window[0] > 0 for b in problem.buffers for g in b.gaps)


def unit_proof_caveat(problem: Problem) -> str | None:
    """Why a proof about `problem`'s units is not one about the problem, or None when it is.

    The gap-window rule, stated once: a gap whose window starts above the
    buffer's offset is planned as if the bytes below the window were in use,
    so an optimum or an infeasibility proven for the units may not hold for
    the problem (which needs fewer bytes).
    """
    if planned_exactly(problem):
        return None
    return "gaps whose window starts above the offset were planned with the bytes below the window in use"


def without_unit_proof(problem: Problem, plan: Plan, placed: Problem | None = None) -> Plan:
    """`plan`, with its proof of optimality withdrawn (`Outcome.NOT_PROVEN`) when the proof was about
    the units only (`unit_proof_caveat`) and the plan is above the problem's own lower bound (that of
    `placed`, the problem in the plan's banks, when given)."""
    caveat = unit_proof_caveat(problem)
    if caveat is None or not plan.proven_optimal or plan.arena_size <= lower_bound(placed or problem):
        return plan
    return replace(plan, outcome=Outcome.NOT_PROVEN, status=f"not proven: {caveat} ({plan.status})")


def expand(problem: Problem, units: Sequence[Unit], unit_offsets: Sequence[int]) -> dict[str, int]:
    """Offsets for every buffer from one offset per unit."""
    if not problem.groups and not problem.same_offsets and len(units) == len(problem.buffers):
        return {u.roots[0]: unit_offsets[u.index] for u in units}  # one unit per buffer, in buffer order
    root_offset = {root: unit_offsets[u.index] for u in units for root in u.roots}
    offsets = {}
    for buf in problem.buffers:
        root, rel = problem.root_of(buf.id)
        offsets[buf.id] = root_offset[root] + rel
    return offsets


def make_plan(
    problem: Problem,
    units: Sequence[Unit],
    unit_offsets: Sequence[int],
    solver: str,
    seconds: float,
    outcome: Outcome = Outcome.HEURISTIC,
    status: str = "",
    bound: int | None = None,
) -> Plan:
    """A `Plan` from unit offsets, with arena sizes computed from the offsets."""
    if not isinstance(outcome, Outcome):  # e.g. a bool where `proven_optimal` used to go
        raise TypeError(f"make_plan: outcome must be an Outcome, got {outcome!r}")
    offsets = expand(problem, units, unit_offsets)
    arenas = arena_sizes_of(problem, offsets)
    plan = Plan(
        offsets=offsets,
        arena_sizes=arenas,
        solver=solver,
        seconds=seconds,
        lower_bound=lower_bound(problem) if bound is None else bound,
        status=status,
        outcome=outcome,
    )
    return without_unit_proof(problem, plan)


def within_capacity(units: Sequence[Unit], unit_offsets: Sequence[int], capacity: int | None) -> bool:
    """True if every pool's arena is within `capacity` (always, without one)."""
    return capacity is None or all(s <= capacity for s in arena_of(units, unit_offsets).values())


def rank(units: Sequence[Unit], unit_offsets: Sequence[int], capacity: int | None) -> tuple[int, int]:
    """Sort key for candidate plans: within capacity first, then by total arena."""
    return (
        int(not within_capacity(units, unit_offsets, capacity)),
        sum(arena_of(units, unit_offsets).values()),
    )


def arena_of(units: Sequence[Unit], unit_offsets: Mapping[int, int] | Sequence[int]) -> dict[int, int]:
    """Per pool: the highest end address of the placed units."""
    sizes: dict[int, int] = {}
    for u in units:
        for r in u.rects:
            sizes[r.pool] = max(sizes.get(r.pool, 0), unit_offsets[u.index] + r.size)
    return sizes
