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

import contextlib
import dataclasses
import math
import os
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pulp

import memplan.timeline as timeline
from memplan.arith import align_up, ceil_div
from memplan.errors import InfeasibleError, SolverOptionError
from memplan.peak_bound import lower_bounds
from memplan.plan import Outcome, Plan
from memplan.problem import Problem
from memplan.solvers.defaults import MILP_BUDGET_S, checked_time_limit
from memplan.solvers.exact.arena_bounds import check_capacity_reachable, pool_bounds, scale_of, step_of
from memplan.solvers.heuristics.bestfit import solve_bestfit
from memplan.solvers.units import Unit, arena_of, make_plan, rank, units_of

BUILD_SHARE = 1 / 3
"""Share of the time limit the model may take to build; handing it to the
solver costs about as much again, and the rest is for solving."""

BACKENDS = ("cbc", "highs")

CBC_PREPROCESS = "preprocess off"
"""CBC 2.10.3's integer preprocessing declares feasible models infeasible (a 4-buffer reproducer in
tests/solvers/test_milp.py: "Pre-processing says infeasible" where the optimum is 152), so it is off
unless the caller passes a `preprocess` option; without it CBC proves as much in about the same time
(docs/exact_solver.md)."""

# (i, j) with i < j -> (bytes of unit i that must clear unit j, bytes of j that must clear i)
PairSizes = dict[tuple[int, int], tuple[int, int]]


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
        _make_solver(self.backend, self.msg, dict(self.backend_options))  # bad options fail here


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
    solver = _make_solver(backend, msg, options)
    units = units_of(problem)
    plain = lower_bounds(problem)
    bounds = pool_bounds(problem, units)
    meets_bound = "optimal: meets the lower bound" + (" with alignment padding" if bounds != plain else "")
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
    try:
        model = _Model(
            units,
            pairs,
            bounds,
            divisor,
            _pool_limits(problem, bounds, heuristic, fits),
            deadline=began + limit * BUILD_SHARE,
        )
    except _OutOfTime as progress:
        if fits and heuristic.arena_size == sum(bounds.values()):
            return finish(heuristic_offsets, Outcome.OPTIMAL, meets_bound + " (best-fit's plan)")
        return finish(
            heuristic_offsets,
            Outcome.TIME_LIMIT,
            f"not proven: the MILP ({len(pairs)} order pairs) did not build within {BUILD_SHARE:.0%}"
            f" of the time limit {limit:g}s ({progress}); best-fit plan returned",
        )
    if model.magnitude > ACCEPTED_MAGNITUDE:
        if fits:
            return finish(
                heuristic_offsets,
                Outcome.NOT_PROVEN,
                f"not proven: the MILP's numbers reach {model.magnitude} units of {divisor} bytes, beyond"
                f" the {ACCEPTED_MAGNITUDE:.0e} the backends accept; best-fit plan returned",
            )
        raise InfeasibleError(
            f"milp: no plan within capacity {problem.capacity} found (not proven infeasible: the MILP's"
            f" numbers exceed what {backend} accepts); best-fit needs {max(heuristic.arena_sizes.values())} bytes"
        )
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
        if doubt is not None:
            raise InfeasibleError(
                f"milp/{backend}: no plan within capacity {problem.capacity} found (not proven infeasible:"
                f" {backend} reported that none exists, but {doubt}); best-fit needs"
                f" {max(heuristic.arena_sizes.values())} bytes"
            )
        raise InfeasibleError(
            f"milp/{backend}: proven that no plan fits the capacity {problem.capacity} bytes per pool"
            f" (lower bound per pool: {dict(bounds)})",
            proven=True,
        )
    candidates = []
    if model.has_solution():
        settled = settle(units, pairs, model.raw_offsets(), divisor)
        candidates.append((settled, "milp"))
    candidates.append((heuristic_offsets, "bestfit"))
    best, source = min(candidates, key=lambda c: rank(units, c[0], problem.capacity))
    total = sum(arena_of(units, best).values())
    lb_total = sum(bounds.values())
    if proven_by_solver and doubt is None:
        doubt = model.integral_fault()
    proven = total == lb_total or (
        proven_by_solver
        and _strict_gaps(options)
        and source == "milp"
        and total <= objective * divisor
        and doubt is None
    )
    if proven:
        outcome = Outcome.OPTIMAL
        state = meets_bound if total == lb_total else f"optimal: proven by {backend}"
    else:
        found = "a feasible plan" if model.has_solution() else "no plan"
        if not proven_by_solver:
            outcome, why = Outcome.TIME_LIMIT, f"stopped at the time limit {limit:g}s with {found}"
        elif not _strict_gaps(options):
            outcome, why = Outcome.GAP_LIMIT, f"stopped within the gap the caller allowed with {found}"
        elif doubt is not None:
            outcome, why = Outcome.NOT_PROVEN, f"reported an optimum, but {doubt}"
        else:
            outcome = Outcome.NOT_PROVEN
            why = f"reported optimum {objective * divisor} but its offsets settle to {total}"
        state = f"not proven: {backend} {why}"
        if source == "bestfit":
            state += "; best-fit plan kept"
    return finish(best, outcome, state)


