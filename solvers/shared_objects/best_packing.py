"""The shared-objects form, planned as the best of several packings (`Problem.shared_objects`).

ExecuTorch's `greedy(allow_overlapping_allocations=False)` and
`BankedGreedy(target, allow_overlapping_allocations=False)` (what Vulkan
uses, reading `mem_obj_id` as one allocation) put every tensor at offset 0 of
a shared object, first-fit, largest first. This solver packs the same units
into objects under several orders and two choice rules (`object_packing`),
then tries to empty small objects into others and, under a memory map, to
move the most accessed bytes into faster banks; like XLA's "best of several"
it keeps the best packing: the least bank traffic cost, then the fewest
bytes. ExecuTorch's own plan (memplan's byte-exact replicas of both
algorithms) is one of the candidates, so the result is never worse than it.

Pinned units open pinned objects; group members stay inside their root, as
ExecuTorch's aliases do; a same-offset set is one unit, so it must lie in one
pool. A plan is proven optimal only when it reaches the lower bound of the
ordinary problem (no plan of any form is smaller).
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from memplan.arith import align_up
from memplan.bank_placement import place_in_banks, traffic_cost
from memplan.errors import BankCapacityError, InfeasibleError, SolverOptionError, UnsupportedProblemError
from memplan.peak_bound import lower_bounds
from memplan.plan import Outcome, Plan, arena_sizes_of
from memplan.problem import Problem
from memplan.solvers.shared_objects.exact_pools import PoolUnit, lay_out_objects, solve_pool
from memplan.solvers.shared_objects.object_packing import Item, Packer
from memplan.solvers.units import Unit, expand, units_of
from memplan.validate import validate

ORDERS: dict[str, Callable[[Item, int], tuple]] = {
    # ExecuTorch's: largest first, equal sizes in reverse insertion order (its bisect.insort, reversed).
    "size": lambda i, n: (-i.size_in[i.choices[0]], -n),
    "start": lambda i, n: (min(s for s, _ in i.spans), -i.size_in[i.choices[0]], n),
    "lifetime": lambda i, n: (-sum(e - s for s, e in i.spans), -i.size_in[i.choices[0]], n),
    "area": lambda i, n: (-sum(e - s for s, e in i.spans) * i.size_in[i.choices[0]], n),
    "density": lambda i, n: (-i.traffic / max(1, i.size_in[i.choices[0]]), -i.size_in[i.choices[0]], n),
}
RULES = ("first", "tightest")
EXACT_UNITS = 120
"""Pools up to this many units are also solved by CP-SAT (shared_objects_exact): the model has a
variable per pair of units, and 120 units solve in well under a second on the zoo's pools."""
EXACT_SECONDS = 2.0


@dataclass(frozen=True)
class SharedObjectsParams:
    """The packings tried: every order with every rule, each also improved; plus ExecuTorch's own plan."""

    orders: tuple[str, ...] = tuple(ORDERS)
    rules: tuple[str, ...] = RULES
    improve: bool = True  # also try each packing with objects emptied and items moved to faster banks
    executorch: bool = True  # ExecuTorch's greedy / BankedGreedy plan is a candidate
    exact_units: int = EXACT_UNITS  # CP-SAT on pools of at most this many units (0: never)
    exact_seconds: float = EXACT_SECONDS  # its budget, within the time limit

    def __post_init__(self) -> None:
        for name, given, known in (("orders", self.orders, ORDERS), ("rules", self.rules, RULES)):
            object.__setattr__(self, name, tuple(given))
            unknown = [x for x in given if x not in known]
            if unknown or not given:
                raise SolverOptionError(
                    f"shared_objects: unknown {name} {unknown}; choose from {list(known)}"
                )


