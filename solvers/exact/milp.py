"""Exact planning as a disjunctive MILP, solved through PuLP (CBC or HiGHS).

Model, per placement unit u (solvers.units) with offset x_u and per pool p with
arena A_p, all in bytes divided by g = solvers.exact.arena_bounds.scale_of (the common
divisor of sizes and fixed offsets, reduced until each alignment divides it or
is a multiple of it):

    minimise   sum_p A_p                       (A_p >= the pool's lower bound)
    subject to A_p >= x_u + size(u in p)
               x_u = step_u * k_u,  k_u integer (or x_u fixed; step_u = alignment_u / g, or 1)
               x_u + s_uv <= x_v + M (1 - z_uv)    z_uv binary, only for pairs
               x_v + s_vu <= x_u + M z_uv          whose lifetimes overlap

The pairs come from a sweep over time, not from all pairs; the big-M comes from
the best-fit plan, which is also the warm start. The raw solver offsets are
settled (each unit lowered as far as its solver order allows), so rounding or
tolerance in the MILP can never produce an invalid plan, and the result is
never worse than best-fit's.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pulp

from memplan.errors import InfeasibleError, SolverOptionError
from memplan.peak_bound import lower_bounds
from memplan.plan import Outcome, Plan
from memplan.problem import Problem
from memplan.solvers.defaults import MILP_BUDGET_S, checked_time_limit
from memplan.solvers.exact.arena_bounds import check_capacity_reachable, pool_bounds, scale_of
from memplan.solvers.exact.milp_backends import BACKENDS, make_solver, strict_gaps
from memplan.solvers.exact.milp_model import (
    ACCEPTED_MAGNITUDE,
    MilpModel,
    OutOfTime,
    PairSizes,
    overlapping_pairs,
    settle,
)
from memplan.solvers.heuristics.bestfit import solve_bestfit
from memplan.solvers.units import Unit, arena_of, make_plan, rank, units_of

BUILD_SHARE = 1 / 3
"""Share of the time limit the model may take to build; handing it to the
solver costs about as much again, and the rest is for solving."""


@dataclass(frozen=True)
class MilpParams:
    """The techniques of `solve_milp` and the backend it hands the model to."""

    backend: str = "cbc"  # "cbc" or "highs"
    msg: bool = False  # the backend's log on stdout
    warm_start: bool = True  # start from best-fit's plan; return it at once if it meets the lower bound
    decompose: bool = True  # independent parts (solvers.exact.decompose) are solved one by one
    backend_options: Mapping[str, Any] = field(default_factory=dict)  # PuLP options, e.g. {"threads": 2}

    def __post_init__(self) -> None:
        if self.backend not in BACKENDS:
            raise SolverOptionError(
                f"milp: unknown backend {self.backend!r}; choose one of: {', '.join(BACKENDS)}"
            )
        make_solver(self.backend, self.msg, dict(self.backend_options))  # bad options fail here


def solve_milp(
    problem: Problem, params: MilpParams | None = None, *, time_limit_s: float | None = None
) -> Plan:
    """Minimise the summed arena, or prove that `problem.capacity` cannot be met.

    `warm_start` starts the solver from the best-fit plan, and skips it
    altogether when that plan already meets the lower bound; without it the
    solver starts cold (best-fit still gives the big-M and the fallback).
    On a time-out the plan is the best found (at worst best-fit's) and its
    outcome says it is not proven. `params` None: the defaults (built here, as
    checking them builds a PuLP solver).
    """
    params = MilpParams() if params is None else params
    time_limit_s = checked_time_limit("milp", time_limit_s)
    limit = MILP_BUDGET_S if time_limit_s is None else time_limit_s
    settings: dict[str, Any] = dict(
        backend=params.backend,
        msg=params.msg,
        warm_start=params.warm_start,
        options=dict(params.backend_options),
    )
    if params.decompose:
        from memplan.solvers.exact.decompose import solve_in_parts

        return solve_in_parts(
            problem,
            lambda part, seconds: _solve(part, seconds, **settings),
            time_limit_s=limit,
            solver="milp",
        )
    return _solve(problem, limit, **settings)


def _solve(
    problem: Problem, limit: float, *, backend: str, msg: bool, warm_start: bool, options: dict[str, Any]
) -> Plan:
    """The MILP on one (part of a) problem within `limit` seconds."""
    began = time.perf_counter()
    solver = make_solver(backend, msg, options)
    units = units_of(problem)
    bounds = pool_bounds(problem, units)
    padded = " with alignment padding" if bounds != lower_bounds(problem) else ""
    meets_bound = f"optimal: meets the lower bound{padded}"
    check_capacity_reachable("milp", problem.capacity, bounds)
    pairs = overlapping_pairs(units)
    _check_fixed_pairs(units, pairs)
    heuristic = _bestfit(problem)
    heuristic_offsets = _unit_offsets(units, heuristic)
    fits = problem.capacity is None or all(s <= problem.capacity for s in heuristic.arena_sizes.values())

    def finish(unit_offsets: Sequence[int], outcome: Outcome, status: str) -> Plan:
        return make_plan(problem, units, unit_offsets, "milp", time.perf_counter() - began, outcome, status)

    if not units:
        return finish([], Outcome.OPTIMAL, "optimal: nothing to place")
    if warm_start and fits and heuristic.arena_size == sum(bounds.values()):
        return finish(heuristic_offsets, Outcome.OPTIMAL, meets_bound + " (best-fit's plan)")

    divisor = scale_of(units)
    built = _built(problem, units, pairs, bounds, divisor, heuristic, fits, (began, limit), backend)
    if not isinstance(built, MilpModel):
        outcome, why = built
        if outcome is Outcome.TIME_LIMIT and fits and heuristic.arena_size == sum(bounds.values()):
            return finish(heuristic_offsets, Outcome.OPTIMAL, meets_bound + " (best-fit's plan)")
        return finish(heuristic_offsets, outcome, why)
    model = built
    if warm_start and fits:
        model.set_start(heuristic_offsets)
    remaining = max(limit - (time.perf_counter() - began), 0.01)
    try:
        status, proven_by_solver, objective = model.solve(solver, remaining)
    except (pulp.PulpSolverError, IndexError) as err:  # e.g. CBC exiting abnormally; PuLP misreading HiGHS
        return finish(
            heuristic_offsets,
            Outcome.SOLVER_FAILED,
            f"not proven: {backend} failed ({type(err).__name__}: {err}); best-fit plan returned",
        )

    doubt = model.doubt()
    if status == pulp.LpStatusInfeasible:
        if fits:  # always so without a capacity: the best-fit plan is a witness
            return finish(
                heuristic_offsets,
                Outcome.SOLVER_FAILED,
                f"not proven: {backend} reported the model infeasible, which the best-fit plan disproves"
                " (a solver fault); best-fit plan returned",
            )
        raise _infeasible(problem, backend, doubt, heuristic, bounds)
    best, source = _better_of(model, units, pairs, divisor, heuristic_offsets, problem.capacity)
    total = sum(arena_of(units, best).values())
    lb_total = sum(bounds.values())
    if proven_by_solver and doubt is None:
        doubt = model.integral_fault()
    proven = total == lb_total or (
        proven_by_solver
        and strict_gaps(options)
        and source == "milp"
        and total <= objective * divisor
        and doubt is None
    )
    if proven:
        outcome = Outcome.OPTIMAL
        state = meets_bound if total == lb_total else f"optimal: proven by {backend}"
    else:
        outcome, why = _why_not_proven(
            model, proven_by_solver, options, doubt, limit, objective * divisor, total
        )
        state = f"not proven: {backend} {why}" + ("; best-fit plan kept" if source == "bestfit" else "")
    return finish(best, outcome, state)


# -- preparation -----------------------------------------------------------------


def _built(
    problem: Problem,
    units: Sequence[Unit],
    pairs: PairSizes,
    bounds: dict[int, int],
    divisor: int,
    heuristic: Plan,
    fits: bool,
    clock: tuple[float, float],
    backend: str,
) -> MilpModel | tuple[Outcome, str]:
    """The model, built within `BUILD_SHARE` of the limit (`clock`: when the part began, its limit),
    or the outcome and status of returning best-fit's plan instead; `InfeasibleError` when that plan
    does not fit."""
    began, limit = clock
    try:
        model = MilpModel(
            units,
            pairs,
            bounds,
            divisor,
            _pool_limits(problem, bounds, heuristic, fits),
            deadline=began + limit * BUILD_SHARE,
        )
    except OutOfTime as progress:
        return Outcome.TIME_LIMIT, (
            f"not proven: the MILP ({len(pairs)} order pairs) did not build within {BUILD_SHARE:.0%}"
            f" of the time limit {limit:g}s ({progress}); best-fit plan returned"
        )
    if model.magnitude <= ACCEPTED_MAGNITUDE:
        return model
    if fits:
        return Outcome.NOT_PROVEN, (
            f"not proven: the MILP's numbers reach {model.magnitude} units of {divisor} bytes, beyond"
            f" the {ACCEPTED_MAGNITUDE:.0e} the backends accept; best-fit plan returned"
        )
    raise InfeasibleError(
        f"milp: no plan within capacity {problem.capacity} found (not proven infeasible: the MILP's"
        f" numbers exceed what {backend} accepts); best-fit needs {max(heuristic.arena_sizes.values())} bytes"
    )


def _better_of(
    model: MilpModel,
    units: Sequence[Unit],
    pairs: PairSizes,
    divisor: int,
    heuristic_offsets: list[int],
    capacity: int | None,
) -> tuple[list[int], str]:
    """The better of the backend's solution (settled to bytes) and best-fit's plan, and whose it is."""
    candidates = [(heuristic_offsets, "bestfit")]
    if model.has_solution():
        candidates.insert(0, (settle(units, pairs, model.raw_offsets(), divisor), "milp"))
    return min(candidates, key=lambda c: rank(units, c[0], capacity))


def _infeasible(
    problem: Problem, backend: str, doubt: str | None, heuristic: Plan, bounds: dict[int, int]
) -> InfeasibleError:
    """The backend's report that no plan fits the capacity: a proof unless `doubt` says why not."""
    if doubt is not None:
        return InfeasibleError(
            f"milp/{backend}: no plan within capacity {problem.capacity} found (not proven infeasible:"
            f" {backend} reported that none exists, but {doubt}); best-fit needs"
            f" {max(heuristic.arena_sizes.values())} bytes"
        )
    return InfeasibleError(
        f"milp/{backend}: proven that no plan fits the capacity {problem.capacity} bytes per pool"
        f" (lower bound per pool: {dict(bounds)})",
        proven=True,
    )


def _why_not_proven(
    model: MilpModel,
    proven_by_solver: bool,
    options: dict[str, Any],
    doubt: str | None,
    limit: float,
    claimed: int,
    total: int,
) -> tuple[Outcome, str]:
    """The outcome of a plan the backend did not prove, and why in words."""
    found = "a feasible plan" if model.has_solution() else "no plan"
    if not proven_by_solver:
        return Outcome.TIME_LIMIT, f"stopped at the time limit {limit:g}s with {found}"
    if not strict_gaps(options):
        return Outcome.GAP_LIMIT, f"stopped within the gap the caller allowed with {found}"
    if doubt is not None:
        return Outcome.NOT_PROVEN, f"reported an optimum, but {doubt}"
    return Outcome.NOT_PROVEN, f"reported optimum {claimed} but its offsets settle to {total}"


def _check_fixed_pairs(units: Sequence[Unit], pairs: PairSizes) -> None:
    for (i, j), (size_i, size_j) in pairs.items():
        a, b = units[i], units[j]
        if a.fixed is not None and b.fixed is not None:
            if a.fixed < b.fixed + size_j and b.fixed < a.fixed + size_i:
                raise InfeasibleError(
                    f"milp: fixed buffers {list(a.roots)} at {a.fixed} and {list(b.roots)} at {b.fixed}"
                    " share bytes while both live",
                    a.roots + b.roots,
                    proven=True,
                )


def _bestfit(problem: Problem) -> Plan:
    """The heuristic plan (without the capacity, so it exists even when over it)."""
    return solve_bestfit(dataclasses.replace(problem, capacity=None))


def _unit_offsets(units: Sequence[Unit], plan: Plan) -> list[int]:
    return [plan.offsets[u.roots[0]] for u in units]


def _pool_limits(problem: Problem, bounds: dict[int, int], heuristic: Plan, fits: bool) -> dict[int, int]:
    """Largest arena each pool may take: the big-M source.

    Without a capacity (or when best-fit meets it), an optimal plan sums to at
    most best-fit's total, so one pool can take that total minus the others'
    lower bounds. Otherwise only the capacity bounds a pool.
    """
    total, lb_total = heuristic.arena_size, sum(bounds.values())
    limits = {}
    for pool, lb in bounds.items():
        if problem.capacity is None:  # best-fit always "fits" then
            limits[pool] = total - (lb_total - lb)
        else:
            limits[pool] = min(total - (lb_total - lb), problem.capacity) if fits else problem.capacity
    return limits


# -- the model -------------------------------------------------------------------
