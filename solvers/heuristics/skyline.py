"""Skyline placement: the unit that can sit lowest goes next, at that offset.

Each free unit's lowest possible offset is the top of the highest placed unit
it lives with (aligned up, and moved past fixed units it would hit). The
unit with the lowest such offset is placed there, ties broken by a fixed
order of the units; its top then raises the offsets its neighbours can take.
This is the first dive of MiniMalloc's canonical search (and of the CP-SAT
skyline search in solvers.cpsat.driver), without backtracking. It fills time regions
bottom-up evenly, which best-fit's one-unit-at-a-time holes do not: on
generated layered programs the "lifetime" order lands within a few bytes of the
lower bound where best-fit is several percent above it. Several orders are
tried and the smallest arena kept.

Units that live over their pool's whole horizon meet every other unit; they
are not paired explicitly (that would be quadratic) but tracked per pool.
"""

from __future__ import annotations

import dataclasses
import heapq
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from memplan.arith import align_up
from memplan.errors import InfeasibleError
from memplan.peak_bound import lower_bounds
from memplan.plan import Outcome, Plan
from memplan.problem import Problem
from memplan.solvers.deadline import CHECK_EVERY, FALLBACK_SECONDS_PER_UNIT, FINISH_SECONDS_PER_UNIT, Deadline
from memplan.solvers.heuristics.bestfit import ORDERINGS, bestfit_plan
from memplan.solvers.heuristics.gc_pause import gc_paused
from memplan.solvers.heuristics.live_pairs import pairs_living_together
from memplan.solvers.heuristics.orderings import (
    Placement,
    best_of_orderings,
    check_names,
    in_order,
    with_arena,
)
from memplan.solvers.stages import stage
from memplan.solvers.units import Rect, Unit, units_of

ORDERS = ("lifetime", "area", "size", "start")
"""The tie-break orders skyline tries (keys in `orderings.SORT_KEYS`)."""


@dataclass(frozen=True)
class SkylineParams:
    orders: tuple[str, ...] = ORDERS  # the tie-break orders tried (names from ORDERS)

    def __post_init__(self) -> None:
        object.__setattr__(self, "orders", tuple(self.orders))
        check_names("skyline", self.orders, ORDERS)


@gc_paused()
def solve_skyline(
    problem: Problem, params: SkylineParams = SkylineParams(), *, time_limit_s: float | None = None
) -> Plan:
    """The skyline placement under each of `params.orders`; the smallest arena wins.

    Stops early at the lower bound; with `time_limit_s`, no new order starts
    once the time is up and an order still placing then stops. If the time runs
    out inside the first order, the plan is best-fit's first ordering (a few
    seconds at a million buffers), marked as cut by the time limit.
    """
    deadline = Deadline(time_limit_s)
    with stage("units"):
        units = units_of(problem)
    with stage("bounds"):
        bounds = lower_bounds(problem)
    plan = skyline_plan(problem, params.orders, deadline, units, bounds)
    if plan is not None:
        return plan
    with stage("fallback plan (best-fit)", whole=True):
        fallback = bestfit_plan(problem, units, ORDERINGS[:1], Deadline(None), bounds)
    return dataclasses.replace(
        fallback,
        solver="skyline",
        seconds=deadline.spent(),
        outcome=Outcome.TIME_LIMIT,
        status=f"time limit: the skyline's first order was cut at {time_limit_s:.3g} s; best-fit's plan"
        f" ({fallback.status})",
    )


def skyline_plan(
    problem: Problem,
    orders: Sequence[str],
    deadline: Deadline,
    units: list[Unit] | None = None,
    bounds: dict[int, int] | None = None,
) -> Plan | None:
    """The best skyline plan over `orders` placed before `deadline`; None if it passed inside the first.
    `units` and `bounds` are `problem`'s (`units_of`, `lower_bounds`) when the caller has them."""
    if units is None:
        with stage("units"):
            units = units_of(problem)
    finish = FINISH_SECONDS_PER_UNIT * len(units)
    fallback = FALLBACK_SECONDS_PER_UNIT * len(units)
    if deadline.passed(fallback + finish):  # no time for the first order: best-fit's plan, now
        return None
    with stage("neighbour graph"):
        graph = Skyline(units)

    def place(name: str, give_up_at: int | None) -> Placement | None:
        first = give_up_at is None  # cut, it leaves best-fit's plan to make: keep time for that
        reserve = finish + (fallback if first else 0.0)
        return _with_arena(units, graph.place(in_order(units, name), deadline, reserve))

    return best_of_orderings(
        problem,
        units,
        orders,
        place,
        solver="skyline",
        status="heuristic (skyline, {} order)",
        deadline=deadline,
        bounds=bounds,
    )


