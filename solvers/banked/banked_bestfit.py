"""Bank choice by traffic, then best-fit packing per bank: beats ExecuTorch's `BankedGreedy`.

`BankedGreedy` offers buffers largest first to the fastest bank, so the fast
bank fills with whatever is big, not with what the program touches most, and
its shared-object packing wastes room that best-fit would use. Here:

1. Banks are filled in preference order (fastest first). For each bank, the
   buffers that may still go elsewhere are taken in priority order and
   accepted while the bank's live bytes stay within its capacity at every
   step (a necessary condition); buffers with no later bank must go here.
2. The bank's buffers are packed by best-fit (`bestfit`, all its orderings).
   While the packing is over capacity, the lowest-priority accepted buffer
   that lives with a buffer above the capacity line is sent on to the next
   bank and the bank is packed again.
3. Several priorities are tried: traffic per byte (accesses), traffic per
   byte-step (traffic over size x lifetime), and largest area first (which
   packs the most into the fast bank when fitting at all is the problem).
   ExecuTorch's own placement (`banked_greedy`) is a candidate too, so this
   never does worse than it. Among the plans that fit every bank, the one
   with the least traffic cost wins (then the smallest arena).

Nothing fits: `BankCapacityError` naming the bank and the missing bytes of the
attempt that came closest.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from memplan.arith import align_up
from memplan.bank_placement import bank_part, place_in_banks, traffic_cost
from memplan.errors import BankCapacityError, InfeasibleError, UnsupportedProblemError
from memplan.peak_bound import lower_bound, lower_bounds
from memplan.plan import Plan
from memplan.problem import Bank, Problem
from memplan.solvers.banked.banked_greedy import solve_banked_greedy
from memplan.solvers.heuristics.bestfit import BestfitParams, solve_bestfit
from memplan.solvers.units import Rect, Unit, units_of


@dataclasses.dataclass(frozen=True)
class _Candidate:
    """What a priority needs to know about one unit with a bank choice."""

    unit: Unit
    traffic: int  # bytes accessed by the unit's buffers
    choices: tuple[int, ...]


# name -> priority (larger goes to the faster bank first)
PRIORITIES: dict[str, Callable[[_Candidate], tuple]] = {
    "traffic_per_byte": lambda c: (c.traffic / max(1, c.unit.size), -c.unit.area, -c.unit.index),
    "traffic_per_area": lambda c: (c.traffic / max(1, c.unit.area), c.traffic, -c.unit.index),
    "area": lambda c: (c.unit.area, c.unit.size, -c.unit.index),
}


# Best-fit orderings tried while repairing a bank's choice (the final packing tries all of them).
REPAIR_ORDERINGS = ("size", "area")


@dataclass(frozen=True)
class BankedBestfitParams:
    priorities: tuple[str, ...] = tuple(PRIORITIES)  # the orders buffers claim the fast banks in (PRIORITIES)


def solve_banked_bestfit(
    problem: Problem,
    params: BankedBestfitParams = BankedBestfitParams(),
    *,
    time_limit_s: float | None = None,
) -> Plan:
    """The least-traffic plan that fits every bank, over `priorities` and ExecuTorch's placement."""
    began = time.perf_counter()
    if not problem.banks:
        raise UnsupportedProblemError(
            "banked_bestfit plans across banks, but the problem declares none; use bestfit"
        )
    priorities = params.priorities
    unknown = [p for p in priorities if p not in PRIORITIES]
    if unknown or not priorities:
        raise UnsupportedProblemError(
            f"banked_bestfit: unknown priorities {unknown}; choose from {list(PRIORITIES)}"
        )
    original, (problem, pinned) = problem, _pin_fixed(problem)
    candidates, horizon = _candidates(problem)
    attempts: list[tuple[str, Plan | None, BankCapacityError | None]] = []
    for name in priorities:
        if attempts and time_limit_s is not None and time.perf_counter() - began > time_limit_s:
            break
        pools = _assign(problem, candidates, horizon, PRIORITIES[name])
        attempts.append((name, *_packed(problem, pools, f"heuristic (priority: {name})")))
    if not any(plan for _, plan, _ in attempts):
        pools = _sliced(problem, candidates)
        attempts.append(("slice", *_packed(problem, pools, "heuristic (slices of one best-fit arena)")))
    try:
        attempts.append(("banked_greedy", solve_banked_greedy(problem), None))
    except (InfeasibleError, UnsupportedProblemError):
        pass
    fitting = [plan for _, plan, _ in attempts if plan is not None]
    if not fitting:
        errors = [e for _, _, e in attempts if e is not None]
        closest = min(errors, key=lambda e: e.missing)
        raise closest
    best = min(fitting, key=lambda p: (traffic_cost(problem, p.pools), p.arena_size))
    pools = {**best.pools, **{b: pinned[original.root_of(b)[0]] for b in _choosing(original, pinned)}}
    return dataclasses.replace(
        best, solver="banked_bestfit", seconds=time.perf_counter() - began, pools=pools
    )