# -- preparation -----------------------------------------------------------------


def overlapping_pairs(units: Sequence[Unit]) -> PairSizes:
    """Unit pairs with a rectangle each that live at the same time in one pool.

    A sweep over start/end events per pool: O(n log n + pairs). The sizes are
    the largest rectangle of each unit among the conflicting ones, which is
    what must clear the other unit when it is placed below it.
    """
    by_pool: dict[int, list[tuple[int, int, int, int]]] = defaultdict(list)
    for u in units:
        for r in u.rects:
            if r.size:  # a rectangle holding no bytes conflicts with nothing
                by_pool[r.pool].append((r.start, r.end, r.size, u.index))
    pairs: PairSizes = {}
    for rects in by_pool.values():
        live: set[int] = set()
        for _, is_start, k in timeline.events((start, end) for start, end, _, _ in rects):
            if not is_start:
                live.discard(k)
                continue
            _, _, size_k, unit_k = rects[k]
            for j in live:
                _, _, size_j, unit_j = rects[j]
                if unit_j == unit_k:
                    continue
                key, sizes = (
                    ((unit_j, unit_k), (size_j, size_k))
                    if unit_j < unit_k
                    else ((unit_k, unit_j), (size_k, size_j))
                )
                old = pairs.get(key, (0, 0))
                pairs[key] = (max(old[0], sizes[0]), max(old[1], sizes[1]))
            live.add(k)
    return pairs


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


TRUSTED_MAGNITUDE = 10**6
"""Largest scaled number (offset bound, big-M) at which a MILP proof is believed. CBC and HiGHS
accept a binary within 1e-6 of 0 or 1 as integral, which relaxes a big-M constraint by M * 1e-6
units: below this magnitude that is less than one unit, so a claimed optimum or infeasibility is
one of the integer model. Above it (byte coordinates near 2^40 that do not scale down) both were
measured claiming optima one byte above a reachable lower bound and infeasibility of problems
best-fit solves; the plan is still returned, marked not proven."""


ACCEPTED_MAGNITUDE = 10**15
"""Largest scaled number handed to a backend at all: HiGHS rejects matrix values above 1e15
(`large_matrix_value`) and drops those rows, after which PuLP cannot read its solution (measured with
sizes near 2^57); doubles also stop holding every integer soon after (2^53)."""


class _OutOfTime(Exception):
    """Building the model used up its share of the time limit."""


