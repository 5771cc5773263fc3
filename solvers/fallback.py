"""A solver with fallbacks is a solver, like XLA's `HeapAlgorithmWithFallback`: the requested plan unless a cheap one does better.

A time-limited exact solver may stop before beating its own start, and no
heuristic wins everywhere (best-fit can miss a packing ExecuTorch's greedy
finds), so a plan that is not proven optimal is compared with the plans of
the entry's fallback solvers (`SolverEntry.fallback`, entries themselves) and
the smallest is kept. `greedy` (ExecuTorch's algorithm) has no fallback:
asking for it reproduces the stock plan. `WithFallback(entry)` is called like
any registered solve function.

ExecuTorch reserves the bytes of control-flow submodules at the bottom of an
arena for the whole method; extraction models that as a buffer of kind
SUBMODULE fixed at offset 0. A solver that cannot pin buffers (greedy) plans
the rest and everything is moved up past the reservation, which is exactly
what ExecuTorch does.

Plans returned here are not validated: `solvers.solve` validates once, on the way out.
"""

from __future__ import annotations

import dataclasses
import math
from collections import defaultdict
from dataclasses import dataclass
from typing import Any, cast

from memplan.arith import align_up
from memplan.bank_placement import place_in_banks, traffic_cost
from memplan.errors import InfeasibleError, UnsupportedProblemError
from memplan.peak_bound import lower_bound
from memplan.plan import Outcome, Plan, arena_sizes_of
from memplan.problem import BufferKind, Problem
from memplan.solvers.contract import SolverEntry
from memplan.solvers.fits import check_banks_fit
from memplan.solvers.registry import alternatives, for_memory_map, prepared


@dataclass(frozen=True)
class WithFallback:
    """`entry` and its fallbacks as one solver, with the signature of a registered solve function."""

    entry: SolverEntry

    def __call__(self, problem: Problem, params: Any, *, time_limit_s: float | None = None) -> Plan:
        """The smallest plan of the entry and its fallbacks (their default parameters) that fits."""
        if problem.banks:
            return _with_bank_fallback(problem, self.entry, params, time_limit_s)
        plan = _run(problem, self.entry, params, time_limit_s)
        if not _fits(problem, plan):  # `solve` reports it; fallbacks are for smaller plans, not rescues
            return plan
        if not plan.proven_optimal:
            for other in self.entry.fallback:
                try:
                    alt = _run(problem, other, other.make_params({}), None)
                except (InfeasibleError, UnsupportedProblemError):
                    continue
                if alt.arena_size < plan.arena_size and _fits(problem, alt):
                    plan = alt
        return plan


def _with_bank_fallback(
    problem: Problem, entry: SolverEntry, params: Any, time_limit_s: float | None
) -> Plan:
    """Under a memory map: the plan of `entry` (or its banked counterpart) and its bank fallbacks
    with the least traffic cost; fitting comes first (a fallback that fits replaces one that does not)."""
    banked = for_memory_map(entry.name)
    if banked is not entry:
        params = banked.make_params({})
    plan: Plan | None = None
    error: InfeasibleError | None = None
    try:
        plan = _fitting_banks(problem, banked, params, time_limit_s)
    except InfeasibleError as e:
        error = e
    if plan is None or not plan.proven_optimal:
        for other in banked.bank_fallback:
            try:
                alt = _fitting_banks(problem, other, other.make_params({}), None)
            except InfeasibleError:
                continue
            if plan is None or _banked_key(problem, alt) < _banked_key(problem, plan):
                plan = alt
    if plan is None:
        assert error is not None, "no plan means the requested solver failed"
        raise error
    return plan


def _fitting_banks(problem: Problem, entry: SolverEntry, params: Any, time_limit_s: float | None) -> Plan:
    plan = _run(problem, entry, params, time_limit_s)
    check_banks_fit(entry.name, place_in_banks(problem, plan.pools), plan)
    return plan


def _banked_key(problem: Problem, plan: Plan) -> tuple[float, int]:
    return traffic_cost(problem, plan.pools), plan.arena_size


def _run(problem: Problem, entry: SolverEntry, params: Any, time_limit_s: float | None) -> Plan:
    """`entry` on `problem`, planning around submodule reservations if it cannot pin them."""
    problem = prepared(problem, entry)
    fn = entry.load()
    if entry.supports.fixed_offsets:
        entry.check(problem, alternatives(problem))
        return fn(problem, params, time_limit_s=time_limit_s)
    split = without_reservations(problem)
    if split is None:
        entry.check(problem, alternatives(problem))
        return fn(problem, params, time_limit_s=time_limit_s)
    rest, shift = split
    entry.check(rest, alternatives(rest))
    return shifted(problem, fn(rest, params, time_limit_s=time_limit_s), shift)


def _fits(problem: Problem, plan: Plan) -> bool:
    return problem.capacity is None or all(s <= problem.capacity for s in plan.arena_sizes.values())


def without_reservations(problem: Problem) -> tuple[Problem, dict[int, int]] | None:
    """The problem minus submodule reservations, and the bytes reserved per pool.

    None unless the only pinned buffers are reservations at offset 0 (and no
    group or same-offset set involves them).
    """
    reserved = [b for b in problem.buffers if b.kind is BufferKind.SUBMODULE and b.offset == 0]
    if not reserved or any(b.offset is not None for b in problem.buffers if b not in reserved):
        return None
    ids = {b.id for b in reserved}
    linked = {g.parent for g in problem.groups} | {m for g in problem.groups for m, _ in g.members}
    linked |= {b for s in problem.same_offsets for b in s.buffers}
    if ids & linked:
        return None
    # Round up so the moved buffers keep their alignment.
    align: dict[int, int] = defaultdict(lambda: 1)
    for b in problem.buffers:
        align[b.pool] = math.lcm(align[b.pool], b.alignment)
    shift: dict[int, int] = defaultdict(int)
    for b in reserved:
        shift[b.pool] = max(shift[b.pool], align_up(b.size, align[b.pool]))
    capacity = problem.capacity
    if capacity is not None:
        capacity -= max(shift.values())
        if capacity <= 0:
            raise InfeasibleError(
                f"submodule reservations {sorted(ids)} alone fill the capacity {problem.capacity}",
                sorted(ids),
            )
    rest = dataclasses.replace(
        problem, buffers=tuple(b for b in problem.buffers if b.id not in ids), capacity=capacity
    )
    return rest, dict(shift)


def shifted(problem: Problem, plan: Plan, shift: dict[int, int]) -> Plan:
    """`plan` of the problem without reservations, moved up past them, as a plan of `problem`."""
    offsets = {  # the reservations (the buffers `plan` lacks) stay where they are pinned: 0
        b.id: plan.offsets[b.id] + shift.get(b.pool, 0) if b.id in plan.offsets else cast(int, b.offset)
        for b in problem.buffers
    }
    exact = all(shift[b.pool] == b.size for b in problem.buffers if b.id not in plan.offsets)
    outcome = plan.outcome
    if outcome is Outcome.OPTIMAL and not exact:  # optimal above the reservation, rounded up to it
        outcome = Outcome.NOT_PROVEN
    return dataclasses.replace(
        plan,
        offsets=offsets,
        arena_sizes=arena_sizes_of(problem, offsets),
        outcome=outcome,
        lower_bound=lower_bound(problem),
    )