def _pin_fixed(problem: Problem) -> tuple[Problem, dict[str, int]]:
    """The problem with every fixed unit that has a bank choice pinned to a bank, and the roots pinned.

    Each goes to the first of its banks (in preference order) whose alignment its offset keeps,
    under whose capacity it ends and where it meets no fixed unit already there; then the rest of
    the algorithm sees an ordinary pin. When no bank takes it, its first bank with its alignment.
    """
    units = [u for u in units_of(problem) if u.fixed is not None and problem.buffer(u.roots[0]).banks]
    if not units:
        return problem, {}
    there: dict[int, list[tuple[Unit, int]]] = {}  # pool -> fixed units there, with their heights
    for u in units_of(problem):
        if u.fixed is not None and not problem.buffer(u.roots[0]).banks:
            bank = problem.bank(u.rects[0].pool)
            height = max(
                _size_in(problem.buffer(r).size, problem.buffer(r).alignment, bank)
                if bank
                else problem.buffer(r).size
                for r in u.roots
            )
            there.setdefault(u.rects[0].pool, []).append((u, height))
    pinned: dict[str, int] = {}
    for u in units:
        options = []
        for rank, bank in enumerate(b for b in problem.banks if b.pool in problem.buffer(u.roots[0]).banks):
            alignment = math.lcm(u.alignment, bank.alignment, *(problem.buffer(r).alignment for r in u.roots))
            height = max(_size_in(problem.buffer(r).size, problem.buffer(r).alignment, bank) for r in u.roots)
            if u.fixed is not None and u.fixed % alignment == 0:
                clear = u.fixed + height <= bank.capacity and not any(
                    _fixed_clash(u, height, v, h) for v, h in there.get(bank.pool, [])
                )
                options.append((not clear, rank, bank.pool, height))
        _, _, pool, height = min(options) if options else (0, 0, problem.buffer(u.roots[0]).pool, u.size)
        there.setdefault(pool, []).append((u, height))
        pinned.update({r: pool for r in u.roots})
    buffers = tuple(
        dataclasses.replace(b, pool=pinned[root], banks=())
        if (root := problem.root_of(b.id)[0]) in pinned
        else b
        for b in problem.buffers
    )
    return dataclasses.replace(problem, buffers=buffers), pinned


def _fixed_clash(u: Unit, height: int, v: Unit, v_height: int) -> bool:
    """True if fixed units u and v (of these heights) share bytes while both live."""
    assert u.fixed is not None and v.fixed is not None
    live = any(a.start < b.end and b.start < a.end for a in u.rects for b in v.rects)
    return live and u.fixed < v.fixed + v_height and v.fixed < u.fixed + height


def _choosing(problem: Problem, pinned: dict[str, int]) -> list[str]:
    """The buffers with a bank choice whose root `_pin_fixed` pinned."""
    return [b.id for b in problem.buffers if b.banks and problem.root_of(b.id)[0] in pinned]


def _candidates(problem: Problem) -> tuple[list[_Candidate], int]:
    units = units_of(problem)
    unit_of = {root: u for u in units for root in u.roots}
    moved: dict[int, int] = {}
    for buf in problem.buffers:
        unit = unit_of[problem.root_of(buf.id)[0]]
        moved[unit.index] = moved.get(unit.index, 0) + buf.size * buf.accesses
    out = [
        _Candidate(u, moved.get(u.index, 0), problem.buffer(u.roots[0]).choices)
        for u in units
        if u.fixed is None and problem.buffer(u.roots[0]).banks
    ]
    horizon = max((b.end for b in problem.buffers), default=0)
    return out, horizon


def _size_in(unit_size: int, alignment: int, bank: Bank) -> int:
    return align_up(unit_size, math.lcm(alignment, bank.alignment))


def _assign(
    problem: Problem, candidates: list[_Candidate], horizon: int, priority: Callable[[_Candidate], tuple]
) -> dict[str, int]:
    """A bank for every unit with a choice: fill banks in preference order by `priority`."""
    pools: dict[str, int] = {}
    left = sorted(candidates, key=priority, reverse=True)
    for k, bank in enumerate(problem.banks):
        later = {b.pool for b in problem.banks[k + 1 :]}
        here = [c for c in left if bank.pool in c.choices]
        if not here:
            continue
        forced = [c for c in here if not later & set(c.choices)]
        optional = [c for c in here if later & set(c.choices)]
        chosen = _fill(problem, bank, forced, optional, horizon, pools)
        for c in chosen:
            for root in c.unit.roots:
                pools[root] = bank.pool
        taken = {c.unit.index for c in chosen}
        left = [c for c in left if c.unit.index not in taken]
    _balance(problem, candidates, horizon, pools)
    return pools


