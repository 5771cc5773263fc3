"""Exact planning with OR-Tools CP-SAT.

Model, per pool p, in bytes divided by g (`scale_of`: the common divisor of
sizes and fixed offsets, reduced until each alignment divides it or is a
multiple of it; a capacity C becomes floor(C / g)):

    minimise   sum_p A_p                        A_p >= the pool's (aligned) lower bound
    subject to NoOverlap2D over the pool's rectangles: x = the fixed lifetime
               (times replaced by their rank), y = [y_u, y_u + size)
               y_u = step_u * k_u  (step = alignment / g), or y_u fixed
               A_p >= y_u + size   for every rectangle of unit u in p

Placement units (solvers.units) carry groups and same-offset sets: a unit with
several rectangles has one offset variable shared by all of them.

Search. CP-SAT's default search proves small problems but rarely finds a plan
for tight ones (arena at the lower bound, the hard MiniMalloc benchmarks). What
does find them is a *skyline* search: repeatedly take the unit that can go
lowest (ties broken by a fixed order of the units) and put it as low as it
goes, which is MiniMalloc's canonical search with CP-SAT's propagation and
clause learning underneath. No single tie-break order wins everywhere, so a
portfolio of orders (`skyline_orders`) runs side by side, one single-worker
CP-SAT thread each, and the first decisive answer stops all.

The heuristic plan is the better of best-fit's and the skyline placement's
(solvers.skyline, the same search without backtracking).

Minimising (`search="auto"`, single-pool problems or parts): if the heuristic
already meets the lower bound it is returned; otherwise the skyline portfolio
first asks for a plan at the lower bound (a quarter of the time), then a
ladder of skyline probes, one thread per order at different capacities
between the floor and the best plan found, closes in (`_Probes`), and the
default search minimises from the best plan in whatever time is left, which
is what proves optima above the bound when the probes could not.

Switchable helpers (options, all on by default, so a benchmark can show what each adds):

- `warm_start`: the heuristic plan is a hint and its arena an upper bound; if it
  already meets the lower bound it is returned at once as proven optimal.
- `cumulative`: a redundant Cumulative per pool (bytes live at once <= A_p).
- `symmetry`: identical free units that live together are ordered by offset.
- `decompose`: independent parts (solvers.decompose) are solved one by one.
- `search`: "auto", "skyline" (portfolio only) or "default" (CP-SAT's own).
- `skyline_heuristic`: the heuristic plan is the better of best-fit and skyline
  (False: best-fit only).
- `ladder`: the rungs of the minimising probes (`LADDER`); a single
  ("between", 0.5) rung is plain bisection with every order at one capacity.
- `skyline_presolve`: CP-SAT presolves the model before each skyline search
  (default None: only from `PRESOLVE_FROM_UNITS` units on; see there).

With `problem.capacity` the run is a decision problem: any plan within the
capacity is returned (not minimised unless `minimise=True`), and a proof that
none exists raises `InfeasibleError`.
"""

from __future__ import annotations

import concurrent.futures
import copy
import dataclasses
import itertools
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from typing import Any

from ortools.sat.python import cp_model

from memplan.planner.problem import InfeasibleError, Plan, Problem
from memplan.solvers.bounds import check_capacity_reachable, pool_bounds, scale_of, step_of
from memplan.solvers.units import Unit, arena_of, make_plan, rank, units_of, within_capacity

DEFAULT_TIME_LIMIT_S = 10.0
"""Wall-clock budget when the caller gives none: proves small and medium
problems, and keeps a sweep over many models short; pass more for hard ones."""

DEFAULT_WORKERS = 2
"""Workers of CP-SAT's default search; the machines this runs on have two cores.
The skyline portfolio runs one single-worker thread per order instead."""

SEARCHES = ("auto", "skyline", "default")

