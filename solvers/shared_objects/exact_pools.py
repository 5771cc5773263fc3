"""The shared-objects form of one pool, solved exactly by CP-SAT (small pools, no pins, no banks).

Which units share an object is a 0-1 choice. Units are sorted largest first
and an object is named by its largest unit, its representative: `x[i, k]`
puts unit i in the object of unit k (k no later than i, and i never living
with k), `x[k, k]` says k represents an object. Every unit is in one object,
an object holds no two units that live at the same moment (one at-most-one
per object and maximal set of units live together), and the arena is the
sum of the representatives' sizes: minimised. That sum is the arena only
when objects need no padding between them, so a proof (`optimal`) is given
only when every unit's size is a multiple of every alignment in the pool.
The search is single-worker with a deterministic-time budget, so the same
input gives the same plan unless the wall-clock cap stops it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from ortools.sat.python import cp_model

from memplan.arith import align_up

DETERMINISTIC_PER_SECOND = 0.05
"""CP-SAT deterministic time per wall-clock second of budget (the rate cpsat_reproducible uses)."""


@dataclass(frozen=True)
class PoolUnit:
    """A unit of the pool: its index, bytes, alignment and [start, end) spans."""

    index: int
    size: int
    alignment: int
    spans: tuple[tuple[int, int], ...]


@dataclass(frozen=True)
class ExactObjects:
    """The objects found (unit indices per object), the arena they make, and whether it is proven least."""

    objects: list[list[int]]
    arena: int
    optimal: bool
    capped: bool  # the wall-clock cap stopped the search: another run may find another packing


def solve_pool(
    units: Sequence[PoolUnit], hint: Sequence[Sequence[int]], seconds: float
) -> ExactObjects | None:
    """The best packing CP-SAT finds within `seconds` (from the packing `hint`), or None if it found none."""
    order = sorted(units, key=lambda u: (-u.size, u.index))
    position = {u.index: p for p, u in enumerate(order)}
    n = len(order)
    cliques = _live_together(order)
    apart = [[True] * n for _ in range(n)]
    for clique in cliques:
        for a in clique:
            for b in clique:
                apart[a][b] = a == b
    model = cp_model.CpModel()
    x = {(i, k): model.new_bool_var(f"x{i}_{k}") for i in range(n) for k in range(i + 1) if apart[i][k]}
    for i in range(n):
        model.add_exactly_one(x[i, k] for k in range(i + 1) if (i, k) in x)
        for k in range(i):
            if (i, k) in x:
                model.add_implication(x[i, k], x[k, k])
    for clique in cliques:
        for k in range(max(clique) + 1):
            members = [x[i, k] for i in clique if (i, k) in x]
            if len(members) > 1:
                model.add_at_most_one(members)
    model.minimize(sum(order[k].size * x[k, k] for k in range(n)))
    for group in hint:
        rep = min(position[i] for i in group)
        for i in group:
            if (position[i], rep) in x:
                model.add_hint(x[position[i], rep], 1)
    solver = cp_model.CpSolver()
    solver.parameters.num_workers = 1
    solver.parameters.random_seed = 0
    solver.parameters.max_deterministic_time = max(seconds * DETERMINISTIC_PER_SECOND, 0.001)
    solver.parameters.max_time_in_seconds = max(seconds, 0.01)
    status = solver.solve(model)
    if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return None
    groups: dict[int, list[int]] = {}
    for (i, k), var in x.items():
        if solver.value(var):
            groups.setdefault(k, []).append(order[i].index)
    objects = list(groups.values())
    by_index = {u.index: u for u in units}
    arena = lay_out_objects([[by_index[i] for i in obj] for obj in objects])[1]
    padding_free = all(u.size % math.lcm(*(v.alignment for v in units)) == 0 for u in units)
    capped = status != cp_model.OPTIMAL and solver.wall_time >= solver.parameters.max_time_in_seconds * 0.99
    return ExactObjects(objects, arena, status == cp_model.OPTIMAL and padding_free, capped)


def lay_out_objects(objects: Sequence[Sequence[PoolUnit]]) -> tuple[list[int], int]:
    """Each object's offset side by side from 0, most aligned and largest first; and the arena."""
    shapes = [
        (math.lcm(*(u.alignment for u in obj)), max(u.size for u in obj), n) for n, obj in enumerate(objects)
    ]
    offsets = [0] * len(objects)
    top = 0
    for alignment, size, n in sorted(shapes, key=lambda s: (-s[0], -s[1], s[2])):
        offsets[n] = align_up(top, alignment)
        top = offsets[n] + size
    return offsets, top


def _live_together(order: Sequence[PoolUnit]) -> list[list[int]]:
    """The maximal sets of positions whose units live at one moment (one per start time where the set grows)."""
    events = sorted({start for u in order for start, _ in u.spans})
    found: list[list[int]] = []
    previous: set[int] = set()
    for t in events:
        live = {p for p, u in enumerate(order) if any(s <= t < e for s, e in u.spans)}
        if len(live) > 1 and not live <= previous:
            found.append(sorted(live))
        previous = live
    return found