def _with_arena(units: Sequence[Unit], offsets: list[int] | None) -> Placement | None:
    return None if offsets is None else with_arena(units, offsets)


@dataclass(slots=True)
class _FloorHeap:
    """Ranks (in the order placed by) of the plain units of one pool and alignment that sit at the
    pool's floor: the top of its spanning units, aligned up."""

    pool: int
    alignment: int
    ranks: list[int] = field(default_factory=list)


@dataclass(slots=True)
class _Order:
    """The state of one order's placement (`Skyline.place`), per unit unless said otherwise.

    A plain unit (`plain_pool`) whose neighbours' top is at or below its pool's floor waits in a
    heap per pool and alignment (`_FloorHeap`): such units all sit at the floor, so a spanning unit
    raising it raises them all without touching one (one heap for every unit raised them one pop
    each: 3 million pops in one order at 100,000 buffers). The others wait in one heap keyed by the
    lowest offset known for them, checked when they come out on top. A key is
    `offset * len(units) + rank`, one int: offset first, ties in `order`.
    """

    offsets: list[int]
    lowest: list[int]  # below each unit's lowest offset or at it; a plain one's exact above its floor
    placed: list[bool]
    at_floor: list[bool]  # waiting in its floor heap
    pool_top: dict[int, int]  # highest placed byte per pool
    pool_floor: dict[int, int]  # top of the spanning units placed per pool
    rank: list[int]  # its place in the order
    by_rank: list[int]  # the unit of each rank
    heap: list[int]  # keys of the units waiting off their floor
    floor_heap_of: list[_FloorHeap | None]
    floor_heaps: list[_FloorHeap]