# Tie-break orders of the skyline search: sort key of a unit (smaller first).
SKYLINE_ORDERS: dict[str, Callable[[Unit], tuple]] = {
    "start": lambda u: (min(r.start for r in u.rects), -u.size, u.index),
    "length": lambda u: (-u.lifetime, -u.size, u.index),
    "start-area": lambda u: (min(r.start for r in u.rects), -u.area, u.index),
    "area": lambda u: (-u.area, u.index),
    "size": lambda u: (-u.size, -u.lifetime, u.index),
}
PORTFOLIO = ("start", "length", "start-area")
"""Orders run side by side by default: together they find plans for all eleven
MiniMalloc benchmarks at their capacity, none of them alone does."""

BUILD_SECONDS_PER_UNIT = 1e-4
"""Rough cost of building the model; with less time left than this per unit, the heuristic plan is returned."""

HEURISTIC_SHARE = 0.05
"""Time after which the skyline heuristic starts no further order (its first always runs)."""

LADDER: tuple[tuple[str, float], ...] = (("between", 0.5), ("below", 0.01), ("below", 0.03))
"""The rungs of `_Probes`' ladder, one per skyline order (cycled): ("between", f) asks
for a plan at the point f of [floor, top), and a time-out there raises the floor;
("below", f) asks for a plan f * top bytes below the top, and a time-out changes nothing."""

PRESOLVE_FROM_UNITS = 1000
"""Skyline searches presolve the model only from this many units on. Measured (experiments.bench_scale):
without presolve, MiniMalloc's D and J (213 and 409 units) minimised in 10 s reach 1,038,336 and
1,031,168 bytes instead of 1,088,512 and 1,063,936, and all 11 are decided at their capacity in 6.5 s
instead of 7.3 s; with it, a generated 10,000-buffer problem is proven at its lower bound in 15-22 s,
without it not in 60 s (3,000 buffers: 1.000001 x the bound with, 1.000005 without, in 30 s). The
threshold sits between those sizes; it is not a measured crossover."""

MIN_PROBE_SECONDS = 0.2
"""No probe is started with less time than this: it would end before its first dive."""

FINISH_SECONDS_PER_UNIT = 1e-5
"""Time kept back per unit for building and validating the plan after the search (1 s at 100,000)."""

LOWER_BOUND_SHARE = 0.25
"""Share of the time left that the skyline portfolio gets to find a plan at the lower bound
when minimising (where it succeeds, it takes well under this); the ladder of probes
(`_Probes`) takes the rest, and the default search minimises in whatever they leave."""


def solve_cpsat(
    problem: Problem,
    *,
    time_limit_s: float | None = None,
    num_workers: int = DEFAULT_WORKERS,
    warm_start: bool = True,
    cumulative: bool = True,
    symmetry: bool = True,
    decompose: bool = True,
    search: str = "auto",
    skyline_orders: Sequence[str] = PORTFOLIO,
    skyline_heuristic: bool = True,
    ladder: Sequence[tuple[str, float]] = LADDER,
    skyline_presolve: bool | None = None,
    minimise: bool | None = None,
    log: bool = False,
) -> Plan:
    """Minimise the summed arena, or find a plan within `problem.capacity`.

    `minimise` defaults to True without a capacity and False with one. On a
    time-out the best plan found is returned (never worse than the heuristic's) and
    `status` says it is not proven; `proven_optimal` is set only when CP-SAT
    proves optimality or the arena equals the lower bound.
    """
    if problem.banks:  # bank choice and offsets together: a model of its own
        from memplan.solvers.cpsat_banks import solve_cpsat_banks

        return solve_cpsat_banks(problem, time_limit_s=time_limit_s, num_workers=num_workers, log=log)
    limit = DEFAULT_TIME_LIMIT_S if time_limit_s is None else float(time_limit_s)
    if num_workers < 1:
        raise ValueError(f"cpsat: num_workers must be >= 1, got {num_workers}")
    if search not in SEARCHES:
        raise ValueError(f"cpsat: unknown search {search!r}; choose one of: {', '.join(SEARCHES)}")
    unknown = [o for o in skyline_orders if o not in SKYLINE_ORDERS]
    if unknown or not skyline_orders:
        raise ValueError(f"cpsat: unknown skyline orders {unknown}; choose from {', '.join(SKYLINE_ORDERS)}")
    bad_rungs = [r for r in ladder if len(r) != 2 or r[0] not in ("between", "below") or not 0 <= r[1] < 1]
    if bad_rungs or not ladder:
        raise ValueError(
            f"cpsat: bad ladder rungs {bad_rungs}; each is ('between' or 'below', fraction in [0, 1))"
        )
    settings = dict(
        num_workers=num_workers,
        warm_start=warm_start,
        cumulative=cumulative,
        symmetry=symmetry,
        search=search,
        skyline=_Skyline(tuple(skyline_orders), skyline_presolve, log),
        skyline_heuristic=skyline_heuristic,
        ladder=tuple(ladder),
        minimise=minimise,
        log=log,
    )
    if decompose:
        from memplan.solvers.decompose import solve_in_parts

        return solve_in_parts(
            problem,
            lambda part, seconds: _solve(part, seconds, **settings),
            time_limit_s=limit,
            solver="cpsat",
        )
    return _solve(problem, limit, **settings)