def solve_shared_objects(
    problem: Problem,
    params: SharedObjectsParams = SharedObjectsParams(),
    *,
    time_limit_s: float | None = None,
) -> Plan:
    """A plan in the shared-objects form: the best candidate packing (no new one starts after the time limit)."""
    began = time.perf_counter()
    objects_problem = dataclasses.replace(problem, shared_objects=True)
    units = units_of(problem)
    items = _items(problem, units)
    candidates: list[Plan] = []
    if params.executorch:
        candidates += _executorch(objects_problem)
    failure: InfeasibleError | None = None
    for order in params.orders:
        for rule in params.rules:
            if candidates and time_limit_s is not None and time.perf_counter() - began > time_limit_s:
                break
            try:
                candidates += _packings(problem, units, items, order, rule, params.improve)
            except BankCapacityError as e:
                failure = failure or e
    if not candidates:
        raise failure or InfeasibleError("shared_objects: no packing found")
    best = min(candidates, key=lambda p: _cost(problem, p))
    bounds = lower_bounds(place_in_banks(problem, best.pools))
    proven = not problem.banks and all(best.arena_sizes.get(p, 0) <= need for p, need in bounds.items())
    status = "at the lower bound" if proven else "heuristic"
    if not proven and _exact_fits(problem, units, params):
        left = params.exact_seconds
        if time_limit_s is not None:
            left = min(left, max(time_limit_s - (time.perf_counter() - began), 0.0))
        if left > 0:
            best, proven, status = _exactly(problem, units, items, best, left)
    return dataclasses.replace(
        best,
        solver="shared_objects",
        seconds=time.perf_counter() - began,
        outcome=Outcome.OPTIMAL if proven else Outcome.HEURISTIC,
        lower_bound=sum(bounds.values()),
        status=status,
    )


def _exact_fits(problem: Problem, units: Sequence[Unit], params: SharedObjectsParams) -> bool:
    """CP-SAT's model covers this problem: no banks, no pins, every pool small enough."""
    if problem.banks or any(u.fixed is not None for u in units) or params.exact_units <= 0:
        return False
    per_pool: dict[int, int] = {}
    for u in units:
        per_pool[u.rects[0].pool] = per_pool.get(u.rects[0].pool, 0) + 1
    return max(per_pool.values(), default=0) <= params.exact_units


def _exactly(
    problem: Problem, units: Sequence[Unit], items: Sequence[Item], best: Plan, seconds: float
) -> tuple[Plan, bool, str]:
    """`best` or CP-SAT's packing, pool by pool, whichever is smaller; proven when every pool is and the
    problem asks for shared objects (a proof about objects says nothing about other plans)."""
    offsets: dict[int, int] = {}
    proofs = []
    capped = False
    per_pool: dict[int, list[PoolUnit]] = {}
    for item in items:
        if item.spans:
            pool = item.choices[0]
            per_pool.setdefault(pool, []).append(
                PoolUnit(item.index, item.size_in[pool], item.align_in[pool], item.spans)
            )
    for pool, pool_units in per_pool.items():
        hint: dict[int, list[int]] = {}
        for u in pool_units:
            hint.setdefault(best.offsets[units[u.index].roots[0]], []).append(u.index)
        found = solve_pool(pool_units, list(hint.values()), seconds / len(per_pool))
        capped = capped or (found is not None and found.capped)
        have = best.arena_sizes.get(pool, 0)
        if found is None or found.arena > have:
            proofs.append(False)
            for at, group in hint.items():
                offsets.update({i: at for i in group})
            continue
        proofs.append(found.optimal)
        by_index = {u.index: u for u in pool_units}
        bases, _ = lay_out_objects([[by_index[i] for i in obj] for obj in found.objects])
        for base, obj in zip(bases, found.objects):
            offsets.update({i: base for i in obj})
    unit_offsets = [offsets.get(i.index, 0) for i in items]
    all_offsets = expand(problem, units, unit_offsets)
    plan = Plan(
        offsets=all_offsets, arena_sizes=arena_sizes_of(problem, all_offsets), solver="shared_objects"
    )
    if plan.arena_size > best.arena_size:
        plan = best
    proven = problem.shared_objects and all(proofs)
    if all(proofs):
        status = "optimal among shared-objects plans (CP-SAT)"
        if not proven:
            status += "; not proven for this problem, which does not ask for shared objects"
    else:
        status = "CP-SAT stopped without a proof"
    if capped:
        status += " (stopped by the wall clock: not reproducible)"
    return plan, proven, status


def _cost(problem: Problem, plan: Plan) -> tuple[float, int]:
    return (traffic_cost(problem, plan.pools) if problem.banks else 0.0), plan.arena_size