class Skyline:
    """Who lives with whom, built once and reused for every order."""

    def __init__(self, units: Sequence[Unit]) -> None:
        self.units = units
        horizon: dict[int, tuple[int, int]] = {}
        fixed_pools: set[int] = set()
        for u in units:
            for r in u.rects:
                lo, hi = horizon.get(r.pool, (r.start, r.end))
                horizon[r.pool] = (min(lo, r.start), max(hi, r.end))
                if u.fixed is not None:
                    fixed_pools.add(r.pool)
        # A free one-rectangle unit over its pool's whole horizon (in a pool without fixed units).
        self.spanning = [
            len(u.rects) == 1
            and u.fixed is None
            and u.rects[0].pool not in fixed_pools
            and (u.rects[0].start, u.rects[0].end) == horizon[u.rects[0].pool]
            for u in units
        ]
        # Unit i's neighbours are neighbour_unit[k] for k in range(neighbour_at[i], neighbour_at[i + 1]),
        # each with the bytes of i it must clear (neighbour_bytes[k]); obstacles[i]: (low, high, bytes
        # of i) of the fixed units i lives with.
        self.obstacles: list[list[tuple[int, int, int]]] = [[] for _ in units]
        self._link([(r, u) for u in units if not self.spanning[u.index] for r in u.rects if r.size])
        for obstacles in self.obstacles:
            obstacles.sort()
        # Per unit, its pool if its lowest offset is its neighbours' top raised to the pool's floor and
        # aligned, nothing more (one rectangle, free, not spanning, no fixed unit in its way); else None.
        self.alignment = [u.alignment for u in units]
        self.plain_pool: list[int | None] = [
            u.rects[0].pool
            if len(u.rects) == 1
            and u.fixed is None
            and not self.spanning[u.index]
            and not self.obstacles[u.index]
            else None
            for u in units
        ]

    def _link(self, rects: list[tuple[Rect, Unit]]) -> None:
        """Neighbours and obstacles from every pair of `rects` (all holding bytes) that live together
        in one pool: found with numpy (`pairs_living_together`), not pair by pair."""
        n = len(self.units)
        fixed = np.array([u.fixed is not None for u in self.units], dtype=bool)
        later, earlier = pairs_living_together(
            [r.pool for r, _ in rects], [r.start for r, _ in rects], [r.end for r, _ in rects]
        )
        unit = np.array([u.index for _, u in rects], dtype=np.int64)
        size = np.array([r.size for r, _ in rects], dtype=np.int64)
        i, j = unit[later], unit[earlier]
        apart = i != j
        free = apart & ~fixed[i] & ~fixed[j]
        src = np.concatenate((i[free], j[free]))
        dst = np.concatenate((j[free], i[free]))
        clear = np.concatenate((size[later][free], size[earlier][free]))
        by_unit = np.argsort(src, kind="stable")
        at = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(np.bincount(src, minlength=n), out=at[1:])
        self.neighbour_at: list[int] = at.tolist()
        self.neighbour_unit: list[int] = dst[by_unit].tolist()
        self.neighbour_bytes: list[int] = clear[by_unit].tolist()
        for k in np.flatnonzero(apart & ~free).tolist():  # a fixed unit: rare, in the sweep's order
            self._pair_fixed(rects[later[k]], rects[earlier[k]])

    def _pair_fixed(self, a: tuple[Rect, Unit], b: tuple[Rect, Unit]) -> None:
        """Two units living together, one of them fixed: an obstacle for the other, or (both fixed)
        `InfeasibleError` if they share bytes."""
        (ra, ui), (rb, uj) = a, b
        size_a, size_b, i, j = ra.size, rb.size, ui.index, uj.index
        if ui.fixed is not None and uj.fixed is not None:
            if ui.fixed < uj.fixed + size_b and uj.fixed < ui.fixed + size_a:
                raise InfeasibleError(
                    f"skyline: fixed buffers {list(ui.roots)} at {ui.fixed} and {list(uj.roots)} at"
                    f" {uj.fixed} share bytes while both live",
                    ui.roots + uj.roots,
                    proven=True,
                )
            return  # both pinned and apart: nothing to decide
        if uj.fixed is not None:
            self.obstacles[i].append((uj.fixed, uj.fixed + size_b, size_a))
        else:
            assert ui.fixed is not None, "one of the two is fixed"
            self.obstacles[j].append((ui.fixed, ui.fixed + size_a, size_b))

    def place(
        self, order: Sequence[Unit], deadline: Deadline | None = None, reserve: float = 0.0
    ) -> list[int] | None:
        """Unit offsets: fixed units where pinned, free ones lowest first, ties in `order` (how they
        wait: `_Order`); None when less than `reserve` seconds are left before `deadline` and some unit
        is not placed. One loop, its state in locals, `align_up` inline (`-(-x // step) * step`): a
        call per neighbour costs a tenth of the loop."""
        units, spanning, alignment = self.units, self.spanning, self.alignment
        neighbour_at, neighbour_unit, neighbour_bytes = (
            self.neighbour_at,
            self.neighbour_unit,
            self.neighbour_bytes,
        )
        n = len(units)
        start = self._start(order)
        offsets, lowest, placed, at_floor = start.offsets, start.lowest, start.placed, start.at_floor
        pool_top, pool_floor, rank, by_rank = start.pool_top, start.pool_floor, start.rank, start.by_rank
        heap, floor_heap_of, floor_heaps = start.heap, start.floor_heap_of, start.floor_heaps
        steps = 0
        while True:
            steps += 1
            if deadline is not None and steps % CHECK_EVERY == 0 and deadline.passed(reserve):
                return None
            best: _FloorHeap | None = None  # the floor heap whose first unit lies lowest (its key exact)
            best_key = 0
            for f in floor_heaps:
                ranks = f.ranks
                while ranks and (placed[by_rank[ranks[0]]] or not at_floor[by_rank[ranks[0]]]):
                    heapq.heappop(ranks)  # placed, or risen above the floor since it came in
                if ranks:
                    key = -(-pool_floor[f.pool] // f.alignment) * f.alignment * n + ranks[0]
                    if best is None or key < best_key:
                        best, best_key = f, key
            if heap and (best is None or heap[0] < best_key):
                key = heapq.heappop(heap)
                at, r = divmod(key, n)
                i = by_rank[r]
                if placed[i] or at_floor[i] or at != lowest[i]:
                    continue  # a stale entry
                floor_heap = floor_heap_of[i]
                if floor_heap is not None:  # plain: its lowest offset is `at` or its floor, aligned
                    step = floor_heap.alignment
                    floor = -(-pool_floor[floor_heap.pool] // step) * step
                    if at < floor:
                        lowest[i] = floor
                        at_floor[i] = True
                        heapq.heappush(floor_heap.ranks, r)
                        continue
                else:
                    need = self._lowest(i, at, pool_top, pool_floor)
                    if need != at:
                        lowest[i] = need
                        heapq.heappush(heap, need * n + r)
                        continue
            elif best is not None:
                at = best_key // n
                i = by_rank[heapq.heappop(best.ranks)]
            else:
                return offsets
            placed[i] = True
            offsets[i] = at
            for rect in units[i].rects:
                pool_top[rect.pool] = max(pool_top[rect.pool], at + rect.size)
                if spanning[i]:
                    pool_floor[rect.pool] = max(pool_floor[rect.pool], at + rect.size)
            first, last = neighbour_at[i], neighbour_at[i + 1]
            for j, size in zip(neighbour_unit[first:last], neighbour_bytes[first:last]):
                if not placed[j]:
                    step = alignment[j]
                    top = -(-(at + size) // step) * step
                    if top > lowest[j]:
                        lowest[j] = top
                        if at_floor[j]:  # plain: it leaves its floor only if `top` is above it
                            floor_heap = floor_heap_of[j]
                            assert floor_heap is not None, "only plain units wait at a floor"
                            if top <= -(-pool_floor[floor_heap.pool] // step) * step:
                                continue
                            at_floor[j] = False
                        heapq.heappush(heap, top * n + rank[j])

    def _start(self, order: Sequence[Unit]) -> _Order:
        """One order's placement before its first unit: fixed units placed, free ones waiting at 0."""
        units = self.units
        n = len(units)
        rank = [0] * n
        for r, u in enumerate(order):
            rank[u.index] = r
        heap, floor_heap_of, floor_heaps = self._waiting(rank)
        return _Order(
            offsets=[u.fixed if u.fixed is not None else 0 for u in units],
            lowest=[0] * n,
            placed=[u.fixed is not None for u in units],
            at_floor=[f is not None for f in floor_heap_of],  # every unit starts at 0, every floor too
            pool_top=defaultdict(int),
            pool_floor=defaultdict(int),
            rank=rank,
            by_rank=[u.index for u in order],
            heap=heap,
            floor_heap_of=floor_heap_of,
            floor_heaps=floor_heaps,
        )

    def _waiting(self, rank: list[int]) -> tuple[list[int], list[_FloorHeap | None], list[_FloorHeap]]:
        """Where `place` starts: every free unit at offset 0, plain ones (`plain_pool`) in a heap per
        pool and alignment, the others in the main heap; and each unit's floor heap (None: main)."""
        n = len(self.units)
        heap: list[int] = []
        by_key: dict[tuple[int, int], _FloorHeap] = {}
        floor_heap_of: list[_FloorHeap | None] = [None] * n
        for u in self.units:
            pool = self.plain_pool[u.index]
            if u.fixed is not None:
                continue
            if pool is None:
                heap.append(rank[u.index])  # key 0 * n + rank
                continue
            f = by_key.get((pool, u.alignment))
            if f is None:
                f = by_key[pool, u.alignment] = _FloorHeap(pool, u.alignment)
            floor_heap_of[u.index] = f
            f.ranks.append(rank[u.index])
        heapq.heapify(heap)
        for f in by_key.values():
            heapq.heapify(f.ranks)
        return heap, floor_heap_of, list(by_key.values())

    def _lowest(self, i: int, at: int, pool_top: dict[int, int], pool_floor: dict[int, int]) -> int:
        """The lowest aligned offset >= `at` clear of spanning units and fixed units."""
        u = self.units[i]
        for r in u.rects:
            at = max(at, pool_top[r.pool] if self.spanning[i] else pool_floor[r.pool])
        step = u.alignment
        at = align_up(at, step)
        moved = True
        while moved:
            moved = False
            for low, high, size in self.obstacles[i]:
                if at < high and low < at + size:
                    at = align_up(high, step)
                    moved = True
        return at
