"""Which plan the pass writes: the requested solver's, unless a cheap one does better.

A time-limited exact solver may stop before beating its own start, and no
heuristic wins everywhere (best-fit can miss a packing ExecuTorch's greedy
finds), so every plan that is not proven optimal is compared with the plans of
the fallback solvers and the smallest is kept. `greedy` (ExecuTorch's
algorithm) has no fallback: asking for it reproduces the stock plan.

ExecuTorch reserves the bytes of control-flow submodules at the bottom of an
arena for the whole method; extraction models that as a buffer fixed at offset
0. A solver that cannot pin buffers (greedy) plans the rest and everything is
moved up past the reservation, which is exactly what ExecuTorch does.
"""

from __future__ import annotations

import dataclasses
import math
from collections import defaultdict

from memplan import solvers
from memplan.planner.problem import (
    BufferKind,
    InfeasibleError,
    Plan,
    Problem,
    UnsupportedProblemError,
    arena_sizes_of,
    check_plan,
    lower_bound,
    traffic_cost,
)

FALLBACKS: dict[str, tuple[str, ...]] = {
    "bestfit": ("greedy",),
    "cpsat": ("bestfit", "greedy"),
    "milp": ("bestfit", "greedy"),
}

# Under a memory map: the bank-choosing counterpart of a single-arena solver, and the fallbacks
# of each (compared by traffic cost, then arena). `banked_greedy` (ExecuTorch's BankedGreedy)
# has none: asking for it reproduces the stock plan, or its error.
BANKED: dict[str, str] = {"greedy": "banked_greedy", "bestfit": "banked_bestfit"}
BANK_FALLBACKS: dict[str, tuple[str, ...]] = {
    "cpsat": ("banked_bestfit",),
    "banked_bestfit": (),
    "banked_greedy": (),
}


def choose_plan(
    problem: Problem,
    solver: str,
    time_limit_s: float | None = None,
    options: dict | None = None,
    capacity: int | None = None,
) -> Plan:
    """The smallest valid plan of `solver` and its fallbacks; raises `ProblemError` if none."""
    if capacity is not None:
        problem = dataclasses.replace(problem, capacity=capacity)
    if problem.banks:
        return choose_banked_plan(problem, solver, time_limit_s, options or {})
    plan = run_solver(problem, solver, time_limit_s, options or {})
    if not plan.proven_optimal:
        for other in FALLBACKS.get(solver, ()):
            try:
                alt = run_solver(problem, other)
            except (InfeasibleError, UnsupportedProblemError):
                continue
            if alt.arena_size < plan.arena_size:
                plan = alt
    check_plan(problem, plan)
    return plan


def choose_banked_plan(problem: Problem, solver: str, time_limit_s: float | None, options: dict) -> Plan:
    """The plan of `solver` (or its bank-choosing counterpart) and its fallbacks with the least traffic cost.

    Fitting comes first: a fallback that fits replaces a solver that does not.
    """
    name = BANKED.get(solver, solver)
    if name not in BANK_FALLBACKS:
        raise UnsupportedProblemError(
            f"{solver} cannot plan across the banks of a memory map; use one of {', '.join(BANK_FALLBACKS)}"
            " (greedy and bestfit stand for banked_greedy and banked_bestfit)"
        )
    plan: Plan | None = None
    error: InfeasibleError | None = None
    try:
        plan = solvers.solve(problem, name, time_limit_s, **options)
    except InfeasibleError as e:
        error = e
    if plan is None or not plan.proven_optimal:
        for other in BANK_FALLBACKS[name]:
            try:
                alt = solvers.solve(problem, other)
            except InfeasibleError:
                continue
            if plan is None or _banked_key(problem, alt) < _banked_key(problem, plan):
                plan = alt
    if plan is None:
        assert error is not None
        raise error
    check_plan(problem, plan)
    return plan


def _banked_key(problem: Problem, plan: Plan) -> tuple[float, int]:
    return traffic_cost(problem, plan.pools), plan.arena_size


def run_solver(
    problem: Problem, solver: str, time_limit_s: float | None = None, options: dict | None = None
) -> Plan:
    """`solvers.solve`, planning around submodule reservations if the solver cannot pin them."""
    options = options or {}
    try:
        return solvers.solve(problem, solver, time_limit_s, **options)
    except UnsupportedProblemError:
        split = without_reservations(problem)
        if split is None:
            raise
        rest, shift = split
        return shifted(problem, solvers.solve(rest, solver, time_limit_s, **options), shift)


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
        shift[b.pool] = max(shift[b.pool], -(-b.size // align[b.pool]) * align[b.pool])
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
    offsets = {
        b.id: plan.offsets[b.id] + shift.get(b.pool, 0) if b.id in plan.offsets else b.offset
        for b in problem.buffers
    }
    exact = all(shift[b.pool] == b.size for b in problem.buffers if b.id not in plan.offsets)
    return dataclasses.replace(
        plan,
        offsets=offsets,
        arena_sizes=arena_sizes_of(problem, offsets),
        proven_optimal=plan.proven_optimal and exact,
        lower_bound=lower_bound(problem),
    )
