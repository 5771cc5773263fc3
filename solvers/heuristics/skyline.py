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
from dataclasses import dataclass

import memplan.timeline as timeline
from memplan.arith import align_up
from memplan.errors import InfeasibleError
from memplan.plan import Outcome, Plan
from memplan.problem import Problem
from memplan.solvers.deadline import CHECK_EVERY, Deadline
from memplan.solvers.heuristics.bestfit import BestfitParams, solve_bestfit
from memplan.solvers.heuristics.orderings import (
    Placement,
    best_of_orderings,
    check_names,
    in_order,
    with_arena,
)
from memplan.solvers.units import Unit, units_of

ORDERS = ("lifetime", "area", "size", "start")
"""The tie-break orders skyline tries (keys in `orderings.SORT_KEYS`)."""


@dataclass(frozen=True)
class SkylineParams:
    orders: tuple[str, ...] = ORDERS  # the tie-break orders tried (names from ORDERS)

    def __post_init__(self) -> None:
        object.__setattr__(self, "orders", tuple(self.orders))
        check_names("skyline", self.orders, ORDERS)


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
    plan = skyline_plan(problem, params.orders, deadline)
    if plan is not None:
        return plan
    fallback = solve_bestfit(problem, BestfitParams(orderings=BestfitParams().orderings[:1]))
    return dataclasses.replace(
        fallback,
        solver="skyline",
        seconds=deadline.spent(),
        outcome=Outcome.TIME_LIMIT,
        status=f"time limit: the skyline's first order was cut at {time_limit_s:g} s; best-fit's plan"
        f" ({fallback.status})",
    )


def skyline_plan(problem: Problem, orders: Sequence[str], deadline: Deadline) -> Plan | None:
    """The best skyline plan over `orders` placed before `deadline`; None if it passed inside the first."""
    units = units_of(problem)
    graph = Skyline(units)
    return best_of_orderings(
        problem,
        units,
        orders,
        lambda name, _give_up_at: _with_arena(units, graph.place(in_order(units, name), deadline)),
        solver="skyline",
        status="heuristic (skyline, {} order)",
        deadline=deadline,
    )


def _with_arena(units: Sequence[Unit], offsets: list[int] | None) -> Placement | None:
    return None if offsets is None else with_arena(units, offsets)


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
        # neighbours[i]: (j, bytes of i that j must clear); obstacles[i]: (low, high, bytes of i) of fixed units.
        self.neighbours: list[list[tuple[int, int]]] = [[] for _ in units]
        self.obstacles: list[list[tuple[int, int, int]]] = [[] for _ in units]
        by_pool: dict[int, list[tuple[int, int, int, int]]] = defaultdict(list)
        for u in units:
            if not self.spanning[u.index]:
                for r in u.rects:
                    by_pool[r.pool].append((r.start, r.end, r.size, u.index))
        for rects in by_pool.values():
            live: set[int] = set()
            for _, is_start, k in timeline.events((s, e) for s, e, _, _ in rects):
                if not is_start:
                    live.discard(k)
                    continue
                for other in live:
                    self._pair(rects[k], rects[other])
                live.add(k)
        for obstacles in self.obstacles:
            obstacles.sort()

    def _pair(self, a: tuple[int, int, int, int], b: tuple[int, int, int, int]) -> None:
        (_, _, size_a, i), (_, _, size_b, j) = a, b
        if i == j:
            return
        ui, uj = self.units[i], self.units[j]
        if not size_a or not size_b:  # one holds no bytes: nothing to keep apart
            return
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
        elif ui.fixed is not None:
            self.obstacles[j].append((ui.fixed, ui.fixed + size_a, size_b))
        else:
            self.neighbours[i].append((j, size_a))
            self.neighbours[j].append((i, size_b))

    def place(self, order: Sequence[Unit], deadline: Deadline | None = None) -> list[int] | None:
        """Unit offsets: fixed units where pinned, free ones lowest first, ties in `order`; None when
        `deadline` passes before every unit is placed."""
        units, neighbours, spanning = self.units, self.neighbours, self.spanning
        offsets = [u.fixed if u.fixed is not None else 0 for u in units]
        lowest = [0] * len(units)
        placed = [u.fixed is not None for u in units]
        pool_top: dict[int, int] = defaultdict(int)  # highest placed byte per pool
        pool_floor: dict[int, int] = defaultdict(int)  # top of the spanning units placed per pool
        rank = {u.index: r for r, u in enumerate(order)}
        heap = [(0, rank[u.index], u.index) for u in units if u.fixed is None]
        heapq.heapify(heap)
        popped = 0
        while heap:
            popped += 1
            if deadline is not None and popped % CHECK_EVERY == 0 and deadline.passed():
                return None
            at, r, i = heapq.heappop(heap)
            if placed[i] or at != lowest[i]:
                continue  # a stale entry
            need = self._lowest(i, at, pool_top, pool_floor)
            if need != at:
                lowest[i] = need
                heapq.heappush(heap, (need, r, i))
                continue
            placed[i] = True
            offsets[i] = at
            for rect in units[i].rects:
                pool_top[rect.pool] = max(pool_top[rect.pool], at + rect.size)
                if spanning[i]:
                    pool_floor[rect.pool] = max(pool_floor[rect.pool], at + rect.size)
            for j, size in neighbours[i]:
                if not placed[j]:
                    step = units[j].alignment
                    top = align_up(at + size, step)
                    if top > lowest[j]:
                        lowest[j] = top
                        heapq.heappush(heap, (top, rank[j], j))
        return offsets

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
