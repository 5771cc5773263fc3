"""CP-SAT in reproducible mode: the same problem and options give the same plan, run after run.

The normal search races threads against the wall clock (a portfolio whose
first answer stops the others, probes that stop each other, time shares taken
from the time left), so what it returns depends on the machine's load. Here
every step is deterministic:

- the heuristics run every ordering (no time cut);
- the time limit is turned into a budget of CP-SAT *deterministic* time
  (`max_deterministic_time`, `DETERMINISTIC_PER_SECOND` units per second),
  split by fixed shares, never by the wall clock;
- the skyline orders run one after the other, each single-worker, and the
  first decisive answer in order wins;
- the final search uses `num_workers` workers with CP-SAT's interleaved
  search (deterministic for a fixed worker count).

A wall-clock cap (`WALL_CAP_FACTOR` times the seconds a search's budget
stands for) guards against a machine much slower than the calibration; a
search stopped by it says so in the plan's status ("not reproducible"). The ladder of
probes is not used: it is made of races.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence

from ortools.sat.python import cp_model

from memplan.arith import align_up
from memplan.errors import InfeasibleError, SolverFailure
from memplan.plan import Outcome, Plan
from memplan.problem import Problem
from memplan.solvers.cpsat.params import CpsatParams
from memplan.solvers.cpsat.placement_model import PlacementModel, arena_limits, with_skyline_order
from memplan.solvers.cpsat.searches import SkylineSettings
from memplan.solvers.exact.arena_bounds import check_capacity_reachable, pool_bounds
from memplan.solvers.heuristics.bestfit import solve_bestfit
from memplan.solvers.heuristics.skyline import solve_skyline
from memplan.solvers.units import Unit, arena_of, make_plan, rank, units_of, within_capacity

LOWER_BOUND_SHARE = 0.25
"""Share of the budget left that the skyline searches at the lower bound get (the racing
solver's share, `cpsat_search.LOWER_BOUND_SHARE`, was tuned apart from this one)."""

DETERMINISTIC_PER_SECOND = 0.05
"""CP-SAT deterministic time per wall-clock second of search: the time limit is turned into a budget
of `time_limit_s * DETERMINISTIC_PER_SECOND` deterministic units: the lowest rate measured
(docs/exact_solver.md), so that a loaded machine stays near the limit; an idle or faster machine
does the work in less time."""

WALL_CAP_FACTOR = 3.0
"""A search may take this many times the wall-clock seconds its budget stands for (plus one)."""


@dataclasses.dataclass
class _Budget:
    """Deterministic seconds left, and whether a wall-clock cap cut a search short."""

    left: float
    capped: bool = False

    def solver(self, units: float, workers: int, log: bool) -> cp_model.CpSolver:
        """A solver allowed `units` of the deterministic budget (at most what is left)."""
        units = max(min(units, self.left), 0.001)
        self.left -= units
        solver = cp_model.CpSolver()
        solver.parameters.max_deterministic_time = units
        solver.parameters.max_time_in_seconds = WALL_CAP_FACTOR * units / DETERMINISTIC_PER_SECOND + 1.0
        solver.parameters.num_workers = workers
        solver.parameters.interleave_search = workers > 1
        solver.parameters.random_seed = 0
        solver.parameters.log_search_progress = log
        return solver

    def check(self, solver: cp_model.CpSolver) -> None:
        if solver.WallTime() >= solver.parameters.max_time_in_seconds * 0.99:
            self.capped = True


@dataclasses.dataclass
class _Run:
    """One part as `solve_reproducibly` plans it: its units and bounds, the budget, how a plan is made."""

    problem: Problem
    params: CpsatParams
    units: list[Unit]
    bounds: dict[int, int]
    budget_s: float
    budget: _Budget
    began: float

    @property
    def capacity(self) -> int | None:
        return self.problem.capacity

    @property
    def lb_total(self) -> int:
        return sum(self.bounds.values())

    @property
    def minimise(self) -> bool:
        return self.capacity is None if self.params.minimise is None else self.params.minimise

    def arena(self, offsets: Sequence[int]) -> int:
        return sum(arena_of(self.units, offsets).values())

    def finish(self, offsets: Sequence[int], outcome: Outcome, status: str) -> Plan:
        if self.budget.capped:
            status += (
                f"; not reproducible: a search hit its wall-clock cap ({WALL_CAP_FACTOR:g} x its budget)"
            )
        seconds = time.perf_counter() - self.began
        status += " [reproducible]"
        return make_plan(self.problem, self.units, offsets, "cpsat", seconds, outcome, status, self.lb_total)

    def proven_infeasible(self) -> InfeasibleError:
        return InfeasibleError(
            f"cpsat: proven that no plan fits the capacity {self.capacity} bytes per pool"
            f" (lower bound per pool: {self.bounds})",
            proven=True,
        )

    def or_fail(
        self,
        best: Sequence[int] | None,
        heuristic: Sequence[int],
        status: str,
        outcome: Outcome = Outcome.TIME_LIMIT,
    ) -> Plan:
        """The best plan so far, or the heuristic's, as `outcome` (by default: the budget ran out);
        with a capacity nothing met, `InfeasibleError`."""
        if best is not None:
            return self.finish(best, outcome, status)
        if self.capacity is None:
            return self.finish(heuristic, outcome, status or "not proven: heuristic plan")
        raise InfeasibleError(
            f"cpsat: no plan within capacity {self.capacity} found in the deterministic time budget"
            " (not proven infeasible)"
        )


def solve_reproducibly(problem: Problem, budget_s: float, params: CpsatParams) -> Plan:
    """Minimise the arena (or fit `problem.capacity`) with the deterministic work `budget_s` seconds stand for.

    Of `params` this honours `num_workers`, `warm_start`, `cumulative`, `symmetry`, `search`,
    `skyline_orders`, `skyline_presolve` (None: off), `minimise` and `log`; the races (ladder,
    canonical search) are not run. The heuristics, then the skyline searches at the target, then
    CP-SAT's own search (`_search_on`).
    """
    units = units_of(problem)
    bounds = pool_bounds(problem, units)
    check_capacity_reachable("cpsat", problem.capacity, bounds)
    budget = _Budget(budget_s * DETERMINISTIC_PER_SECOND)
    run = _Run(problem, params, units, bounds, budget_s, budget, time.perf_counter())
    capacity, lb_total = run.capacity, run.lb_total
    if not units:
        return run.finish([], Outcome.OPTIMAL, "optimal: nothing to place")
    heuristic = _heuristic(problem, units)
    fits = within_capacity(units, heuristic, capacity)
    if params.warm_start and fits:
        if run.arena(heuristic) == lb_total:
            return run.finish(heuristic, Outcome.OPTIMAL, "optimal: heuristic equals lower bound")
        if not run.minimise:
            return run.finish(
                heuristic, Outcome.FEASIBLE, f"feasible within capacity {capacity} (heuristic plan)"
            )

    best = heuristic if fits else None
    limits = arena_limits(units, bounds, heuristic, capacity, best is not None)
    model = PlacementModel(
        units, bounds, limits, cumulative=params.cumulative, symmetry=params.symmetry, minimise=run.minimise
    )
    how = "heuristic plan"
    if params.search != "default" and len(bounds) == 1:
        (pool,) = bounds
        g = model.divisor
        target = align_up(lb_total, g) if run.minimise or capacity is None else capacity // g * g
        skyline = SkylineSettings(params.skyline_orders, params.skyline_presolve, params.log)
        found, infeasible, order = _skyline_in_turn(model, pool, target, skyline, budget, params.log)
        if found is not None:
            best, how = found, f"skyline search, {order} order"
            if run.arena(best) == lb_total:
                return run.finish(best, Outcome.OPTIMAL, f"optimal: meets the lower bound ({how})")
            if not run.minimise:
                return run.finish(best, Outcome.FEASIBLE, f"feasible within capacity {capacity} ({how})")
        elif infeasible and not run.minimise:
            raise run.proven_infeasible()
        if params.search == "skyline":
            return run.or_fail(best, heuristic, "not proven: skyline searches only")
    return _search_on(run, model, heuristic, best, how)


def _search_on(
    run: _Run, model: PlacementModel, heuristic: list[int], best: list[int] | None, how: str
) -> Plan:
    """CP-SAT's own search with the budget left, from the best plan so far; the better of the two."""
    params, capacity = run.params, run.capacity
    if params.warm_start and best is not None:
        model.hint(best)
    solver = run.budget.solver(run.budget.left, params.num_workers, params.log)
    status = solver.Solve(model.model)
    run.budget.check(solver)
    if status == cp_model.INFEASIBLE:
        if capacity is None:
            raise SolverFailure("cpsat: model without capacity reported infeasible; this is a bug")
        raise run.proven_infeasible()
    if status == cp_model.MODEL_INVALID:  # e.g. domains summing past int64: coordinates near 2^62
        reason = model.model.validate()
        return run.or_fail(
            best, heuristic, f"not proven: CP-SAT refuses the model ({reason})", Outcome.NOT_PROVEN
        )
    found = model.offsets(solver) if status in (cp_model.OPTIMAL, cp_model.FEASIBLE) else None
    candidates = [(o, s) for o, s in ((found, "cpsat"), (best, how)) if o is not None]
    if not candidates:
        return run.or_fail(None, heuristic, "")
    chosen, source = min(candidates, key=lambda c: rank(run.units, c[0], capacity))
    if run.arena(chosen) == run.lb_total:
        return run.finish(chosen, Outcome.OPTIMAL, "optimal: meets the lower bound")
    if status == cp_model.OPTIMAL and source == "cpsat":
        return run.finish(chosen, Outcome.OPTIMAL, "optimal")
    if not run.minimise:
        return run.finish(chosen, Outcome.FEASIBLE, f"feasible within capacity {capacity} ({source})")
    return run.finish(
        chosen,
        Outcome.TIME_LIMIT,
        f"feasible, deterministic budget of {run.budget_s:.3g}s: not proven; {source} kept",
    )


def _skyline_in_turn(
    model: PlacementModel,
    pool: int,
    target: int,
    skyline: SkylineSettings,
    budget: _Budget,
    log: bool,
) -> tuple[list[int] | None, bool, str]:
    """Skyline searches for a plan within `target` bytes, order after order: (offsets, infeasible, order)."""
    seconds = budget.left * LOWER_BOUND_SHARE / len(skyline.orders)
    for order in skyline.orders:
        solver = budget.solver(seconds, 1, log)
        solver.parameters.search_branching = cp_model.FIXED_SEARCH
        solver.parameters.cp_model_presolve = bool(skyline.presolve)
        status = solver.Solve(with_skyline_order(model, order, {pool: target}))
        budget.check(solver)
        if status in (cp_model.OPTIMAL, cp_model.FEASIBLE):
            return model.offsets(solver), False, order
        if status == cp_model.INFEASIBLE:
            return None, True, order
    return None, False, ""


def _heuristic(problem: Problem, units: Sequence[Unit]) -> list[int]:
    """The better of best-fit's and skyline's plans with every ordering (no time cut), without the capacity."""
    free = dataclasses.replace(problem, capacity=None)
    plans = [solve_bestfit(free), solve_skyline(free)]
    best = min(plans, key=lambda plan: (plan.arena_size, plan.solver != "bestfit"))
    return [best.offsets[u.roots[0]] for u in units]