class _Model:
    """The PuLP problem in units of `divisor` bytes.

    Constraints are written as coefficient lists rather than PuLP expression
    arithmetic, which is several times faster on models with many pairs; the
    build checks `deadline` so a huge model cannot overrun the time limit.
    """

    def __init__(
        self,
        units: Sequence[Unit],
        pairs: PairSizes,
        bounds: dict[int, int],
        divisor: int,
        limits: dict[int, int],
        deadline: float,
    ) -> None:
        self.units, self.divisor = units, divisor
        g = divisor
        self.magnitude = max([0] + [limit // g for limit in limits.values()])
        self.lp = pulp.LpProblem("memplan", pulp.LpMinimize)
        self.arena = {
            pool: self.lp.add_variable(
                f"A{n}", lowBound=ceil_div(bounds[pool], g), upBound=limits[pool] // g, cat=pulp.LpInteger
            )
            for n, pool in enumerate(sorted(bounds))
        }
        self.lp += pulp.lpSum(self.arena.values())

        # x_u = step_u * k_u for a free unit, the constant fixed_u for a fixed one
        self.steps: dict[int, pulp.LpVariable] = {}
        terms: list[list[tuple[pulp.LpVariable, int]]] = []
        const: list[int] = []
        self.upper: list[int] = []  # highest scaled offset of each unit
        for u in units:
            if u.fixed is not None:
                terms.append([])
                const.append(u.fixed // g)
                self.upper.append(u.fixed // g)
                continue
            step = step_of(u, g)
            top = min(limits[r.pool] // g - r.size // g for r in u.rects) // step
            k = self.lp.add_variable(f"k{u.index}", lowBound=0, upBound=top, cat=pulp.LpInteger)
            self.steps[u.index] = k
            terms.append([(k, step)])
            const.append(0)
            self.upper.append(top * step)
        for u in units:
            for r in u.rects:  # A_p - x_u >= size
                arena_minus_offset = [(self.arena[r.pool], 1)] + _negated(terms[u.index])
                self._add(arena_minus_offset, pulp.LpConstraintGE, r.size // g + const[u.index])

        self.order: dict[tuple[int, int], pulp.LpVariable] = {}
        for n, ((i, j), (size_i, size_j)) in enumerate(pairs.items()):
            if n % 1000 == 0 and time.perf_counter() > deadline:
                raise _OutOfTime(f"{n} of {len(pairs)} order pairs built")
            if units[i].fixed is not None and units[j].fixed is not None:
                continue  # checked disjoint beforehand
            z = self.lp.add_variable(f"z{i}_{j}", cat=pulp.LpBinary)  # 1: i below j
            self.order[(i, j)] = z
            low_i = const[i] if units[i].fixed is not None else 0
            low_j = const[j] if units[j].fixed is not None else 0
            # x_i - x_j is a multiple of d, so a unit below the other takes its size rounded up to d
            d = math.gcd(step_of(units[i], g), step_of(units[j], g))
            si, sj = align_up(ceil_div(size_i, g), d), align_up(ceil_div(size_j, g), d)
            big_i, big_j = self.upper[i] + si - low_j, self.upper[j] + sj - low_i
            self.magnitude = max(self.magnitude, big_i, big_j)
            difference = terms[i] + _negated(terms[j])  # x_i - x_j without constants
            shift = const[i] - const[j]
            # x_i + s_i <= x_j + big_i (1 - z)
            self._add(difference + [(z, big_i)], pulp.LpConstraintLE, big_i - si - shift)
            # x_j + s_j <= x_i + big_j z
            self._add(_negated(difference) + [(z, -big_j)], pulp.LpConstraintLE, shift - sj)

    def _add(self, terms: list[tuple[pulp.LpVariable, int]], sense: int, rhs: int) -> None:
        self.lp.addConstraint(pulp.LpConstraint(pulp.LpAffineExpression(terms), sense, rhs=rhs))

    def set_start(self, unit_offsets: Sequence[int]) -> None:
        """Give every variable its value in a known valid plan."""
        g = self.divisor
        for index, k in self.steps.items():
            k.setInitialValue(unit_offsets[index] // g // step_of(self.units[index], g))
        for (i, j), z in self.order.items():
            z.setInitialValue(1 if unit_offsets[i] < unit_offsets[j] else 0)
        arenas = arena_of(self.units, unit_offsets)
        for pool, a in self.arena.items():
            a.setInitialValue(arenas.get(pool, 0) // g)

    def solve(self, solver: pulp.LpSolver, seconds: float) -> tuple[int, bool, int]:
        """(PuLP status, proven optimal, objective in bytes / divisor)."""
        warm = any(v.varValue is not None for v in self.lp.variables())
        solver.timeLimit = seconds
        if isinstance(solver, _HiGHS):
            solver.warm_start = warm
            status = self.lp.solve(solver)
        else:
            solver.optionsDict["warmStart"] = warm
            with tempfile.TemporaryDirectory(prefix="memplan-milp-") as scratch:
                solver.tmpDir = scratch  # CBC's model and solution files live and die here
                status = self.lp.solve(solver)
        proven = status == pulp.LpStatusOptimal and self.lp.sol_status == pulp.LpSolutionOptimal
        value = pulp.value(self.lp.objective)
        return status, proven, round(value) if value is not None else 0

    def doubt(self) -> str | None:
        """Why the solver's proofs cannot be believed for this model, or None."""
        if self.magnitude > TRUSTED_MAGNITUDE:
            return (
                f"the model's numbers reach {self.magnitude} units of {self.divisor} bytes, beyond the"
                f" {TRUSTED_MAGNITUDE} up to which the solver's tolerances cannot change the answer"
            )
        return None

    def integral_fault(self) -> str | None:
        """Whether the solver's values, rounded to integers, break the model (checked exactly), or None."""
        if any(v.varValue is None for v in self.lp.variables()):
            return "its solution is incomplete"
        value = {v.name: round(v.varValue) for v in self.lp.variables()}
        for v in self.lp.variables():
            if (v.lowBound is not None and value[v.name] < v.lowBound) or (
                v.upBound is not None and value[v.name] > v.upBound
            ):
                return f"its value {value[v.name]} of {v.name} is outside the variable's bounds"
        for c in self.lp.constraints():
            lhs = sum(int(coef) * value[v.name] for v, coef in c.items()) + round(c.constant)
            if (c.sense == pulp.LpConstraintLE and lhs > 0) or (c.sense == pulp.LpConstraintGE and lhs < 0):
                return f"its solution, rounded to integers, breaks constraint {c.name} (exact check)"
        objective = sum(int(coef) * value[v.name] for v, coef in self.lp.objective.items())
        if objective != round(pulp.value(self.lp.objective)):
            return f"its objective {pulp.value(self.lp.objective)} is not that of its rounded solution ({objective})"
        return None

    def has_solution(self) -> bool:
        return self.lp.sol_status in (pulp.LpSolutionOptimal, pulp.LpSolutionIntegerFeasible) and all(
            k.varValue is not None for k in self.steps.values()
        )

    def raw_offsets(self) -> list[float]:
        """Solver offsets in bytes, possibly off by solver tolerance."""
        return [
            u.fixed
            if u.fixed is not None
            else self.steps[u.index].varValue * step_of(u, self.divisor) * self.divisor
            for u in self.units
        ]


def _strict_gaps(options: dict[str, Any]) -> bool:
    """False when the caller loosened the gap, so 'optimal' from the solver means 'close enough'."""
    relative = max(options.get("gapRel") or 0.0, options.get("mip_rel_gap") or 0.0)
    absolute = max(options.get("gapAbs") or 0.0, options.get("mip_abs_gap") or 0.0)
    return relative == 0.0 and absolute < 1.0


def _negated(terms: list[tuple[pulp.LpVariable, int]]) -> list[tuple[pulp.LpVariable, int]]:
    return [(var, -coef) for var, coef in terms]


def _make_solver(backend: str, msg: bool, options: dict[str, Any]) -> pulp.LpSolver:
    """The PuLP solver, built first so that bad options fail before any work.

    Gaps: the objective is integral, so an absolute gap below 1 proves optimality
    (HiGHS's default relative gap of 1e-4 would not).
    """
    settings = {"msg": msg, "gapRel": 0.0, "gapAbs": 0.999} | options
    try:
        if backend == "cbc":
            extra = list(settings.pop("options", None) or [])
            if not any("preprocess" in str(o) for o in extra):
                extra.append(CBC_PREPROCESS)
            return pulp.COIN_CMD(path=pulp.PULP_CBC_CMD.pulp_cbc_path, options=extra, **settings)
        solver = _HiGHS(**settings)
    except TypeError as err:
        raise SolverOptionError(
            f"milp: backend {backend!r} does not accept the options {options}: {err}"
        ) from None
    solver.check_options()
    return solver


class _HiGHS(pulp.HiGHS):
    """PuLP's HiGHS with a warm start and without the one-time banner on stdout."""

    warm_start = False

    def check_options(self) -> None:
        """HiGHS ignores unknown option names silently; refuse them instead."""
        import highspy

        with _quiet_stdout(enabled=not self.msg):
            probe = highspy.Highs()
        probe.setOptionValue("output_flag", False)
        for key, value in self.optionsDict.items():
            if probe.setOptionValue(key, value) != highspy.HighsStatus.kOk:
                raise SolverOptionError(f"milp: HiGHS rejects the option {key}={value!r}")

    def createAndConfigureSolver(self, lp: pulp.LpProblem) -> None:
        import highspy

        if self.threads is not None:  # HiGHS refuses a thread count once its scheduler runs
            highspy.Highs.resetGlobalScheduler(True)
        with _quiet_stdout(enabled=not self.msg):
            super().createAndConfigureSolver(lp)

    def callSolver(self, lp: pulp.LpProblem) -> None:
        import highspy

        if self.warm_start:
            start = highspy.HighsSolution()
            columns = sorted(lp.variables(), key=lambda v: v.index)
            start.col_value = [float(v.varValue or 0) for v in columns]
            start.value_valid = True
            lp.solverModel.setSolution(start)
        super().callSolver(lp)
        failed = {
            highspy.HighsModelStatus.kLoadError,
            highspy.HighsModelStatus.kModelError,
            highspy.HighsModelStatus.kPresolveError,
            highspy.HighsModelStatus.kSolveError,
            highspy.HighsModelStatus.kPostsolveError,
            highspy.HighsModelStatus.kNotset,
        }
        outcome = lp.solverModel.getModelStatus()
        if outcome in failed:
            raise pulp.PulpSolverError(
                f"HiGHS status {lp.solverModel.modelStatusToString(outcome)}; rerun with msg=True for its log"
            )


@contextlib.contextmanager
def _quiet_stdout(enabled: bool) -> Iterator[None]:
    """Silence file descriptor 1: HiGHS prints its banner from C++ on construction."""
    if not enabled:
        yield
        return
    sys.stdout.flush()
    saved = os.dup(1)
    try:
        with open(os.devnull, "w") as devnull:
            os.dup2(devnull.fileno(), 1)
            yield
    finally:
        os.dup2(saved, 1)
        os.close(saved)


# -- from solver offsets to a valid plan ------------------------------------------


def settle(units: Sequence[Unit], pairs: PairSizes, raw: Sequence[float], divisor: int) -> list[int]:
    """Valid offsets that keep the vertical order of `raw` and are never higher.

    Units are placed bottom-up in the order of their raw offsets, each at the
    lowest aligned position above the units already placed below it that it
    lives with, and clear of fixed units. When `raw` is valid, every unit ends
    at or below its raw offset; when it is slightly off (solver tolerance), the
    result is still valid.
    """
    below: dict[int, list[tuple[int, int, int]]] = defaultdict(
        list
    )  # unit -> (other, own size, other's size)
    for (i, j), (size_i, size_j) in pairs.items():
        below[i].append((j, size_i, size_j))
        below[j].append((i, size_j, size_i))
    placed: dict[int, int] = {u.index: u.fixed for u in units if u.fixed is not None}
    free = sorted(
        (u for u in units if u.fixed is None), key=lambda u: (round(raw[u.index] / divisor), u.index)
    )
    for u in free:
        floor = 0
        fixed_blocks = []  # (bottom, top, bytes of u that must clear it)
        for other, own_size, other_size in below[u.index]:
            if other not in placed:
                continue
            if units[other].fixed is None:
                floor = max(floor, placed[other] + other_size)
            else:
                fixed_blocks.append((placed[other], placed[other] + other_size, own_size))
        x = align_up(floor, u.alignment)
        moved = True
        while moved:
            moved = False
            for lo, hi, own_size in fixed_blocks:
                if x < hi and lo < x + own_size:
                    x = align_up(hi, u.alignment)
                    moved = True
        placed[u.index] = x
    return [placed[u.index] for u in units]