def _solve(
    problem: Problem,
    limit: float,
    *,
    num_workers: int,
    warm_start: bool,
    cumulative: bool,
    symmetry: bool,
    search: str,
    skyline: _Skyline,
    skyline_heuristic: bool,
    ladder: tuple[tuple[str, float], ...],
    minimise: bool | None,
    log: bool,
) -> Plan:
    began = time.perf_counter()
    deadline = began + limit
    units = units_of(problem)
    finishing = FINISH_SECONDS_PER_UNIT * len(units)
    if skyline.presolve is None:
        skyline = dataclasses.replace(skyline, presolve=len(units) >= PRESOLVE_FROM_UNITS)
    bounds = pool_bounds(problem, units)
    lb_total = sum(bounds.values())
    capacity = problem.capacity
    minimise = capacity is None if minimise is None else minimise
    check_capacity_reachable("cpsat", capacity, bounds)

    def finish(offsets: Sequence[int], proven: bool, status: str) -> Plan:
        return make_plan(
            problem, units, offsets, "cpsat", time.perf_counter() - began, proven, status, lb_total
        )

    if not units:
        return finish([], True, "optimal: nothing to place")
    heuristic = _heuristic_offsets(problem, units, limit * HEURISTIC_SHARE if skyline_heuristic else None)
    fits = within_capacity(units, heuristic, capacity)
    if warm_start and fits:
        if sum(arena_of(units, heuristic).values()) == lb_total:
            return finish(heuristic, True, "optimal: heuristic equals lower bound")
        if not minimise:
            return finish(heuristic, False, f"feasible within capacity {capacity} (heuristic plan)")

    if deadline - time.perf_counter() < BUILD_SECONDS_PER_UNIT * len(units):
        if not fits:
            raise InfeasibleError(
                f"cpsat: no plan within capacity {capacity} found in the time limit {limit:.3g}s (the heuristics"
                f" used it up; not proven infeasible; they need {max(arena_of(units, heuristic).values())} bytes)"
            )
        return finish(
            heuristic,
            False,
            f"not proven: the heuristics used up the time limit {limit:.3g}s; heuristic plan",
        )

    def build(limits: dict[int, int], objective: bool) -> _Model:
        return _Model(units, bounds, limits, cumulative=cumulative, symmetry=symmetry, minimise=objective)

    known = heuristic if (warm_start and fits) else None
    if not minimise:  # decision: any plan within the capacity
        limits = _limits(units, bounds, heuristic, capacity, False)
        outcome = _decide(build(limits, False), search, skyline, deadline, num_workers, known)
        if outcome.infeasible:
            raise InfeasibleError(
                f"cpsat: proven that no plan fits the capacity {capacity} bytes per pool"
                f" (lower bound per pool: {bounds})"
            )
        if outcome.offsets is None:
            if fits:
                return finish(heuristic, False, f"feasible within capacity {capacity} (heuristic plan)")
            raise InfeasibleError(
                f"cpsat: no plan within capacity {capacity} found in the time limit {limit:.3g}s"
                f" (not proven infeasible; the heuristic needs {max(arena_of(units, heuristic).values())} bytes)"
            )
        total = sum(arena_of(units, outcome.offsets).values())
        if total == lb_total:
            return finish(outcome.offsets, True, "optimal: meets the lower bound")
        return finish(outcome.offsets, False, f"feasible within capacity {capacity} ({outcome.how})")

    best = heuristic if fits else None
    built = time.perf_counter()
    model = build(_limits(units, bounds, heuristic, capacity, best is not None), True)  # built once
    overhead = time.perf_counter() - built  # a probe clones and loads a model as big: about as long
    # CP-SAT starts its clock after loading the model (about half the build time), and the
    # plan must still be built and validated: searches are told to stop by `stop`.
    stop = deadline - finishing - overhead / 2
    g = model.divisor
    floor, floor_proven = -(-lb_total // g) * g, True  # no plan below `floor` (proven, or none found)
    how = "heuristic plan"
    if search != "default" and len(bounds) == 1:
        (pool,) = bounds
        top = sum(arena_of(units, best).values()) if best is not None else capacity // g * g
        probes = _Probes(model, pool, skyline, ladder, num_workers, stop, overhead)
        best, top, floor, floor_proven, how = probes.descend(best, top, floor, how)
        if best is not None and top <= floor and floor_proven:
            if top == lb_total:
                return finish(best, True, f"optimal: meets the lower bound ({how})")
            return finish(
                best, True, f"optimal: skyline probes proved nothing fits below {top} bytes ({how})"
            )
        if search == "skyline" or stop - time.perf_counter() < probes.min_probe:
            return finish(
                best if best is not None else heuristic,
                False,
                f"not proven: skyline probes ({probes.count}) found {top} bytes, none found below {floor}",
            )
        model.bound(pool, floor if floor_proven else None, top)

    if floor_proven and len(bounds) == 1:  # the probes proved nothing fits below `floor`
        bounds = {pool: max(lb, floor) for pool, lb in bounds.items()}
    if warm_start and best is not None:
        model.hint(best)
    solver = _solver(max(stop - time.perf_counter(), 0.01), num_workers, log)
    status = solver.Solve(model.model)
    if status == cp_model.INFEASIBLE:
        if capacity is None:
            raise RuntimeError("cpsat: model without capacity reported infeasible; this is a bug")
        raise InfeasibleError(
            f"cpsat: proven that no plan fits the capacity {capacity} bytes per pool"
            f" (lower bound per pool: {bounds})"
        )
    if status == cp_model.MODEL_INVALID:
        raise RuntimeError(f"cpsat: invalid model ({model.model.Validate()}); this is a bug")
    found = model.offsets(solver) if status in (cp_model.OPTIMAL, cp_model.FEASIBLE) else None
    if found is None and best is None:
        raise InfeasibleError(
            f"cpsat: no plan within capacity {capacity} found in the time limit {limit:.3g}s"
            f" (not proven infeasible; the heuristic needs {max(arena_of(units, heuristic).values())} bytes)"
        )
    chosen, source = min(
        [(o, s) for o, s in ((found, "cpsat"), (best, how)) if o is not None],
        key=lambda c: rank(units, c[0], capacity),
    )
    total = sum(arena_of(units, chosen).values())
    if total == lb_total:
        return finish(chosen, True, "optimal: meets the lower bound")
    if total == sum(bounds.values()):
        return finish(chosen, True, "optimal: meets the bound the skyline probes proved")
    if status == cp_model.OPTIMAL and source == "cpsat":
        return finish(chosen, True, "optimal")
    bound = max(
        round(solver.BestObjectiveBound()) * model.divisor if found is not None else 0, sum(bounds.values())
    )
    text = f"feasible, time limit {limit:.3g}s: not proven (best bound {bound} bytes)"
    if source != "cpsat":
        text += f"; {source} kept"
    return finish(chosen, False, text)


class _Probes:
    """Skyline decision probes that narrow a pool's arena between a floor and the best plan's top.

    First every order asks for the lower bound together (`LOWER_BOUND_SHARE`
    of the time left), which is where most problems end. Then a ladder: one
    thread per order, each probing at its own rung (`LADDER`): one bisects
    [floor, top), the others ask for a little less than the best plan so far;
    the orders rotate over the rungs from one probe to the next. How long a
    skyline search takes is erratic (on MiniMalloc's J the same order needs
    1 s at one capacity and times out at a looser one), so several capacities
    with several orders at once get further than bisecting with all orders at
    one capacity (measured: experiments.bench_scale, minimise section). A plan
    found lowers the top and stops probes at or above it; a probe proven
    infeasible raises the proven floor; a probe gets half the time left when
    it starts. Probes shorter than twice `overhead` (the seconds the model
    took to build, about what cloning and loading it costs again) are not
    started.
    """

    def __init__(
        self,
        model: _Model,
        pool: int,
        skyline: _Skyline,
        ladder: Sequence[tuple[str, float]],
        workers: int,
        deadline: float,
        overhead: float,
    ) -> None:
        self.model, self.pool, self.skyline, self.ladder, self.workers = model, pool, skyline, ladder, workers
        self.deadline, self.min_probe = deadline, max(2 * overhead, MIN_PROBE_SECONDS)
        self.g = model.divisor
        self.count = 0
        self.lock = threading.Lock()
        self.running: dict[int, tuple[cp_model.CpSolver, int]] = {}  # slot -> (solver, cap)
        self.stopped: set[int] = set()

    def descend(
        self, best: list[int] | None, top: int, floor: int, how: str
    ) -> tuple[list[int] | None, int, int, bool, str]:
        """(best offsets, their arena, floor, whether the floor is proven, how the best was found)."""
        self.best, self.top, self.how = best, top, how
        self.floor = self.proven = floor  # probes search [floor, top); nothing fits below `proven`
        budget = (self.deadline - time.perf_counter()) * LOWER_BOUND_SHARE
        if floor < top and budget >= self.min_probe:
            probe = _decide(
                self.model.capped({self.pool: floor}),
                "skyline",
                self.skyline,
                time.perf_counter() + budget,
                self.workers,
                None,
            )
            self.count += 1
            if probe.offsets is not None:
                self._found(probe.offsets, probe.how)
            else:
                self.floor = floor + self.g
                if probe.infeasible:
                    self.proven = self.floor
        _in_threads(self._climb, range(len(self.skyline.orders)))
        return self.best, self.top, self.floor, self.proven >= self.floor, self.how

    def _climb(self, slot: int) -> None:
        """One rung of the ladder: probe at this slot's point of [floor, top) until nothing is left to try."""
        for turn in itertools.count():
            with self.lock:
                left = self.deadline - time.perf_counter()
                if self.floor >= self.top or left * 0.5 < self.min_probe:
                    return
                rung = self.ladder[slot % len(self.ladder)]
                if rung[0] == "between":  # a point of [floor, top)
                    cap = self.floor + int((self.top - self.floor) * rung[1])
                else:  # a step below the top
                    cap = self.top - max(self.g, int(self.top * rung[1]))
                cap = max(self.floor, cap // self.g * self.g)
                order = self.skyline.orders[(slot + turn) % len(self.skyline.orders)]
                solver = self.skyline.solver(left * 0.5)
                self.running[slot] = (solver, cap)
            status = solver.Solve(_with_skyline_order(self.model, order, {self.pool: cap}))
            with self.lock:
                del self.running[slot]
                stopped = slot in self.stopped
                self.stopped.discard(slot)
                self.count += 1
                if status in (cp_model.OPTIMAL, cp_model.FEASIBLE):
                    self._found(self.model.offsets(solver), f"skyline search, {order} order")
                elif status == cp_model.INFEASIBLE:
                    self.proven = max(self.proven, cap + self.g)
                    self._raise_floor(cap + self.g)
                elif (
                    not stopped and rung[0] == "between"
                ):  # out of time: search above this capacity from now on
                    self._raise_floor(cap + self.g)

    def _found(self, offsets: list[int], how: str) -> None:
        arena = sum(arena_of(self.model.units, offsets).values())
        if arena < self.top:
            self.best, self.top, self.how = offsets, arena, how
            self._stop(lambda cap: cap >= arena)

    def _raise_floor(self, floor: int) -> None:
        self.floor = max(self.floor, floor)
        self._stop(lambda cap: cap < self.floor)

    def _stop(self, moot: Callable[[int], bool]) -> None:
        """Stop the probes whose capacity no longer tells anything."""
        for slot, (solver, cap) in self.running.items():
            if moot(cap) and slot not in self.stopped:
                self.stopped.add(slot)
                solver.StopSearch()


@dataclasses.dataclass(frozen=True)
class _Skyline:
    """How skyline searches run: tie-break orders, CP-SAT's presolve (None: by size), logging."""

    orders: tuple[str, ...]
    presolve: bool | None
    log: bool

    def solver(self, seconds: float) -> cp_model.CpSolver:
        """A single-worker solver that follows the model's decision strategy."""
        solver = _solver(seconds, 1, self.log)
        solver.parameters.search_branching = cp_model.FIXED_SEARCH
        solver.parameters.cp_model_presolve = bool(self.presolve)
        return solver


@dataclasses.dataclass
class _Outcome:
    """What a decision run found: offsets of a plan, or a proof that none exists, or neither."""

    offsets: list[int] | None = None
    infeasible: bool = False
    how: str = ""


def _solver(seconds: float, workers: int, log: bool) -> cp_model.CpSolver:
    solver = cp_model.CpSolver()
    solver.parameters.max_time_in_seconds = max(seconds, 0.01)
    solver.parameters.num_workers = workers
    solver.parameters.log_search_progress = log
    return solver


def _decide(
    model: _Model,
    search: str,
    skyline: _Skyline,
    deadline: float,
    workers: int,
    hint: Sequence[int] | None,
) -> _Outcome:
    """Find any solution of `model` (no objective) before `deadline`, or prove there is none."""
    if search == "default":
        if hint is not None:
            model.hint(hint)
        solver = _solver(deadline - time.perf_counter(), workers, skyline.log)
        status = solver.Solve(model.model)
        if status in (cp_model.OPTIMAL, cp_model.FEASIBLE):
            return _Outcome(model.offsets(solver), how="default search")
        return _Outcome(infeasible=status == cp_model.INFEASIBLE)
    return _Portfolio(model, skyline, deadline).run()


class _Portfolio:
    """Skyline searches with different tie-break orders, one thread each (CP-SAT releases the GIL).

    The first solution or infeasibility proof stops every thread.
    """

    def __init__(self, model: _Model, skyline: _Skyline, deadline: float) -> None:
        self.model, self.skyline, self.deadline = model, skyline, deadline
        self.lock = threading.Lock()
        self.done = False
        self.running: list[cp_model.CpSolver] = []
        self.outcome = _Outcome()

    def run(self) -> _Outcome:
        _in_threads(self._run, self.skyline.orders)
        return self.outcome

    def _run(self, order_name: str) -> None:
        model = _with_skyline_order(self.model, order_name)
        solver = self.skyline.solver(self.deadline - time.perf_counter())
        with self.lock:
            if self.done:
                return
            self.running.append(solver)
        status = solver.Solve(model)
        with self.lock:
            if self.done or status not in (cp_model.OPTIMAL, cp_model.FEASIBLE, cp_model.INFEASIBLE):
                return
            if status == cp_model.INFEASIBLE:
                self.outcome = _Outcome(infeasible=True, how=f"skyline search, {order_name} order")
            else:
                self.outcome = _Outcome(self.model.offsets(solver), how=f"skyline search, {order_name} order")
            self.done = True
            for other in self.running:
                if other is not solver:
                    other.StopSearch()


def _in_threads(work: Callable[[Any], None], items: Sequence[Any]) -> None:
    """`work(item)` for every item, each in its own thread (CP-SAT releases the GIL); the
    first exception is raised here, so a failing search cannot silently weaken the result."""
    with concurrent.futures.ThreadPoolExecutor(max_workers=len(items)) as pool:
        for future in [pool.submit(work, item) for item in items]:
            future.result()


def _with_skyline_order(
    model: _Model, order_name: str, caps: dict[int, int] | None = None
) -> cp_model.CpModel:
    """A copy of the model (capped by `caps`, see `_Model.capped`) that searches by skyline:
    lowest offset first, ties in the named order. One clone: on big models each costs seconds."""
    copy_ = model.capped(caps).model if caps is not None else model.model.clone()
    order = sorted((u for u in model.units if u.index in model.y_var), key=SKYLINE_ORDERS[order_name])
    copy_.AddDecisionStrategy(
        [copy_.get_int_var_from_proto_index(model.y_var[u.index].index) for u in order],
        cp_model.CHOOSE_LOWEST_MIN,
        cp_model.SELECT_MIN_VALUE,
    )
    return copy_


def _heuristic_offsets(problem: Problem, units: Sequence[Unit], skyline_seconds: float | None) -> list[int]:
    """Unit offsets of the better of best-fit and (unless `skyline_seconds` is None) skyline,
    planned without the capacity so they always exist."""
    from memplan.solvers import solve

    free = dataclasses.replace(problem, capacity=None)
    plans = [solve(free, "bestfit")]
    if skyline_seconds is not None:
        plans.append(solve(free, "skyline", time_limit_s=skyline_seconds))
    best = min(plans, key=lambda plan: (plan.arena_size, plan.solver != "bestfit"))
    return [best.offsets[u.roots[0]] for u in units]


def _limits(
    units: Sequence[Unit],
    bounds: dict[int, int],
    heuristic: Sequence[int],
    capacity: int | None,
    use_heuristic: bool,
) -> dict[int, int]:
    """Largest arena each pool may take, in bytes.

    The capacity if there is one; with the heuristic, also its total minus the
    other pools' lower bounds (an optimum is never worse). Otherwise stacking
    every free unit above every fixed one is always possible (counted over all
    pools, since a unit with rectangles in several pools shares one offset).
    """
    fixed_top = max((u.fixed + u.size for u in units if u.fixed is not None), default=0)
    stacked = fixed_top + sum(u.size + u.alignment - 1 for u in units if u.fixed is None)
    limits = {pool: stacked if capacity is None else capacity for pool in bounds}
    if use_heuristic:
        total, lb_total = sum(arena_of(units, heuristic).values()), sum(bounds.values())
        for pool, lb in bounds.items():
            limits[pool] = min(limits[pool], total - (lb_total - lb))
    return limits


class _Model:
    """The CP-SAT model of one problem, in units of `divisor` bytes."""

    def __init__(
        self,
        units: Sequence[Unit],
        bounds: dict[int, int],
        limits: dict[int, int],
        *,
        cumulative: bool,
        symmetry: bool,
        minimise: bool,
    ) -> None:
        self.units = units
        self.divisor = g = scale_of(units)
        m = self.model = cp_model.CpModel()
        self.arena = {
            pool: m.NewIntVar(-(-bounds[pool] // g), limits[pool] // g, f"A{pool}") for pool in sorted(bounds)
        }
        rank = {
            t: i for i, t in enumerate(sorted({t for u in units for r in u.rects for t in (r.start, r.end)}))
        }

        self.k: dict[int, cp_model.IntVar] = {}
        self.y_var: dict[int, cp_model.IntVar] = {}  # scaled offset of each free unit
        self.y: list[cp_model.LinearExprT] = []
        for u in units:
            if u.fixed is not None:
                self.y.append(u.fixed // g)
                continue
            step = step_of(u, g)
            top = min(limits[r.pool] // g - r.size // g for r in u.rects) // step
            self.k[u.index] = k = m.NewIntVar(0, top, f"k{u.index}")  # top >= 0: limits >= bounds
            if step > 1:
                y = m.NewIntVar(0, top * step, f"y{u.index}")
                m.Add(y == step * k)
                k = y
            self.y_var[u.index] = k
            self.y.append(k)

        xs: dict[int, list] = defaultdict(list)
        ys: dict[int, list] = defaultdict(list)
        demands: dict[int, list[int]] = defaultdict(list)
        for u in units:
            for r in u.rects:
                size = r.size // g
                xs[r.pool].append(m.NewFixedSizeIntervalVar(rank[r.start], rank[r.end] - rank[r.start], ""))
                ys[r.pool].append(m.NewFixedSizeIntervalVar(self.y[u.index], size, ""))
                demands[r.pool].append(size)
                m.Add(self.arena[r.pool] >= self.y[u.index] + size)
        for pool in xs:
            if len(xs[pool]) > 1:
                m.AddNoOverlap2D(xs[pool], ys[pool])
                if cumulative:
                    m.AddCumulative(xs[pool], demands[pool], self.arena[pool])
        if symmetry:
            self._order_identical_units()
        if minimise:
            m.Minimize(sum(self.arena.values()))

    def _order_identical_units(self) -> None:
        """Free units with the same rectangles and alignment are interchangeable: order them."""
        same: dict[tuple, list[Unit]] = defaultdict(list)
        for u in self.units:
            if u.fixed is None:
                same[(tuple((r.pool, r.start, r.end, r.size) for r in u.rects), u.alignment)].append(u)
        for group in same.values():
            gap = max(r.size for r in group[0].rects) // self.divisor
            for a, b in zip(group, group[1:]):
                self.model.Add(self.y[a.index] + gap <= self.y[b.index])

    def capped(self, caps: dict[int, int]) -> _Model:
        """A copy without objective whose pools' arenas are at most `caps` bytes: a decision probe."""
        probe = copy.copy(self)
        probe.model = self.model.clone()
        probe.model.clear_objective()
        for pool, cap in caps.items():
            probe.model.Add(
                probe.model.get_int_var_from_proto_index(self.arena[pool].index) <= cap // self.divisor
            )
        return probe

    def bound(self, pool: int, low: int | None, high: int) -> None:
        """Narrow a pool's arena to [low, high] bytes (what probes proved and found)."""
        if low is not None:
            self.model.Add(self.arena[pool] >= -(-low // self.divisor))
        self.model.Add(self.arena[pool] <= high // self.divisor)

    def hint(self, unit_offsets: Sequence[int]) -> None:
        g = self.divisor
        for index, k in self.k.items():
            self.model.AddHint(k, unit_offsets[index] // (g * step_of(self.units[index], g)))
        for pool, size in arena_of(self.units, unit_offsets).items():
            self.model.AddHint(self.arena[pool], -(-size // g))

    def offsets(self, solver: cp_model.CpSolver) -> list[int]:
        """Unit offsets in bytes from the solver's best solution."""
        return [
            u.fixed
            if u.fixed is not None
            else solver.Value(self.k[u.index]) * step_of(u, self.divisor) * self.divisor
            for u in self.units
        ]
