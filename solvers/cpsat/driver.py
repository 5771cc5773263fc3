"""Exact planning with OR-Tools CP-SAT: the entry point `solve_cpsat` and its driver.

The model is built in `solvers.cpsat.placement_model`, the searches over it run in
`solvers.cpsat.searches`.

The heuristic plan is the better of best-fit's and the skyline placement's
(solvers.heuristics.skyline, the same search without backtracking).

Minimising (`_minimise`; `search="auto"`, single-pool problems or parts): if
the heuristic already meets the lower bound it is returned; otherwise
MiniMalloc's canonical search (solvers.exact.canonical) asks for the bound and
bisects down from the heuristic plan on a node budget, then the skyline
portfolio asks for a plan at the lower bound (`cpsat_search.LOWER_BOUND_SHARE`
of the time left), then a ladder of skyline probes, one thread per order at
different capacities between the floor and the best plan found, closes in
(`cpsat_search.Probes`), and the default search minimises from the best plan
in whatever time is left, which is what proves optima above the bound when
the probes could not.

Switchable helpers (options, all on by default, so a benchmark can show what each adds):

- `warm_start`: the heuristic plan is a hint and its arena an upper bound; if it
  already meets the lower bound it is returned at once as proven optimal.
- `cumulative`: a redundant Cumulative per pool (bytes live at once <= A_p).
- `symmetry`: identical free units that live together are ordered by offset.
- `decompose`: independent parts (solvers.exact.decompose) are solved one by one.
- `search`: "auto", "skyline" (portfolio only) or "default" (CP-SAT's own).
- `skyline_heuristic`: the heuristic plan is the better of best-fit and skyline
  (False: best-fit only).
- `ladder`: the rungs of the minimising probes (`LADDER`); a single
  ("between", 0.5) rung is plain bisection with every order at one capacity.
- `skyline_presolve`: CP-SAT presolves the model before each skyline search
  (default None: only from `PRESOLVE_FROM_UNITS` units on; see there).
- `canonical`, `canonical_head_start`, `canonical_descent`: MiniMalloc's
  canonical search (its preorders; nodes per unit alone before anything else in
  a decision; nodes per unit per bisection probe when minimising; 0: off).
- `canonical_in_portfolio` (default off): in decisions it also runs in a
  thread beside the skyline portfolio.
- `timeout_stops_lower` (default off): a bisecting probe out of time also stops
  the probes running below its capacity.
- `bound_seconds` (default 0: off): up to this many seconds (at most half the
  limit) go to `bounds_windows.window_lower_bounds` before the search; a
  stronger bound becomes the model's floor, the plan's `lower_bound` and a
  proof of optimality for a plan that meets it.

With `problem.capacity` the run is a decision problem (`_decide`): any plan
within the capacity is returned (not minimised unless `minimise=True`), and a
proof that none exists raises `InfeasibleError`. Why the tuning constants
below have their values, with the measurements: docs/exact_solver.md, "Tuning
constants".
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence
from dataclasses import dataclass

from ortools.sat.python import cp_model

from memplan.arith import align_up
from memplan.errors import InfeasibleError, SolverFailure
from memplan.peak_bound import lower_bounds
from memplan.plan import Outcome, Plan
from memplan.problem import Problem
from memplan.solvers.cpsat.params import CpsatParams
from memplan.solvers.cpsat.placement_model import PlacementModel, arena_limits
from memplan.solvers.cpsat.searches import Probes, SkylineSettings, decide, new_solver
from memplan.solvers.deadline import Deadline
from memplan.solvers.defaults import CPSAT_BUDGET_S, checked_time_limit
from memplan.solvers.exact import canonical
from memplan.solvers.exact.arena_bounds import check_capacity_reachable, pool_bounds
from memplan.solvers.heuristics.bestfit import ORDERINGS, bestfit_plan, solve_bestfit
from memplan.solvers.heuristics.skyline import SkylineParams, skyline_plan
from memplan.solvers.stages import stage
from memplan.solvers.units import Unit, arena_of, make_plan, planned_exactly, rank, units_of, within_capacity

BUILD_SECONDS_PER_UNIT = 1e-4
"""Rough cost of building the model; with less time left than this per unit, the heuristic plan is returned."""

HEURISTIC_SHARE = 0.05
"""Time after which the skyline heuristic starts no further order (its first always runs)."""

PRESOLVE_FROM_UNITS = 1000
"""Skyline searches presolve the model only from this many units on: without presolve the fixed
search finds tighter plans sooner on MiniMalloc's instances (about 200-450 units), with it a
generated 10,000-buffer problem is proven at its bound. The threshold sits between those sizes;
it is not a measured crossover."""

CANONICAL_DESCENT_SHARE = 0.5
"""Most of the time limit the canonical bisection may take (it normally ends well before)."""

FINISH_SECONDS_PER_UNIT = 1e-5
"""Time kept back per unit for building and validating the plan after the search (1 s at 100,000)."""


def solve_cpsat(
    problem: Problem, params: CpsatParams = CpsatParams(), *, time_limit_s: float | None = None
) -> Plan:
    """Minimise the summed arena, or find a plan within `problem.capacity`.

    `params.minimise` defaults to True without a capacity and False with one. On a
    time-out the best plan found is returned (never worse than the heuristic's) and
    its outcome says it is not proven; `proven_optimal` is set only when CP-SAT
    proves optimality or the arena equals the lower bound. `params.reproducible`
    makes the time limit a deterministic-time budget and the search free of
    races, so the same input gives the same plan (solvers.cpsat.reproducible).
    """
    time_limit_s = checked_time_limit("cpsat", time_limit_s)
    if problem.banks:  # bank choice and offsets together: a model of its own
        from memplan.solvers.cpsat.bank_choice import solve_cpsat_banks

        return solve_cpsat_banks(
            problem,
            time_limit_s=time_limit_s,
            num_workers=params.num_workers,
            log=params.log,
            reproducible=params.reproducible,
        )
    limit = CPSAT_BUDGET_S if time_limit_s is None else time_limit_s
    windowed: dict[int, int] = {}  # per pool, the window lower bound (solvers.cpsat.window_bounds)
    bound_spent = 0.0
    if params.bound_seconds:
        windowed, bound_spent = _window_bounds(problem, min(params.bound_seconds, limit / 2))
        limit = max(limit - bound_spent, 0.01)

    def solve_part(part: Problem, seconds: float) -> Plan:
        if not params.reproducible:
            return _solve(part, seconds, params, windowed if part is problem else {})
        from memplan.solvers.cpsat.reproducible import solve_reproducibly

        return solve_reproducibly(part, seconds, params)

    if params.decompose:
        from memplan.solvers.exact.decompose import solve_in_parts

        plan = solve_in_parts(
            problem, solve_part, time_limit_s=limit, solver="cpsat", fixed_shares=params.reproducible
        )
    else:
        plan = solve_part(problem, limit)
    return _with_bounds(plan, windowed, bound_spent)


def _window_bounds(problem: Problem, seconds: float) -> tuple[dict[int, int], float]:
    """Per pool, the window lower bound proven in `seconds` (stopping where best-fit's plan meets
    it), and the seconds it took.

    With a capacity below it, no plan fits: `InfeasibleError`, proven."""
    from memplan.solvers.cpsat.window_bounds import window_lower_bounds

    began = time.perf_counter()
    known = solve_bestfit(dataclasses.replace(problem, capacity=None)).arena_sizes
    found = window_lower_bounds(problem, max(seconds - (time.perf_counter() - began), 0.0), known=known)
    for pool, need in found.bounds.items():
        if problem.capacity is not None and need > problem.capacity:
            window = found.windows.get(pool)
            raise InfeasibleError(
                f"cpsat: pool {pool} needs at least {need} bytes, over the capacity {problem.capacity}"
                + (f" (proven on the buffers live in [{window[0]}, {window[1]}))" if window else ""),
                proven=True,
            )
    return found.bounds, time.perf_counter() - began


def _with_bounds(plan: Plan, bounds: dict[int, int], spent: float) -> Plan:
    """The plan with a stronger proven lower bound, and proven optimal if it meets it; its
    seconds include the `spent` on the bound."""
    total = sum(bounds.values())
    plan = dataclasses.replace(plan, seconds=plan.seconds + spent) if spent else plan
    if total <= plan.lower_bound:
        return plan
    if plan.arena_size < total:
        raise SolverFailure(
            f"cpsat: a valid plan of {plan.arena_size} bytes is below the window bound {total}"
        )
    if plan.proven_optimal or plan.arena_size > total:
        return dataclasses.replace(plan, lower_bound=total)
    return dataclasses.replace(
        plan,
        lower_bound=total,
        outcome=Outcome.OPTIMAL,
        status=f"optimal: meets the window lower bound ({plan.status})",
    )


@dataclass
class _Run:
    """One part as `_solve` plans it: its units and their lower bounds, the clock, and how a plan is made."""

    problem: Problem
    params: CpsatParams
    units: list[Unit]
    bounds: dict[int, int]  # per pool: the units' lower bound, or a stronger proven window bound
    lb_total: int  # sum of `bounds`: a plan this small is optimal
    skyline: SkylineSettings
    limit: float
    clock: Deadline  # started before the units are built: every stage after counts against the limit

    @classmethod
    def start(
        cls, problem: Problem, limit: float, params: CpsatParams, proven_bounds: dict[int, int]
    ) -> _Run:
        """The run's facts; `InfeasibleError` (proven) if a bound is already over the capacity."""
        skyline = SkylineSettings(
            params.skyline_orders,
            params.skyline_presolve,
            params.log,
            params.canonical if params.canonical_in_portfolio else (),
        )
        clock = Deadline(limit)
        with stage("units"):
            units = units_of(problem)
        if skyline.presolve is None:
            skyline = dataclasses.replace(skyline, presolve=len(units) >= PRESOLVE_FROM_UNITS)
        with stage("bounds"):
            bounds = {
                pool: max(lb, proven_bounds.get(pool, 0)) for pool, lb in pool_bounds(problem, units).items()
            }
        check_capacity_reachable("cpsat", problem.capacity, bounds)
        return cls(problem, params, units, bounds, sum(bounds.values()), skyline, limit, clock)

    @property
    def capacity(self) -> int | None:
        return self.problem.capacity

    @property
    def deadline(self) -> float:
        """The end of the limit as a `time.perf_counter()` reading (what the searches compare with)."""
        return time.perf_counter() + self.clock.left()

    @property
    def minimise(self) -> bool:
        return self.capacity is None if self.params.minimise is None else self.params.minimise

    def arena(self, offsets: Sequence[int]) -> int:
        """Bytes over all pools of the units at `offsets`."""
        return sum(arena_of(self.units, offsets).values())

    def model(self, limits: dict[int, int], objective: bool) -> PlacementModel:
        return PlacementModel(
            self.units,
            self.bounds,
            limits,
            cumulative=self.params.cumulative,
            symmetry=self.params.symmetry,
            minimise=objective,
        )

    def finish(
        self, offsets: Sequence[int], outcome: Outcome, status: str, proved: int | None = None
    ) -> Plan:
        """The plan, with `proved` (a bound the search proved about the units) as its lower bound
        where higher, and where the units hold exactly the problem's bytes (`planned_exactly`)."""
        bound = (
            self.lb_total
            if proved is None or not planned_exactly(self.problem)
            else max(self.lb_total, proved)
        )
        seconds = self.clock.spent()
        with stage("plan"):
            return make_plan(self.problem, self.units, offsets, "cpsat", seconds, outcome, status, bound)

    def proven_infeasible(self, bounds: dict[int, int]) -> InfeasibleError:
        return InfeasibleError(
            f"cpsat: proven that no plan fits the capacity {self.capacity} bytes per pool"
            f" (lower bound per pool: {bounds})",
            proven=True,
        )

    def none_found(self, heuristic: Sequence[int]) -> InfeasibleError:
        return InfeasibleError(
            f"cpsat: no plan within capacity {self.capacity} found in the time limit {self.limit:.3g}s"
            f" (not proven infeasible; the heuristic needs {max(arena_of(self.units, heuristic).values())} bytes)"
        )


@dataclass
class _Best:
    """Where minimising stands: the best plan (None: none fits yet), how it was found, and the
    floor below which none was found (`floor_proven`: none exists)."""

    offsets: list[int] | None
    how: str
    floor: int
    floor_proven: bool = True


def _solve(problem: Problem, limit: float, params: CpsatParams, proven_bounds: dict[int, int]) -> Plan:
    """One part: the heuristics (enough when they meet the bound or fit a decision), then
    `_decide` with a capacity and not minimising, `_minimise` otherwise."""
    run = _Run.start(problem, limit, params, proven_bounds)
    units, capacity = run.units, run.capacity
    if not units:
        return run.finish([], Outcome.OPTIMAL, "optimal: nothing to place")
    if not run.minimise and capacity is not None and params.search != "default":
        head = _canonical_head_start(
            units, capacity, params.canonical, params.canonical_head_start, run.deadline
        )
        if head is not None:
            code, offsets = head
            verdict = Outcome.OPTIMAL if run.arena(offsets) == run.lb_total else Outcome.FEASIBLE
            return run.finish(
                offsets, verdict, f"feasible within capacity {capacity} (canonical search, {code} preorder)"
            )
    with stage("heuristics", whole=True):
        heuristic = _heuristic_offsets(
            problem, units, run.clock.left(), limit * HEURISTIC_SHARE, params.skyline_heuristic
        )
    fits = within_capacity(units, heuristic, capacity)
    if params.warm_start and fits:
        if run.arena(heuristic) == run.lb_total:
            return run.finish(heuristic, Outcome.OPTIMAL, "optimal: heuristic equals lower bound")
        if not run.minimise:
            return run.finish(
                heuristic, Outcome.FEASIBLE, f"feasible within capacity {capacity} (heuristic plan)"
            )
    left, needed = run.deadline - time.perf_counter(), BUILD_SECONDS_PER_UNIT * len(units)
    if left < needed:
        short = (
            f"{max(left, 0.0):.3g} s of this part's {limit:.3g} s time limit were left after the heuristics,"
            f" less than building the exact model of {len(units):,} units takes (about {needed:.3g} s)"
        )
        if not fits:
            raise InfeasibleError(
                f"cpsat: no plan within capacity {capacity} found: {short}; not proven infeasible; the"
                f" heuristics need {max(arena_of(units, heuristic).values())} bytes"
            )
        return run.finish(heuristic, Outcome.TIME_LIMIT, f"not proven: {short}; heuristic plan")
    return _minimise(run, heuristic, fits) if run.minimise else _decide(run, heuristic, fits)


def _decide(run: _Run, heuristic: list[int], fits: bool) -> Plan:
    """Any plan within the capacity: the searches' (`cpsat_search.decide`), else the heuristic's
    if it fits; `InfeasibleError` when none is found (proven when the search proves it)."""
    params, capacity = run.params, run.capacity
    known = heuristic if (params.warm_start and fits) else None
    with stage("model"):
        model = run.model(arena_limits(run.units, run.bounds, heuristic, capacity, False), False)
    with stage("search"):
        found = decide(model, params.search, run.skyline, run.deadline, params.num_workers, known)
    if found.infeasible:
        raise run.proven_infeasible(run.bounds)
    if found.offsets is None:
        if fits:
            return run.finish(
                heuristic, Outcome.FEASIBLE, f"feasible within capacity {capacity} (heuristic plan)"
            )
        raise run.none_found(heuristic)
    if run.arena(found.offsets) == run.lb_total:
        return run.finish(found.offsets, Outcome.OPTIMAL, "optimal: meets the lower bound")
    return run.finish(found.offsets, Outcome.FEASIBLE, f"feasible within capacity {capacity} ({found.how})")


def _minimise(run: _Run, heuristic: list[int], fits: bool) -> Plan:
    """The smallest arena found in the time: on one pool the canonical descent and the skyline
    probes narrow it (`_narrow_one_pool`), then CP-SAT's own search minimises from the best plan."""
    best = heuristic if fits else None
    built = time.perf_counter()
    with stage("model"):
        model = run.model(
            arena_limits(run.units, run.bounds, heuristic, run.capacity, best is not None), True
        )
    overhead = time.perf_counter() - built  # a probe clones and loads a model as big: about as long
    # CP-SAT starts its clock after loading the model (about half the build time), and the
    # plan must still be built and validated: searches are told to stop by `stop`.
    stop = run.deadline - FINISH_SECONDS_PER_UNIT * len(run.units) - overhead / 2
    state = _Best(best, "heuristic plan", align_up(run.lb_total, model.divisor))  # nothing fits below
    bounds = run.bounds
    with stage("search"):
        if run.params.search != "default" and len(bounds) == 1:
            settled = _narrow_one_pool(run, model, state, heuristic, stop, overhead)
            if settled is not None:
                return settled
        if state.floor_proven and len(bounds) == 1:  # the probes proved nothing fits below the floor
            bounds = {pool: max(lb, state.floor) for pool, lb in bounds.items()}
        return _minimise_with_cpsat(run, model, bounds, state, heuristic, stop)


def _narrow_one_pool(
    run: _Run, model: PlacementModel, state: _Best, heuristic: list[int], stop: float, overhead: float
) -> Plan | None:
    """The canonical descent, then the skyline probes (`cpsat_search.Probes`), between the floor
    and the best plan. The plan when they settle it (proven, or no time for more); else None, with
    `state` narrowed and the model bounded to it."""
    params, units = run.params, run.units
    (pool,) = run.bounds
    g = model.divisor
    if state.offsets is not None:
        top = run.arena(state.offsets)
    else:  # no heuristic plan fits: there is a capacity
        assert run.capacity is not None
        top = run.capacity // g * g
    if params.canonical_descent and canonical.applicable(units):
        budget = min(stop, time.perf_counter() + run.limit * CANONICAL_DESCENT_SHARE)
        nodes = params.canonical_descent * len(units)
        head_start = params.canonical_head_start * len(units)
        descended = canonical.descend(units, top, state.floor, params.canonical, nodes, g, budget, head_start)
        if descended is not None:
            code, state.offsets, top = descended
            state.how = f"canonical search, {code} preorder"
    probes = Probes(
        model,
        pool,
        run.skyline,
        params.ladder,
        params.num_workers,
        stop,
        overhead,
        params.timeout_stops_lower,
    )
    state.offsets, top, state.floor, state.floor_proven, state.how = probes.descend(
        state.offsets, top, state.floor, state.how
    )
    best, floor, how = state.offsets, state.floor, state.how
    if best is not None and top <= floor and state.floor_proven:
        if top == run.lb_total:
            return run.finish(best, Outcome.OPTIMAL, f"optimal: meets the lower bound ({how})")
        return run.finish(
            best,
            Outcome.OPTIMAL,
            f"optimal: skyline probes proved nothing fits below {top} bytes ({how})",
            top,
        )
    if params.search == "skyline" or stop - time.perf_counter() < probes.min_probe:
        return run.finish(
            best if best is not None else heuristic,
            Outcome.TIME_LIMIT,
            f"not proven: skyline probes ({probes.count}) found {top} bytes, none found below {floor}",
            floor if state.floor_proven else None,
        )
    model.bound(pool, floor if state.floor_proven else None, top)
    return None


def _minimise_with_cpsat(
    run: _Run, model: PlacementModel, bounds: dict[int, int], state: _Best, heuristic: list[int], stop: float
) -> Plan:
    """CP-SAT's own search minimises from the best plan until `stop`; the better of its plan and
    the best so far, proven optimal when it meets a bound or CP-SAT proves it."""
    params, capacity = run.params, run.capacity
    if params.warm_start and state.offsets is not None:
        model.hint(state.offsets)
    solver = new_solver(max(stop - time.perf_counter(), 0.01), params.num_workers, params.log)
    status = solver.Solve(model.model)
    if status == cp_model.INFEASIBLE:
        if capacity is None:
            raise SolverFailure("cpsat: model without capacity reported infeasible; this is a bug")
        raise run.proven_infeasible(bounds)
    if status == cp_model.MODEL_INVALID:  # e.g. domains summing past int64: coordinates near 2^62
        reason = model.model.validate()
        if state.offsets is None:
            raise InfeasibleError(
                f"cpsat: no plan within capacity {capacity} found (not proven infeasible: CP-SAT refuses"
                f" the model: {reason})"
            )
        return run.finish(
            state.offsets,
            Outcome.NOT_PROVEN,
            f"not proven: CP-SAT refuses the model ({reason}); {state.how} kept",
        )
    found = model.offsets(solver) if status in (cp_model.OPTIMAL, cp_model.FEASIBLE) else None
    if found is None and state.offsets is None:
        raise run.none_found(heuristic)
    chosen, source = min(
        [(o, s) for o, s in ((found, "cpsat"), (state.offsets, state.how)) if o is not None],
        key=lambda c: rank(run.units, c[0], capacity),
    )
    total = run.arena(chosen)
    if total == run.lb_total:
        return run.finish(chosen, Outcome.OPTIMAL, "optimal: meets the lower bound")
    if total == sum(bounds.values()):
        return run.finish(
            chosen, Outcome.OPTIMAL, "optimal: meets the bound the skyline probes proved", total
        )
    if status == cp_model.OPTIMAL and source == "cpsat":
        return run.finish(chosen, Outcome.OPTIMAL, "optimal", total)
    bound = max(
        round(solver.BestObjectiveBound()) * model.divisor if found is not None else 0, sum(bounds.values())
    )
    text = f"feasible, time limit {run.limit:.3g}s: not proven (best bound {bound} bytes)"
    if source != "cpsat":
        text += f"; {source} kept"
    return run.finish(chosen, Outcome.TIME_LIMIT, text, bound)


def _canonical_head_start(
    units: Sequence[Unit], capacity: int, codes: Sequence[str], nodes_per_unit: int, deadline: float
) -> tuple[str, list[int]] | None:
    """MiniMalloc's canonical search under the first preorder, alone for `CANONICAL_HEAD_START`
    nodes per unit, before anything else runs (it can decide sooner than the heuristics run).
    (code, offsets) of its plan, or None."""
    if not codes or not nodes_per_unit or not canonical.applicable(units):
        return None
    found = canonical.search(
        units, capacity, codes[0], deadline=deadline, node_limit=nodes_per_unit * len(units)
    )
    return (codes[0], found.offsets) if found.offsets is not None else None


def _heuristic_offsets(
    problem: Problem, units: Sequence[Unit], left: float, skyline_seconds: float, skyline: bool
) -> list[int]:
    """Unit offsets of the better of best-fit (no new ordering after `left` seconds) and, with
    `skyline`, the skyline placement (within `skyline_seconds` of what is then left; cut off
    otherwise), planned without the capacity so they always exist."""
    deadline = Deadline(left)  # one for both, made first: what comes before them counts too
    # A new problem is checked buffer by buffer (seconds at a million): made only when there is a capacity.
    free = problem if problem.capacity is None else dataclasses.replace(problem, capacity=None)
    units = list(units)  # `units_of(free)`: the capacity plays no part in them
    bounds = lower_bounds(free)
    plans = [bestfit_plan(free, units, ORDERINGS, deadline, bounds)]  # its first ordering always runs
    if skyline and not deadline.passed():
        found = skyline_plan(
            free, SkylineParams().orders, Deadline(min(skyline_seconds, deadline.left())), units, bounds
        )
        plans += [found] if found is not None else []
    best = min(plans, key=lambda plan: (plan.arena_size, plan.solver != "bestfit"))
    return [best.offsets[u.roots[0]] for u in units]
