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
from memplan.errors import InfeasibleError
from memplan.plan import Outcome, Plan
from memplan.problem import Problem
from memplan.solvers.bounds import check_capacity_reachable, pool_bounds
from memplan.solvers.cpsat_model import PlacementModel, arena_limits, with_skyline_order
from memplan.solvers.cpsat_search import SkylineSettings
from memplan.solvers.units import Unit, arena_of, make_plan, rank, units_of, within_capacity

LOWER_BOUND_SHARE = 0.25
"""Share of the budget left that the skyline searches at the lower bound get (the racing
solver's share, `cpsat_search.LOWER_BOUND_SHARE`, was tuned apart from this one)."""

DETERMINISTIC_PER_SECOND = 0.05
"""CP-SAT deterministic time per wall-clock second of search: the time limit is turned into a budget
of `time_limit_s * DETERMINISTIC_PER_SECOND` deterministic units. Measured on this project's 2-core
machine while shared (MiniMalloc D, single- and two-worker searches): 0.05 to 0.15 (the lower end is taken
so that a loaded machine stays near the limit); an idle or faster machine does the work in less time."""

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


def solve_reproducibly(
    problem: Problem,
    budget_s: float,
    *,
    num_workers: int,
    warm_start: bool,
    cumulative: bool,
    symmetry: bool,
    search: str,
    skyline: SkylineSettings,
    minimise: bool | None,
    log: bool,
) -> Plan:
    """Minimise the arena (or fit `problem.capacity`) with the deterministic work `budget_s` seconds stand for."""
    units = units_of(problem)
    bounds = pool_bounds(problem, units)
    lb_total = sum(bounds.values())
    capacity = problem.capacity
    minimise = capacity is None if minimise is None else minimise
    check_capacity_reachable("cpsat", capacity, bounds)
    budget = _Budget(budget_s * DETERMINISTIC_PER_SECOND)
    began = time.perf_counter()

    def finish(offsets: Sequence[int], proven: bool, status: str) -> Plan:
        if budget.capped:
            status += (
                f"; not reproducible: a search hit its wall-clock cap ({WALL_CAP_FACTOR:g} x its budget)"
            )
        seconds = time.perf_counter() - began
        if proven:
            outcome = Outcome.OPTIMAL
        elif status.startswith("feasible within capacity"):
            outcome = Outcome.FEASIBLE  # a decision answer
        else:
            outcome = Outcome.TIME_LIMIT  # the deterministic budget ran out
        return make_plan(
            problem, units, offsets, "cpsat", seconds, outcome, status + " [reproducible]", lb_total
        )

    if not units:
        return finish([], True, "optimal: nothing to place")
    heuristic = _heuristic(problem, units)
    fits = within_capacity(units, heuristic, capacity)
    if warm_start and fits:
        if sum(arena_of(units, heuristic).values()) == lb_total:
            return finish(heuristic, True, "optimal: heuristic equals lower bound")
        if not minimise:
            return finish(heuristic, False, f"feasible within capacity {capacity} (heuristic plan)")

    best = heuristic if fits else None
    model = PlacementModel(
        units,
        bounds,
        arena_limits(units, bounds, heuristic, capacity, best is not None),
        cumulative=cumulative,
        symmetry=symmetry,
        minimise=minimise,
    )
    how = "heuristic plan"
    if search != "default" and len(bounds) == 1:
        (pool,) = bounds
        g = model.divisor
        target = align_up(lb_total, g) if minimise or capacity is None else capacity // g * g
        found, infeasible, order = _skyline_in_turn(model, pool, target, skyline, budget, log)
        if found is not None:
            best, how = found, f"skyline search, {order} order"
            total = sum(arena_of(units, best).values())
            if total == lb_total:
                return finish(best, True, f"optimal: meets the lower bound ({how})")
            if not minimise:
                return finish(best, False, f"feasible within capacity {capacity} ({how})")
        elif infeasible and not minimise:
            raise InfeasibleError(
                f"cpsat: proven that no plan fits the capacity {capacity} bytes per pool"
                f" (lower bound per pool: {bounds})"
            )
        if search == "skyline":
            return _or_fail(finish, best, heuristic, capacity, "not proven: skyline searches only")
    if warm_start and best is not None:
        model.hint(best)
    solver = budget.solver(budget.left, num_workers, log)
    status = solver.Solve(model.model)
    budget.check(solver)
    if status == cp_model.INFEASIBLE:
        if capacity is None:
            raise RuntimeError("cpsat: model without capacity reported infeasible; this is a bug")
        raise InfeasibleError(
            f"cpsat: proven that no plan fits the capacity {capacity} bytes per pool"
            f" (lower bound per pool: {bounds})"
        )
    if status == cp_model.MODEL_INVALID:  # e.g. domains summing past int64: coordinates near 2^62
        return _or_fail(
            finish,
            best,
            heuristic,
            capacity,
            f"not proven: CP-SAT refuses the model ({model.model.validate()})",
        )
    found = model.offsets(solver) if status in (cp_model.OPTIMAL, cp_model.FEASIBLE) else None
    candidates = [(o, s) for o, s in ((found, "cpsat"), (best, how)) if o is not None]
    if not candidates:
        return _or_fail(finish, None, heuristic, capacity, "")
    chosen, source = min(candidates, key=lambda c: rank(units, c[0], capacity))
    total = sum(arena_of(units, chosen).values())
    if total == lb_total:
        return finish(chosen, True, "optimal: meets the lower bound")
    if status == cp_model.OPTIMAL and source == "cpsat":
        return finish(chosen, True, "optimal")
    if not minimise:
        return finish(chosen, False, f"feasible within capacity {capacity} ({source})")
    return finish(
        chosen, False, f"feasible, deterministic budget of {budget_s:.3g}s: not proven; {source} kept"
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
    from memplan.solvers import solve

    free = dataclasses.replace(problem, capacity=None)
    plans = [solve(free, "bestfit"), solve(free, "skyline")]
    best = min(plans, key=lambda plan: (plan.arena_size, plan.solver != "bestfit"))
    return [best.offsets[u.roots[0]] for u in units]


def _or_fail(finish, best, heuristic, capacity, status: str) -> Plan:
    """The best plan so far, or the heuristic's; with a capacity nothing met, `InfeasibleError`."""
    if best is not None:
        return finish(best, False, status)
    if capacity is None:
        return finish(heuristic, False, status or "not proven: heuristic plan")
    raise InfeasibleError(
        f"cpsat: no plan within capacity {capacity} found in the deterministic time budget"
        " (not proven infeasible)"
    )
