"""Searches over a `PlacementModel`: the skyline portfolio, and the ladder of probes that narrows the arena.

CP-SAT's default search proves small problems but rarely finds a plan
for tight ones (arena at the lower bound, the hard MiniMalloc benchmarks). What
does find them is a *skyline* search: repeatedly take the unit that can go
lowest (ties broken by a fixed order of the units) and put it as low as it
goes, which is MiniMalloc's canonical search with CP-SAT's propagation and
clause learning underneath. No single tie-break order wins everywhere, so a
portfolio of orders (`skyline_orders`) runs side by side, one single-worker
CP-SAT thread each, and the first decisive answer stops all.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import itertools
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from ortools.sat.python import cp_model

from memplan.solvers.cpsat.placement_model import PlacementModel, with_skyline_order
from memplan.solvers.exact import canonical
from memplan.solvers.units import arena_of

LADDER: tuple[tuple[str, float], ...] = (("between", 0.5), ("below", 0.01), ("below", 0.02))
"""The rungs of `Probes`' ladder, one per skyline order (cycled): ("between", f) asks
for a plan at the point f of [floor, top), and a time-out there raises the floor;
("below", f) asks for a plan f * top bytes below the top, and a time-out changes nothing."""

MIN_PROBE_SECONDS = 0.2
"""No probe is started with less time than this: it would end before its first dive."""

LOWER_BOUND_SHARE = 0.15
"""Share of the time left that the skyline portfolio gets to find a plan at the lower bound
when minimising (where it succeeds, it takes well under this); the ladder of probes
(`Probes`) takes the rest, and the default search minimises in whatever they leave.
More starves the ladder, less stops proving some plans at the bound (docs/exact_solver.md)."""


class Probes:
    """Skyline decision probes that narrow a pool's arena between a floor and the best plan's top.

    First every order asks for the lower bound together (`LOWER_BOUND_SHARE`
    of the time left), which is where most problems end. Then a ladder: one
    thread per order, each probing at its own rung (`LADDER`): one bisects
    [floor, top), the others ask for a little less than the best plan so far;
    the orders rotate over the rungs from one probe to the next. How long a
    skyline search takes is erratic (the same order can need a second at one
    capacity and time out at a looser one), so several capacities with
    several orders at once get further than bisecting with all orders at one
    capacity (docs/exact_solver.md). A plan found lowers the top and stops
    probes at or above it; a probe proven infeasible raises the proven floor
    and stops probes below it; a bisecting probe out of time raises the floor
    for later probes but, unless `timeout_stops_lower`, lets those running
    below it go on (under load those were the ones finding plans); a probe
    gets half the time left when it starts. Probes shorter than twice `overhead` (the seconds the model
    took to build, about what cloning and loading it costs again) are not
    started.
    """

    def __init__(
        self,
        model: PlacementModel,
        pool: int,
        skyline: SkylineSettings,
        ladder: Sequence[tuple[str, float]],
        workers: int,
        deadline: float,
        overhead: float,
        timeout_stops_lower: bool = False,
    ) -> None:
        self.model, self.pool, self.skyline, self.ladder, self.workers = model, pool, skyline, ladder, workers
        self.deadline, self.min_probe = deadline, max(2 * overhead, MIN_PROBE_SECONDS)
        self.timeout_stops_lower = timeout_stops_lower
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
            probe = decide(
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
        in_threads(self._climb, range(len(self.skyline.orders)))
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
            status = solver.Solve(with_skyline_order(self.model, order, {self.pool: cap}))
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
                    self._raise_floor(cap + self.g, stop_below=self.timeout_stops_lower)

    def _found(self, offsets: list[int], how: str) -> None:
        arena = sum(arena_of(self.model.units, offsets).values())
        if arena < self.top:
            self.best, self.top, self.how = offsets, arena, how
            self._stop(lambda cap: cap >= arena)

    def _raise_floor(self, floor: int, stop_below: bool = True) -> None:
        self.floor = max(self.floor, floor)
        if stop_below:
            self._stop(lambda cap: cap < self.floor)

    def _stop(self, moot: Callable[[int], bool]) -> None:
        """Stop the probes whose capacity no longer tells anything."""
        for slot, (solver, cap) in self.running.items():
            if moot(cap) and slot not in self.stopped:
                self.stopped.add(slot)
                solver.StopSearch()


@dataclasses.dataclass(frozen=True)
class SkylineSettings:
    """How skyline searches run: tie-break orders, CP-SAT's presolve (None: by size), logging, and
    the preorders of MiniMalloc's canonical search run beside the portfolio (solvers.exact.canonical;
    (): none)."""

    orders: tuple[str, ...]
    presolve: bool | None
    log: bool
    canonical: tuple[str, ...] = ()

    def solver(self, seconds: float) -> cp_model.CpSolver:
        """A single-worker solver that follows the model's decision strategy."""
        solver = new_solver(seconds, 1, self.log)
        solver.parameters.search_branching = cp_model.FIXED_SEARCH
        solver.parameters.cp_model_presolve = bool(self.presolve)
        return solver


