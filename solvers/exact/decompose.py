"""Split a problem into parts that can be planned independently, then join the plans.

Two exact reductions, usable with any solver:

- Time split: in one pool, a moment that no rectangle crosses separates the
  rectangles before it from those after; they never meet, so each side can be
  planned alone and the pool's arena is the larger of the two. A unit with
  rectangles on both sides (a same-offset set) or in several pools joins those
  sides into one part.
- Peeling: a buffer that lives over its pool's whole horizon meets every
  other one, so it can sit at the bottom (removing its byte band from any plan
  and shifting what was below it up gives a plan with the same arena). Peeled
  buffers are stacked at offset 0 and the rest of the pool is planned above
  them. This is exact when the stack needs no alignment padding and every
  peeled size is a multiple of the alignments of the rest of the pool. A padded stack is used only on request
  (`peel="padded"`, minimising only: a few bytes of padding buy a split of a
  big problem), and then the result is not claimed optimal unless it meets the
  lower bound. Long-lived buffers (inputs, state, KV caches) are what usually
  prevents time splits, so peeling comes first.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field

from memplan.arith import align_up
from memplan.errors import InfeasibleError, SolverOptionError
from memplan.peak_bound import lower_bound, lower_bounds
from memplan.plan import Outcome, Plan, arena_sizes_of
from memplan.problem import ContiguousGroup, Problem, SameOffset
from memplan.solvers.stages import stage
from memplan.solvers.units import Unit, share_units, units_of

MIN_PART_SECONDS = 0.5
"""A part gets at least this much (if left): a tiny share could leave a part that
needs search with no time to find a plan within the capacity."""

PartSolver = Callable[[Problem, float], Plan]
"""Plans one part within the given number of seconds."""


@dataclass
class Split:
    """How a problem falls apart: peeled units per pool, the base above them, independent parts."""

    parts: list[list[Unit]]
    peeled: dict[int, list[Unit]] = field(default_factory=dict)
    base: dict[int, int] = field(default_factory=dict)
    exact: bool = True  # False: a peeled stack needed alignment padding


def split(problem: Problem, units: list[Unit] | None = None, peel: bool | str = True) -> Split:
    """Peel long-lived units and group the rest into independent parts.

    `peel`: True peels only where that is exact, "padded" also where the stack
    needs alignment padding, False never.
    """
    if peel not in (True, False, "padded"):
        raise SolverOptionError(f"peel must be True, False or 'padded', got {peel!r}")
    units = units_of(problem) if units is None else units
    peeled: dict[int, list[Unit]] = {}
    base: dict[int, int] = {}
    exact = True
    if peel:
        for pool, (stack, step) in _peelable(units).items():
            top = _stack_top(stack, step)
            # Exact: moving the peeled bands down shifts every other unit by a sum of peeled
            # sizes, which keeps it aligned when each size is a multiple of `step`.
            tight = top == sum(u.size for u in stack) and all(u.size % step == 0 for u in stack)
            if tight or peel == "padded":
                peeled[pool], base[pool] = stack, top
                exact = exact and tight
    skip = {u.index for us in peeled.values() for u in us}
    rest = [u for u in units if u.index not in skip]
    return Split(_parts(rest), peeled, base, exact)


def _peelable(units: list[Unit]) -> dict[int, tuple[list[Unit], int]]:
    """Per pool: free single-rectangle units spanning the pool's horizon (biggest first), and
    the lcm of the alignments of the pool's other units (what their base must be a multiple of).

    A pool is left alone if it has fixed units (they cannot move up) or units
    with rectangles in other pools (their offset is shared across pools).
    """
    horizon: dict[int, tuple[int, int]] = {}
    blocked: set[int] = set()
    for u in units:
        pools = {r.pool for r in u.rects}
        for r in u.rects:
            lo, hi = horizon.get(r.pool, (r.start, r.end))
            horizon[r.pool] = (min(lo, r.start), max(hi, r.end))
            if u.fixed is not None or len(pools) > 1:
                blocked.add(r.pool)
    stacks: dict[int, list[Unit]] = defaultdict(list)
    steps: dict[int, int] = defaultdict(lambda: 1)
    for u in units:
        r = u.rects[0]
        if len(u.rects) == 1 and r.pool not in blocked and (r.start, r.end) == horizon[r.pool]:
            stacks[r.pool].append(u)
        else:
            for r in u.rects:
                steps[r.pool] = math.lcm(steps[r.pool], u.alignment)
    return {
        p: (sorted(us, key=lambda u: (-u.alignment, -u.size, u.index)), steps[p]) for p, us in stacks.items()
    }


def _stack_top(stack: list[Unit], step: int) -> int:
    """Where the rest of the pool starts above the stacked units: aligned to `step`."""
    top = 0
    for u in stack:
        top = align_up(top, u.alignment) + u.size
    return align_up(top, step)


def _parts(units: list[Unit]) -> list[list[Unit]]:
    """Units grouped into parts that share no moment in any pool (union-find over time segments).

    A unit with rectangles in several pools joins those pools whole: a part
    then either lies in one pool or owns every pool it touches, so minimising
    each part's arena minimises the sum over pools.
    """
    segment_of: dict[tuple[int, int], int] = {}  # (unit index, rect number) -> segment id
    by_pool: dict[int, list[tuple[int, int, int, int]]] = defaultdict(list)
    for u in units:
        for k, r in enumerate(u.rects):
            by_pool[r.pool].append((r.start, r.end, u.index, k))
    segments = 0
    pool_segments: dict[int, range] = {}
    for pool, rects in by_pool.items():
        rects.sort()
        first = segments
        reach = None
        for start, end, index, k in rects:
            if reach is None or start >= reach:
                segments += 1
                reach = end
            reach = max(reach, end)
            segment_of[(index, k)] = segments - 1
        pool_segments[pool] = range(first, segments)

    parent = list(range(segments))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    joined = {r.pool for u in units if len({r.pool for r in u.rects}) > 1 for r in u.rects}
    for pool in joined:
        for seg in pool_segments[pool]:
            parent[find(seg)] = find(pool_segments[pool][0])
    for u in units:
        first = find(segment_of[(u.index, 0)])
        for k in range(1, len(u.rects)):
            parent[find(segment_of[(u.index, k)])] = first
    groups: dict[int, list[Unit]] = defaultdict(list)
    for u in units:
        groups[find(segment_of[(u.index, 0)])].append(u)
    return list(groups.values())


def subproblem(problem: Problem, units: list[Unit], capacity: int | None, name: str) -> Problem:
    """The buffers of `units` (with their group members) and the constraints among them."""
    roots = {root for u in units for root in u.roots}
    keep = {b.id for b in problem.buffers if problem.root_of(b.id)[0] in roots}
    return Problem(
        tuple(b for b in problem.buffers if b.id in keep),
        tuple(ContiguousGroup(g.parent, g.members) for g in problem.groups if g.parent in keep),
        tuple(SameOffset(s.buffers) for s in problem.same_offsets if s.buffers[0] in keep),
        capacity=capacity,
        name=name,
    )


def solve_in_parts(
    problem: Problem,
    solve_part: PartSolver,
    *,
    time_limit_s: float,
    solver: str,
    peel: bool | str = True,
    fixed_shares: bool = False,
) -> Plan:
    """Plan each independent part with `solve_part` and join the plans.

    With `fixed_shares` a part's time depends only on the limit and the part
    sizes, never on how long the parts before it took (reproducible runs).

    The time limit is shared: when minimising, each part gets the remaining
    time in proportion to its share of the remaining units, so small parts
    finish early and leave their time to the big ones; with a capacity every
    part must fit, so each may use all the time left. The joined plan is proven optimal when, in
    every pool, the arena meets the lower bound or comes from a part proven
    optimal (and the split was exact).
    """
    began = time.perf_counter()
    minimising = problem.capacity is None
    with stage("split into parts"):
        units = units_of(problem)
        if (
            problem.capacity is not None
            and lower_bound(problem)
            and max(lower_bounds(problem).values()) > problem.capacity
        ):
            worst = max(lower_bounds(problem).items(), key=lambda kv: kv[1])
            raise InfeasibleError(
                f"{solver}: pool {worst[0]} has {worst[1]} bytes live at once, over the capacity {problem.capacity}",
                proven=True,
            )
        cut = split(
            problem, units, peel=peel if minimising else bool(peel)
        )  # padding spoils infeasibility proofs
    if not cut.peeled and len(cut.parts) <= 1:  # nothing to split: the time spent looking is gone
        spent = 0.0 if fixed_shares else time.perf_counter() - began
        return solve_part(problem, max(time_limit_s - spent, 0.01))

    offsets = _stacked_offsets(problem, cut.peeled)
    base = cut.base
    remaining_units = total_units = sum(len(p) for p in cut.parts)
    plans: list[tuple[Plan, set[int]]] = []
    for number, part_units in enumerate(sorted(cut.parts, key=len)):
        pools = {r.pool for u in part_units for r in u.rects}
        capacity = None
        if problem.capacity is not None:
            capacity = problem.capacity - max(base.get(p, 0) for p in pools)
            if capacity <= 0:
                raise InfeasibleError(
                    f"{solver}: buffers living over the whole program already fill the capacity"
                    f" {problem.capacity} of pool(s) {sorted(pools)}"
                )
        with stage("split into parts"):
            part = subproblem(problem, part_units, capacity, f"{problem.name}[part {number}]")
            if not problem.groups and not problem.same_offsets:  # a unit per buffer, in buffer order
                ordered = sorted(part_units, key=lambda u: u.index)
                share_units(part, [u._replace(index=k) for k, u in enumerate(ordered)])
        left = time_limit_s - (time.perf_counter() - began)
        if fixed_shares:
            left = time_limit_s * remaining_units / total_units if minimising else time_limit_s
        share = _share(left, len(part_units), remaining_units, minimising)
        remaining_units -= len(part_units)
        try:
            plan = solve_part(part, share)
        except InfeasibleError as err:
            _locate(err, solver, problem, part, len(cut.parts), capacity, max(base.get(p, 0) for p in pools))
            raise
        for buffer_id, offset in plan.offsets.items():
            offsets[buffer_id] = offset + base.get(problem.buffer(buffer_id).pool, 0)
        plans.append((plan, pools))
    with stage("plan"):
        joined = _joined(problem, offsets, plans, cut, solver, time.perf_counter() - began)
    return joined if cut.exact else _unless_bestfit_beats(problem, joined, began)


def _unless_bestfit_beats(problem: Problem, joined: Plan, began: float) -> Plan:
    """`joined`, or best-fit's plan of the whole problem when smaller: a padded split may cost
    more than it gained."""
    from memplan.solvers.heuristics.bestfit import solve_bestfit

    heuristic = solve_bestfit(problem)
    if heuristic.arena_size >= joined.arena_size:
        return joined
    return dataclasses.replace(
        heuristic,
        solver=joined.solver,
        seconds=time.perf_counter() - began,
        status=f"{'optimal' if heuristic.proven_optimal else 'not proven'}: best-fit kept,"
        f" better than the padded split ({joined.status})",
    )


def _share(left: float, part_units: int, remaining_units: int, minimising: bool) -> float:
    """A part's seconds of the `left` ones: in proportion to its units when minimising (at least
    `MIN_PART_SECONDS` if there is that much); with a capacity every part must fit, so all of them."""
    if minimising:
        return max(left * part_units / remaining_units, min(left, MIN_PART_SECONDS), 0.01)
    return max(left, 0.01)


def _locate(
    err: InfeasibleError,
    solver: str,
    problem: Problem,
    part: Problem,
    parts: int,
    capacity: int | None,
    below: int,
) -> None:
    """Prefix `err` with where it was found: which part, and the capacity left above the buffers
    living throughout (`below` bytes), since the part's own message names only its share."""
    what = (
        f"an independent part of {len(part.buffers)} buffers ({parts} parts in all) has"
        if parts > 1
        else f"the {len(part.buffers)} buffers not living throughout have"
    )
    where = f"{solver}: in {what.rsplit(' ', 1)[0]}"
    if below:
        where = (
            f"{solver}, capacity {problem.capacity}: {what} {capacity} bytes of it left above"
            f" {below} bytes of buffers living throughout"
        )
    err.args = (f"{where}: {err.args[0]}", *err.args[1:])