def _items(problem: Problem, units: Sequence[Unit]) -> list[Item]:
    """Each unit's pools, bytes and alignment there (a bank tightens both, as `place_in_banks` does)."""
    root_unit = {root: u.index for u in units for root in u.roots}
    traffic = [0] * len(units)
    for buf in problem.buffers:
        traffic[root_unit[problem.root_of(buf.id)[0]]] += buf.size * buf.accesses
    items = []
    for unit in units:
        pools = {r.pool for r in unit.rects}
        if len(pools) > 1:
            raise UnsupportedProblemError(
                f"shared_objects: same-offset set {list(unit.roots)} spans pools {sorted(pools)}; a shared"
                " object lies in one pool",
                "same_offsets",
            )
        choices = problem.buffer(unit.roots[0]).choices
        align_in, size_in = {}, {}
        for pool in choices:
            bank = problem.bank(pool)
            align_in[pool] = unit.alignment if bank is None else math.lcm(unit.alignment, bank.alignment)
            size_in[pool] = unit.size if bank is None else align_up(unit.size, align_in[pool])
        spans = tuple((r.start, r.end) for r in unit.rects if r.size > 0)
        items.append(Item(unit.index, choices, size_in, align_in, spans, unit.fixed, traffic[unit.index]))
    return items


def _packings(
    problem: Problem, units: Sequence[Unit], items: Sequence[Item], order: str, rule: str, improve: bool
) -> list[Plan]:
    """The plan of one order and rule, and (with `improve`) of the same packing improved."""
    capacity = {b.pool: b.capacity for b in problem.banks}
    occupying = [i for i in items if i.spans]
    packer = Packer(capacity, [i for i in occupying if i.fixed is not None])
    position = {i.index: n for n, i in enumerate(items)}
    key = ORDERS[order]
    ordered = sorted((i for i in occupying if i.fixed is None), key=lambda i: key(i, position[i.index]))
    for item in [i for i in ordered if len(i.choices) == 1] + [i for i in ordered if len(i.choices) > 1]:
        if not packer.place(item, rule):
            banks = [b for pool in item.choices if (b := problem.bank(pool)) is not None]
            free = ", ".join(
                f"{b.name!r} {b.capacity - packer.used.get(b.pool, 0)} of {b.capacity}" for b in banks
            )
            raise BankCapacityError(
                f"shared_objects ({order}, {rule}): no bank has room for a new object of"
                f" {list(units[item.index].roots)} ({item.size_in[item.choices[-1]]} bytes); bytes free: {free}",
                banks[-1].name if banks else "",
                item.size_in[item.choices[-1]],
                units[item.index].roots,
            )
    plans = [_plan(problem, units, items, packer)]
    if improve:
        packer.dissolve()
        if problem.banks:
            packer.promote(ordered, rule)
            packer.dissolve()
        plans.append(_plan(problem, units, items, packer))
    return [p for p in plans if _fits(problem, p)]


def _plan(problem: Problem, units: Sequence[Unit], items: Sequence[Item], packer: Packer) -> Plan:
    """The packer's objects laid out, as a plan of `problem` (units holding no bytes at 0 or their pin)."""
    offsets, pools = packer.lay_out()
    unit_offsets = [offsets.get(i.index, i.fixed or 0) for i in items]
    unit_pools = [pools.get(i.index, i.choices[0]) for i in items]
    root_pool = {root: unit_pools[u.index] for u in units for root in u.roots}
    chosen = {b.id: root_pool[problem.root_of(b.id)[0]] for b in problem.buffers if b.banks}
    placed = place_in_banks(problem, chosen)
    all_offsets = expand(problem, units, unit_offsets)
    return Plan(
        offsets=all_offsets,
        arena_sizes={b.pool: 0 for b in problem.banks} | arena_sizes_of(placed, all_offsets),
        solver="shared_objects",
        pools=chosen,
        status="heuristic",
    )


def _fits(problem: Problem, plan: Plan) -> bool:
    return all(plan.arena_sizes.get(b.pool, 0) <= b.capacity for b in problem.banks)


def _executorch(problem: Problem) -> list[Plan]:
    """ExecuTorch's own plan of the shared-objects form (its greedy or BankedGreedy), when it has one."""
    from memplan.solvers.fallback import WithFallback
    from memplan.solvers.registry import BANKED_GREEDY, GREEDY

    entry = BANKED_GREEDY if problem.banks else GREEDY
    try:
        plan = WithFallback(entry)(problem, entry.make_params({}), time_limit_s=None)
    except (BankCapacityError, UnsupportedProblemError):
        return []
    return [plan] if not validate(problem, plan) else []