def _balance(problem: Problem, candidates: list[_Candidate], horizon: int, pools: dict[str, int]) -> None:
    """Move units out of a bank whose live bytes exceed its capacity, into banks with room then.

    Filling fast banks first can leave a slow bank over capacity at moments
    when a faster one has room (a big buffer crossed the line); this moves the
    largest unit live at the worst moment to a bank that can hold it over its
    whole lifetime, until every bank's live bytes fit or nothing can move.
    """
    banks = {b.pool: b for b in problem.banks}
    live = {pool: np.zeros(horizon + 1, dtype=np.int64) for pool in banks}
    for buf in problem.roots():
        if not buf.banks and buf.pool in banks:
            live[buf.pool][buf.start : buf.end] += _size_in(buf.size, buf.alignment, banks[buf.pool])
    where = {c.unit.index: pools[c.unit.roots[0]] for c in candidates}

    def shift(c: _Candidate, pool: int, sign: int) -> None:
        for r in c.unit.rects:
            live[pool][r.start : r.end] += sign * _size_in(r.size, c.unit.alignment, banks[pool])

    def room(c: _Candidate, pool: int) -> bool:
        return all(
            live[pool][r.start : r.end].max() + _size_in(r.size, c.unit.alignment, banks[pool])
            <= banks[pool].capacity
            for r in c.unit.rects
        )

    for c in candidates:
        shift(c, where[c.unit.index], 1)
    for _ in range(4 * len(candidates)):
        over = [(live[p].max() - banks[p].capacity, p) for p in banks]
        excess, pool = max(over)
        if excess <= 0:
            return
        t = int(live[pool].argmax())
        movers = sorted(
            (
                c
                for c in candidates
                if where[c.unit.index] == pool and any(r.start <= t < r.end for r in c.unit.rects)
            ),
            key=lambda c: -c.unit.size,
        )
        move = next(((c, q) for c in movers for q in c.choices if q != pool and room(c, q)), None)
        if move is None:
            return
        c, q = move
        shift(c, pool, -1)
        shift(c, q, 1)
        where[c.unit.index] = q
        for root in c.unit.roots:
            pools[root] = q


def _fill(
    problem: Problem,
    bank: Bank,
    forced: list[_Candidate],
    optional: list[_Candidate],
    horizon: int,
    pools: dict[str, int],
) -> list[_Candidate]:
    """`forced` plus the optional units (in priority order) that the bank can hold, packed by best-fit."""
    live = np.zeros(horizon + 1, dtype=np.int64)
    for buf in problem.roots():  # what is already pinned here
        if not buf.banks and buf.pool == bank.pool:
            live[buf.start : buf.end] += _size_in(buf.size, buf.alignment, bank)

    def add(c: _Candidate) -> None:
        for r in c.unit.rects:
            live[r.start : r.end] += _size_in(r.size, c.unit.alignment, bank)

    for c in forced:
        add(c)
    accepted: list[_Candidate] = []
    for c in optional:
        if all(
            live[r.start : r.end].max() + _size_in(r.size, c.unit.alignment, bank) <= bank.capacity
            for r in c.unit.rects
        ):
            add(c)
            accepted.append(c)
    while accepted:
        trial = {**pools, **{root: bank.pool for c in forced + accepted for root in c.unit.roots}}
        over = _over_capacity(problem, trial, bank)
        if over is None:
            break
        # The lowest-priority accepted units living with what is above the line go on, one per
        # buffer above it (one at a time would re-pack the bank once per unit).
        living = [
            i for i in range(len(accepted)) if any(_lives_with(r, over) for r in accepted[i].unit.rects)
        ]
        victims = set(living[-len(over) :] or [len(accepted) - 1])
        accepted = [c for i, c in enumerate(accepted) if i not in victims]
    return forced + accepted