def _stacked_offsets(problem: Problem, peeled: dict[int, list[Unit]]) -> dict[str, int]:
    """Offsets of the peeled units (in `_stack_top`'s order from 0) and their group members."""
    offsets: dict[str, int] = {}
    for units in peeled.values():
        top = 0
        for u in units:
            at = align_up(top, u.alignment)
            for root in u.roots:
                offsets[root] = at
            top = at + u.size
    for buf in problem.buffers:
        root, rel = problem.root_of(buf.id)
        if root in offsets and buf.id != root:
            offsets[buf.id] = offsets[root] + rel
    return offsets


def _joined(
    problem: Problem,
    offsets: dict[str, int],
    plans: list[tuple[Plan, set[int]]],
    cut: Split,
    solver: str,
    seconds: float,
) -> Plan:
    arenas = arena_sizes_of(problem, offsets)
    bounds = _joined_bounds(problem, plans, cut)

    def pool_proven(pool: int) -> bool:
        """At its bound, or its arena comes from a part proven optimal (which owns its pools)."""
        if arenas[pool] == bounds[pool]:
            return True
        return cut.exact and any(
            plan.proven_optimal and pool in pools and _attains(plan, pool, arenas[pool], offsets, problem)
            for plan, pools in plans
        )

    proven = all(pool_proven(p) for p in arenas)
    n_proven = sum(1 for plan, _ in plans if plan.proven_optimal)
    peeled = sum(len(us) for us in cut.peeled.values())
    detail = f"{len(plans)} independent parts, {n_proven} proven"
    if peeled:
        detail += f", {peeled} long-lived buffers stacked at the bottom" + (
            "" if cut.exact else " (with padding)"
        )
    outcome = Outcome.OPTIMAL
    if proven:
        status = f"optimal ({detail})"
    else:
        worst = next((plan for plan, _ in plans if not plan.proven_optimal), None)
        status = f"not proven ({detail}; e.g. {worst.status})" if worst else f"not proven ({detail})"
        # The weakest part says what the whole is; every part proven but not the whole: no proof.
        outcome = worst.outcome if worst is not None else Outcome.NOT_PROVEN
        if problem.capacity is not None:
            status = f"feasible within capacity {problem.capacity} ({detail})"
            outcome = Outcome.FEASIBLE
    return Plan(
        offsets=offsets,
        arena_sizes=arenas,
        solver=solver,
        seconds=seconds,
        lower_bound=sum(bounds.values()),
        status=status,
        outcome=outcome,
    )


def _joined_bounds(problem: Problem, plans: list[tuple[Plan, set[int]]], cut: Split) -> dict[int, int]:
    """Per pool: the bytes live at once or, where the split is exact and higher, the peeled stack
    plus the lower bound a one-pool part reports (the pool's arena is the stack plus its largest part)."""
    bounds = lower_bounds(problem)
    if cut.exact:
        for plan, pools in plans:
            if len(pools) == 1:
                (pool,) = pools
                bounds[pool] = max(bounds[pool], cut.base.get(pool, 0) + plan.lower_bound)
    return bounds


def _attains(plan: Plan, pool: int, arena: int, offsets: dict[str, int], problem: Problem) -> bool:
    """Whether the part planned by `plan` reaches the joined arena of `pool`."""
    return any(
        offsets[b] + problem.buffer(b).size == arena for b in plan.offsets if problem.buffer(b).pool == pool
    )
