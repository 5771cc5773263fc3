"""ExecuTorch 1.5.1's `greedy` memory planner, reimplemented without torch.

This is the baseline every other solver is measured against, so it must
give the arena ExecuTorch itself would (exir/memory_planning.py: `greedy`,
`pick_shared_obj`, `_compute_total_sizes`):

- Sizes are realigned: rounded up to the alignment. ExecuTorch has one
  alignment for the whole program; here it is the lcm of the alignments of
  the pool's units, so that every size, hence every cumulative offset, stays a
  multiple of every alignment in the pool (equal to ExecuTorch's when all
  buffers share one alignment).
- Specs are ordered by size with `bisect.insort` (ascending, stable) and then
  reversed: largest first, and equal sizes in *reverse* insertion order. The
  insertion order is the Problem's buffer order (ExecuTorch 1.5.1 collects
  specs in graph order into a list, and extraction keeps that order).
- Each spec goes to the first shared object where it overlaps no allocation in
  time (at offset 0); else, when overlapping allocations are allowed, to the
  first object whose overlapping allocations leave room on top of the highest
  of them; else to a new object of its size.
- Shared objects are laid out one after another per pool (mem_id); the pool's
  arena is the sum of their sizes, which is what this plan reports.
- A contiguous group is its root's spec; members follow the root, as
  ExecuTorch's storage_base resolution places them.

Pools are planned independently. Fixed offsets and same-offset sets have no
counterpart in ExecuTorch's greedy and are rejected.
"""

from __future__ import annotations

import math
import time
from collections import defaultdict
from dataclasses import dataclass

import numpy as np

from memplan.arith import align_up
from memplan.errors import UnsupportedProblemError
from memplan.peak_bound import lower_bounds
from memplan.plan import Outcome, Plan
from memplan.problem import Problem
from memplan.solvers.heuristics.live_index import LiveIndex
from memplan.solvers.units import Unit, expand, units_of


@dataclass(frozen=True)
class GreedyParams:
    """ExecuTorch's own flags; greedy has no techniques of its own to switch.

    `sort_alignment`: ExecuTorch sorts by `TensorSpec.allocated_memory`
    *before* realigning, i.e. rounded to the spec's alignment at that moment.
    None (default) sorts by the realigned size, which is what ExecuTorch does
    at its default alignment of 16 or whenever specs were realigned before;
    pass 16 to mimic fresh specs planned at another alignment.
    """

    allow_overlapping_allocations: bool = True  # reuse a shared object whenever lifetimes allow
    sort_alignment: int | None = None  # round sizes to this before sorting (None: the realigned size)


def solve_greedy(
    problem: Problem, params: GreedyParams = GreedyParams(), *, time_limit_s: float | None = None
) -> Plan:
    """Plan like ExecuTorch's greedy. One deterministic pass; `time_limit_s` is not needed.

    Fixed offsets and same-offset sets are refused up front by `solve()` (the
    registry says greedy lacks them), as ExecuTorch's greedy cannot honour them.
    A problem asking for shared objects is planned as ExecuTorch's
    `greedy(allow_overlapping_allocations=False)` plans it, whatever the flag says.
    """
    del time_limit_s  # a single pass: nothing to cut short
    t0 = time.perf_counter()
    overlapping = params.allow_overlapping_allocations and not problem.shared_objects
    units = units_of(problem)
    position = {b.id: i for i, b in enumerate(problem.buffers)}
    by_pool: dict[int, list[Unit]] = defaultdict(list)
    for unit in sorted(units, key=lambda u: position[u.roots[0]]):  # insertion order
        by_pool[unit.rects[0].pool].append(unit)

    unit_offsets = [0] * len(units)
    arena_sizes: dict[int, int] = {}
    for pool in sorted(by_pool):
        arena_sizes[pool] = _plan_pool(by_pool[pool], unit_offsets, overlapping, params.sort_alignment)
    bounds = lower_bounds(problem)
    proven = all(arena_sizes[p] == bounds[p] for p in arena_sizes)
    return Plan(
        offsets=expand(problem, units, unit_offsets),
        arena_sizes=arena_sizes,
        solver="greedy",
        seconds=time.perf_counter() - t0,
        lower_bound=sum(bounds.values()),
        status="heuristic",
        outcome=Outcome.OPTIMAL if proven else Outcome.HEURISTIC,
    )


def _plan_pool(
    units: list[Unit],
    unit_offsets: list[int],
    allow_overlapping_allocations: bool,
    sort_alignment: int | None,
) -> int:
    """Place one pool's units (in insertion order); write offsets; return the arena."""
    alignment = math.lcm(*(u.alignment for u in units))
    sizes = [align_up(u.size, alignment) for u in units]
    keys = sizes if sort_alignment is None else [align_up(u.size, sort_alignment) for u in units]
    # ExecuTorch's greedy knows no lifetime gaps: a buffer with gaps is planned over its whole span.
    starts = [min(r.start for r in u.rects) for u in units]
    ends = [max(r.end for r in u.rects) for u in units]
    # bisect.insort(..., key=size) then reverse == stable ascending sort, reversed.
    order = sorted(range(len(units)), key=keys.__getitem__)[::-1]

    live = LiveIndex(starts, ends)  # payload of a placed unit: (shared object, top inside it)
    obj_size: list[int] = []  # per shared object, in creation order
    obj_of = [0] * len(units)  # shared object of each placed unit
    rel = [0] * len(units)  # offset inside its shared object

    for i in order:
        size = sizes[i]
        hits = live.overlapping(starts[i], ends[i])
        n_obj = len(obj_size)
        if isinstance(hits, list):
            busy = {obj for obj, _ in hits}
        else:
            busy = set(np.unique(hits[0]).tolist())
        obj, offset = next((k for k in range(n_obj) if k not in busy), None), 0
        if obj is not None and obj_size[obj] < size:
            raise UnsupportedProblemError(
                f"sort_alignment={sort_alignment} orders {units[i].roots[0]!r} after a smaller"
                f" buffer, where ExecuTorch's greedy fails its 'Allocation specs are not sorted'"
                " assertion; use sort_alignment=None"
            )
        if obj is None and allow_overlapping_allocations and n_obj:
            highest = _highest_per_object(hits, n_obj)
            obj = next((k for k in range(n_obj) if highest[k] + size <= obj_size[k]), None)
            offset = highest[obj] if obj is not None else 0
        if obj is None:
            obj = n_obj
            obj_size.append(size)
        obj_of[i], rel[i] = obj, offset
        live.add(i, obj, offset + size)

    base = [0] * len(obj_size)
    for k in range(1, len(obj_size)):
        base[k] = base[k - 1] + obj_size[k - 1]
    for i, unit in enumerate(units):
        unit_offsets[unit.index] = base[obj_of[i]] + rel[i]
    return sum(obj_size)


def _highest_per_object(hits: list[tuple[int, int]] | tuple[np.ndarray, np.ndarray], n_obj: int) -> list[int]:
    """Per shared object: the highest top of its allocations that overlap in time."""
    if not isinstance(hits, list):
        per_object = np.zeros(n_obj, dtype=np.int64)
        np.maximum.at(per_object, hits[0], hits[1])
        return per_object.tolist()
    highest = [0] * n_obj
    for obj, top in hits:
        if top > highest[obj]:
            highest[obj] = top
    return highest