def _sliced(problem: Problem, candidates: list[_Candidate]) -> dict[str, int]:
    """Banks by cutting one best-fit arena of all free units into bank-sized horizontal slices.

    When fitting at all is the hard part: a unit lying wholly inside the k-th
    slice goes to bank k, a unit crossing a cut to the next bank (each unit to
    one of its own banks; a slice is its bank's capacity minus its pins' peak).
    """
    roots = {root for c in candidates for root in c.unit.roots}
    single = dataclasses.replace(
        problem,
        buffers=tuple(
            dataclasses.replace(b, pool=0, banks=())
            for b in problem.buffers
            if problem.root_of(b.id)[0] in roots
        ),
        groups=tuple(g for g in problem.groups if g.parent in roots or problem.root_of(g.parent)[0] in roots),
        same_offsets=tuple(s for s in problem.same_offsets if s.buffers[0] in roots),
        banks=(),
        capacity=None,
    )
    offsets = solve_bestfit(single).offsets
    pinned = dataclasses.replace(
        problem,
        buffers=tuple(b for b in problem.roots() if not b.banks),
        groups=(),
        same_offsets=(),
    )
    pin_peak = lower_bounds(place_in_banks(pinned, {})) if pinned.buffers else {}
    cuts, top = [], 0
    for bank in problem.banks:
        top += max(0, bank.capacity - pin_peak.get(bank.pool, 0))
        cuts.append((top, bank.pool))
    pools: dict[str, int] = {}
    for c in candidates:
        low = min(offsets[r] for r in c.unit.roots)
        high = max(offsets[r] + problem.buffer(r).size for r in c.unit.roots)
        fits = [pool for cut, pool in cuts if pool in c.choices and high <= cut]
        after = [pool for cut, pool in cuts if pool in c.choices and low < cut]
        pool = (fits or after or [c.choices[-1]])[0]
        for root in c.unit.roots:
            pools[root] = pool
    return pools


def _lives_with(rect: Rect, spans: list[tuple[int, int]]) -> bool:
    return any(rect.start < end and start < rect.end for start, end in spans)


def _over_capacity(problem: Problem, pools: dict[str, int], bank: Bank) -> list[tuple[int, int]] | None:
    """Lifetimes of the buffers best-fit puts above the bank's capacity (None if it fits)."""
    sub = _bank_problem(problem, pools, bank.pool)
    if sub is None:
        return None
    try:
        plan = solve_bestfit(sub, BestfitParams(orderings=REPAIR_ORDERINGS))
    except InfeasibleError:  # pins that collide: no repair helps, `_packed` reports it
        return None
    if plan.arena_size <= bank.capacity:
        return None
    return [(b.start, b.end) for b in sub.buffers if plan.offsets[b.id] + b.size > bank.capacity]


def _bank_problem(problem: Problem, pools: dict[str, int], pool: int) -> Problem | None:
    """The buffers pinned to `pool` or assigned to it by `pools` (no others), banks resolved."""
    placed = place_in_banks(problem, pools)
    keep = set()
    for buf in problem.buffers:
        root = problem.buffer(problem.root_of(buf.id)[0])
        if pools.get(root.id, None if root.banks else root.pool) == pool:
            keep.add(buf.id)
    if not keep:
        return None
    return bank_part(placed, keep)


def _packed(
    problem: Problem, pools: dict[str, int], status: str
) -> tuple[Plan | None, BankCapacityError | None]:
    """Best-fit per pool under `pools`: the plan if every bank fits, else the error of the worst bank."""
    placed = place_in_banks(problem, pools)
    offsets: dict[str, int] = {}
    arena_sizes: dict[int, int] = {bank.pool: 0 for bank in problem.banks}
    for pool in placed.pools:
        sub = _bank_problem(problem, pools, pool)
        if sub is None:  # no buffer in this pool
            continue
        try:
            plan = solve_bestfit(sub)
        except InfeasibleError as e:  # fixed buffers this choice put together collide
            bank_name = bank.name if (bank := problem.bank(pool)) else f"mem_id {pool}"
            return None, BankCapacityError(f"banked_bestfit: in {bank_name!r}: {e}", bank_name, 0)
        offsets.update(plan.offsets)
        arena_sizes[pool] = plan.arena_sizes.get(pool, 0)
    worst = max(
        ((arena_sizes.get(b.pool, 0) - b.capacity, b) for b in problem.banks),
        key=lambda t: t[0],
    )
    chosen = {b.id: pools.get(problem.root_of(b.id)[0], b.pool) for b in problem.buffers if b.banks}
    if worst[0] > 0:
        missing, bank = worst
        return None, BankCapacityError(
            f"banked_bestfit: bank {bank.name!r} (pool {bank.pool}) would need"
            f" {arena_sizes[bank.pool]} bytes but holds {bank.capacity}: {missing} bytes missing"
            f" (single-arena lower bound of the program: {lower_bound(problem)} bytes)",
            bank.name,
            missing,
        )
    plan = Plan(
        offsets=offsets,
        arena_sizes=arena_sizes,
        solver="banked_bestfit",
        lower_bound=lower_bound(placed),
        status=status,
        pools=chosen,
    )
    return plan, None
