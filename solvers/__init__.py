"""Solvers chosen by name: a `Problem` in, a validated `Plan` out. No torch here.

Each registry entry (`solvers.contract.SolverEntry`) names a function
`solve_x(problem, params, *, time_limit_s) -> Plan`, its frozen parameter
dataclass, the problem features it honours and its fallbacks. Modules are
imported on first use, so asking for `bestfit` never imports OR-Tools or PuLP.
`solve` is the one way in: it refuses what the solver does not support, runs
it (with its fallbacks if asked), and validates the plan once.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from typing import Any

from memplan.planner.errors import SolverOptionError, UnknownSolverError
from memplan.planner.problem import InfeasibleError, Plan, Problem, check_plan
from memplan.solvers.contract import Capabilities, SolverEntry

DEFAULT_SOLVER = "cpsat"
"""What `PlannerPass` and `memplan plan` run when not told (CP-SAT, starting from best-fit's plan)."""

DEFAULT_TIME_LIMIT_S = 5.0
"""Seconds per method for `PlannerPass`, `memplan plan` and sweeps when not told."""

_EVERYTHING = Capabilities(fixed_offsets=True, groups=True, same_offsets=True, capacity=True)
_PLACEMENT = Capabilities(fixed_offsets=True, groups=True, same_offsets=True, capacity=False)

# The order is the order `available()` lists them in.
REGISTRY: dict[str, SolverEntry] = {
    entry.name: entry
    for entry in (
        SolverEntry(
            "greedy",
            "memplan.solvers.greedy:solve_greedy",
            "memplan.solvers.greedy:GreedyParams",
            Capabilities(fixed_offsets=False, groups=True, same_offsets=False, capacity=False),
        ),
        SolverEntry(
            "bestfit",
            "memplan.solvers.bestfit:solve_bestfit",
            "memplan.solvers.bestfit:BestfitParams",
            _PLACEMENT,
            fallback=("greedy",),
        ),
        SolverEntry(
            "skyline",
            "memplan.solvers.skyline:solve_skyline",
            "memplan.solvers.skyline:SkylineParams",
            _PLACEMENT,
        ),
        SolverEntry(
            "cpsat",
            "memplan.solvers.cpsat:solve_cpsat",
            "memplan.solvers.cpsat:CpsatParams",
            _EVERYTHING,
            fallback=("bestfit", "greedy"),
        ),
        SolverEntry(
            "milp",
            "memplan.solvers.milp:solve_milp",
            "memplan.solvers.milp:MilpParams",
            _EVERYTHING,
            fallback=("bestfit", "greedy"),
        ),
    )
}


def checked_time_limit(solver: str, time_limit_s: float | None) -> float | None:
    """`time_limit_s` as a float, or None; NaN, infinities, zero, negatives and non-numbers are refused.

    Checked before any work: a NaN limit would otherwise reach a solver's clock
    arithmetic and come back as a confusing failure deep inside it.
    """
    if time_limit_s is None:
        return None
    if isinstance(time_limit_s, bool) or not isinstance(time_limit_s, (int, float)):
        raise SolverOptionError(f"{solver}: time_limit_s must be a number of seconds, got {time_limit_s!r}")
    if not (math.isfinite(time_limit_s) and time_limit_s > 0):
        raise SolverOptionError(
            f"{solver}: time_limit_s must be a positive, finite number of seconds, got {time_limit_s!r}"
            " (None: the solver's default)"
        )
    return float(time_limit_s)


def available() -> list[str]:
    """Names accepted by `solve`."""
    return list(REGISTRY)


def entry(name: str) -> SolverEntry:
    """The registry entry of `name`; an unknown name raises `UnknownSolverError` listing the valid ones."""
    try:
        return REGISTRY[name]
    except KeyError:
        raise UnknownSolverError(
            f"unknown solver {name!r}; choose one of: {', '.join(available())}"
        ) from None


def get_solver(name: str) -> Callable[..., Plan]:
    """The solve function registered under `name`."""
    return entry(name).load()


def solve(
    problem: Problem,
    solver: str = "bestfit",
    time_limit_s: float | None = None,
    capacity: int | None = None,
    *,
    fallback: bool = False,
    params: Any = None,
    **options: Any,
) -> Plan:
    """Plan `problem` with the named solver and return a plan that passes `validate`.

    Options are the fields of the solver's parameter dataclass (or pass
    `params`, an instance of it). `capacity` (bytes per pool) turns the run
    into a decision problem: the plan must fit, or `InfeasibleError` is
    raised. `fallback=True` keeps the smallest of the solver's plan and its
    fallbacks' plans when the solver's is not proven optimal (`solvers.fallback`).
    """
    spec = entry(solver)
    time_limit_s = checked_time_limit(solver, time_limit_s)
    if capacity is not None:
        problem = dataclasses.replace(problem, capacity=capacity)
    if params is None:
        params = spec.make_params(options)
    elif options:
        raise SolverOptionError(f"{solver}: give either params or options {sorted(options)}, not both")
    if fallback:
        from memplan.solvers.fallback import solve_with_fallback

        plan = solve_with_fallback(problem, spec, params, time_limit_s)
    else:
        spec.check(problem, REGISTRY.values())
        plan = get_solver(solver)(problem, params, time_limit_s=time_limit_s)
    _check_capacity(problem, plan, solver)
    check_plan(problem, plan)
    return plan


def _check_capacity(problem: Problem, plan: Plan, solver: str) -> None:
    """Raise `InfeasibleError` naming the buffers above the capacity, if the plan does not fit."""
    if problem.capacity is None:
        return
    over = {p: s for p, s in plan.arena_sizes.items() if s > problem.capacity}
    if over:
        top = sorted(
            b.id for b in problem.buffers if b.pool in over and plan.offsets[b.id] + b.size > problem.capacity
        )
        raise InfeasibleError(
            f"{solver}: no plan within capacity {problem.capacity} found (best needs"
            f" {max(over.values())} bytes); buffers above the capacity: {', '.join(top[:10])}"
            + (" ..." if len(top) > 10 else ""),
            top,
        )


if __name__ != "memplan.solvers":  # pragma: no cover - only a wrong sys.path gets here
    raise ImportError(
        f"memplan's solvers/ directory was imported as {__name__!r}; it is the package"
        " memplan.solvers (install memplan with pip and import memplan.solvers)"
    )