@dataclasses.dataclass
class Decision:
    """What a decision run found: offsets of a plan, or a proof that none exists, or neither
    (not a plan's `memplan.plan.Outcome`: no plan is made here)."""

    offsets: list[int] | None = None
    infeasible: bool = False
    how: str = ""


def new_solver(seconds: float, workers: int, log: bool) -> cp_model.CpSolver:
    solver = cp_model.CpSolver()
    solver.parameters.max_time_in_seconds = max(seconds, 0.01)
    solver.parameters.num_workers = workers
    solver.parameters.log_search_progress = log
    return solver


def decide(
    model: PlacementModel,
    search: str,
    skyline: SkylineSettings,
    deadline: float,
    workers: int,
    hint: Sequence[int] | None,
) -> Decision:
    """Find any solution of `model` (no objective) before `deadline`, or prove there is none."""
    if search == "default":
        if hint is not None:
            model.hint(hint)
        solver = new_solver(deadline - time.perf_counter(), workers, skyline.log)
        status = solver.Solve(model.model)
        if status in (cp_model.OPTIMAL, cp_model.FEASIBLE):
            return Decision(model.offsets(solver), how="default search")
        return Decision(infeasible=status == cp_model.INFEASIBLE)
    return Portfolio(model, skyline, deadline).run()


class Portfolio:
    """Skyline searches with different tie-break orders, one thread each (CP-SAT releases the GIL),
    and on single-pool problems MiniMalloc's canonical search (solvers.exact.canonical) in one more.

    The first solution or infeasibility proof stops every thread (an exhausted canonical
    search proves nothing here: it only stops looking).
    """

    def __init__(self, model: PlacementModel, skyline: SkylineSettings, deadline: float) -> None:
        self.model, self.skyline, self.deadline = model, skyline, deadline
        self.lock = threading.Lock()
        self.done = False
        self.running: list[cp_model.CpSolver] = []
        self.decision = Decision()
        self.stop_canonical = threading.Event()

    def run(self) -> Decision:
        members: list[str | None] = list(self.skyline.orders)
        if self.skyline.canonical and canonical.applicable(self.model.units):
            members.insert(0, None)  # None: the canonical search
        in_threads(self._member, members)
        return self.decision

    def _member(self, order_name: str | None) -> None:
        if order_name is None:
            self._canonical()
        else:
            self._run(order_name)

    def _canonical(self) -> None:
        (capacity,) = self.model.limits.values()
        found = canonical.round_robin(
            self.model.units,
            capacity,
            self.skyline.canonical,
            deadline=self.deadline,
            stop=self.stop_canonical,
        )
        with self.lock:
            if self.done or found is None:
                return
            self.decision = Decision(found[1], how=f"canonical search, {found[0]} preorder")
            self.done = True
            for solver in self.running:
                solver.StopSearch()

    def _run(self, order_name: str) -> None:
        model = with_skyline_order(self.model, order_name)
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
                self.decision = Decision(infeasible=True, how=f"skyline search, {order_name} order")
            else:
                self.decision = Decision(
                    self.model.offsets(solver), how=f"skyline search, {order_name} order"
                )
            self.done = True
            self.stop_canonical.set()
            for other in self.running:
                if other is not solver:
                    other.StopSearch()


def in_threads(work: Callable[[Any], None], items: Sequence[Any]) -> None:
    """`work(item)` for every item, each in its own thread (CP-SAT releases the GIL); the
    first exception is raised here, so a failing search cannot silently weaken the result."""
    with concurrent.futures.ThreadPoolExecutor(max_workers=len(items)) as pool:
        for future in [pool.submit(work, item) for item in items]:
            future.result()
