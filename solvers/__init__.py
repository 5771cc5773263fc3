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

from memplan.banks import place_in_banks
from memplan.bounds import lower_bound
from memplan.errors import (
    BankCapacityError,
    InfeasibleError,
    SolverOptionError,
    UnknownSolverError,
    UnsupportedProblemError,
)
from memplan.plan import Plan
from memplan.problem import Problem
from memplan.solvers.contract import Capabilities, SolverEntry
from memplan.solvers.units import planned_exactly
from memplan.validate import check_plan

DEFAULT_SOLVER = "cpsat"
"""What `PlannerPass` and `memplan plan` run when not told (CP-SAT, starting from best-fit's plan)."""

DEFAULT_TIME_LIMIT_S = 5.0
"""Seconds per method for `PlannerPass`, `memplan plan` and sweeps when not told."""

_PLACEMENT = Capabilities(fixed_offsets=True, groups=True, same_offsets=True, capacity=False)
_EXACT = Capabilities(fixed_offsets=True, groups=True, same_offsets=True, capacity=True)

# The order is the order `available()` lists them in.
REGISTRY: dict[str, SolverEntry] = {
    entry.name: entry
    for entry in (
        SolverEntry(
            "greedy",
            "memplan.solvers.greedy:solve_greedy",
            "memplan.solvers.greedy:GreedyParams",
            Capabilities(fixed_offsets=False, groups=True, same_offsets=False, capacity=False),
            banked="banked_greedy",
            reproducible="deterministic",
        ),
        SolverEntry(
            "bestfit",
            "memplan.solvers.bestfit:solve_bestfit",
            "memplan.solvers.bestfit:BestfitParams",
            _PLACEMENT,
            fallback=("greedy",),
            banked="banked_bestfit",
            reproducible="untimed",
        ),
        SolverEntry(
            "skyline",
            "memplan.solvers.skyline:solve_skyline",
            "memplan.solvers.skyline:SkylineParams",
            _PLACEMENT,
            reproducible="untimed",
        ),
        SolverEntry(
            "cpsat",
            "memplan.solvers.cpsat:solve_cpsat",
            "memplan.solvers.cpsat:CpsatParams",
            dataclasses.replace(_EXACT, banks=True),
            fallback=("bestfit", "greedy"),
            bank_fallback=("banked_bestfit",),
            reproducible="option",
        ),
        SolverEntry(
            "milp",
            "memplan.solvers.milp:solve_milp",
            "memplan.solvers.milp:MilpParams",
            _EXACT,
            fallback=("bestfit", "greedy"),
        ),
    )
}

# Solvers for problems with banks only (a memory map); `available(banks=True)` lists them.
BANK_ONLY: dict[str, SolverEntry] = {
    entry.name: entry
    for entry in (
        SolverEntry(
            "banked_greedy",
            "memplan.solvers.banked_greedy:solve_banked_greedy",
            "memplan.solvers.banked_greedy:BankedGreedyParams",
            Capabilities(fixed_offsets=True, groups=True, same_offsets=False, capacity=False, banks=True),
            reproducible="deterministic",
        ),
        SolverEntry(
            "banked_bestfit",
            "memplan.solvers.banked_bestfit:solve_banked_bestfit",
            "memplan.solvers.banked_bestfit:BankedBestfitParams",
            dataclasses.replace(_PLACEMENT, banks=True),
            reproducible="untimed",
        ),
    )
}

# Solvers that choose a bank for each buffer themselves. The others plan a problem with banks
# only when no buffer has a choice (every buffer in its pool, capacities checked afterwards).
BANK_SOLVERS: tuple[str, ...] = tuple(name for name, e in (BANK_ONLY | REGISTRY).items() if e.supports.banks)


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


def _reproducible() -> list[str]:
    return [name for name, e in (REGISTRY | BANK_ONLY).items() if e.reproducible]


def available(banks: bool = False) -> list[str]:
    """Names accepted by `solve`; with `banks`, the solvers that choose banks (for memory maps)."""
    return list(BANK_SOLVERS) if banks else list(REGISTRY)


def entry(name: str) -> SolverEntry:
    """The registry entry of `name`; an unknown name raises `UnknownSolverError` listing the valid ones."""
    found = REGISTRY.get(name) or BANK_ONLY.get(name)
    if found is None:
        raise UnknownSolverError(
            f"unknown solver {name!r}; choose one of: {', '.join(available())}"
            f" (for memory maps also {', '.join(BANK_ONLY)})"
        )
    return found


def get_solver(name: str) -> Callable[..., Plan]:
    """The solve function registered under `name`."""
    return entry(name).load()


def for_memory_map(name: str) -> SolverEntry:
    """The solver that plans for `name` under a memory map: itself or its banked counterpart;
    `UnsupportedProblemError` if neither chooses banks."""
    spec = entry(name)
    banked = entry(spec.banked) if spec.banked else spec
    if not banked.supports.banks:
        choices = ", ".join(n for n in BANK_SOLVERS)
        raise UnsupportedProblemError(
            f"{name} cannot plan across the banks of a memory map; use one of {choices}"
            " (greedy and bestfit stand for banked_greedy and banked_bestfit)",
            "banks",
        )
    return banked


def alternatives(problem: Problem) -> list[SolverEntry]:
    """The solvers an error about `problem` may suggest: the bank solvers for a problem with banks."""
    return [entry(name) for name in BANK_SOLVERS] if problem.banks else list(REGISTRY.values())


def prepared(problem: Problem, spec: SolverEntry) -> Problem:
    """What `spec` plans for `problem`: a problem with banks goes to a solver without bank choice
    placed in its banks (possible only when no buffer has a choice)."""
    if not problem.banks or spec.supports.banks:
        return problem
    if problem.has_bank_choice:
        raise UnsupportedProblemError(
            f"{spec.name} cannot choose banks, but buffers of this problem may go to several;"
            f" use one of {', '.join(sorted(BANK_SOLVERS))}",
            "banks",
        )
    return place_in_banks(problem, {})


def solve(
    problem: Problem,
    solver: str = "bestfit",
    time_limit_s: float | None = None,
    capacity: int | None = None,
    reproducible: bool = False,
    *,
    fallback: bool = False,
    params: Any = None,
    **options: Any,
) -> Plan:
    """Plan `problem` with the named solver and return a plan that passes `validate`.

    Options are the fields of the solver's parameter dataclass (or pass
    `params`, an instance of it). `capacity` (bytes per pool) turns the run
    into a decision problem: the plan must fit, or `InfeasibleError` is
    raised. A problem with banks must fit every bank, or `BankCapacityError`
    names the bank and the missing bytes; solvers outside `BANK_SOLVERS` plan
    it only if no buffer has a bank choice. `fallback=True` keeps the smallest
    of the solver's plan and its fallbacks' plans when the solver's is not
    proven optimal (`solvers.fallback`).
    `reproducible` asks for the same plan on every run of the same input and
    options, whatever the machine's load (`SolverEntry.reproducible` says how
    each solver gets there; milp, with only wall-clock limits, refuses).
    """
    spec = entry(solver)
    time_limit_s = checked_time_limit(solver, time_limit_s)
    if capacity is not None:
        problem = dataclasses.replace(problem, capacity=capacity)
    if params is None:
        params = spec.make_params(options)
    elif options:
        raise SolverOptionError(f"{solver}: give either params or options {sorted(options)}, not both")
    if reproducible:
        if not spec.reproducible:
            raise SolverOptionError(
                f"{solver}: no reproducible mode (its time limit is wall-clock time, so what it finds"
                f" depends on the machine's load); reproducible solvers: {', '.join(_reproducible())}"
            )
        if spec.reproducible == "untimed":
            time_limit_s = None
        elif spec.reproducible == "option":
            params = dataclasses.replace(params, reproducible=True)
    try:
        if fallback:
            from memplan.solvers.fallback import solve_with_fallback

            plan = solve_with_fallback(problem, spec, params, time_limit_s)
        else:
            target = prepared(problem, spec)
            spec.check(target, alternatives(target))
            plan = get_solver(solver)(target, params, time_limit_s=time_limit_s)
    except InfeasibleError as err:
        if not planned_exactly(problem) and "not proven" not in str(err):
            err.proven = False
            err.add_note(
                "not proven infeasible: gaps whose window starts above the offset were planned"
                " with the bytes below the window in use"
            )
        raise
    placed = place_in_banks(problem, plan.pools)
    check_banks_fit(solver, placed, plan)
    if plan.proven_optimal and plan.arena_size > lower_bound(placed) and not planned_exactly(problem):
        plan = dataclasses.replace(
            plan,
            proven_optimal=False,
            status=f"not proven: gaps whose window starts above the offset were planned with the bytes"
            f" below the window in use ({plan.status})",
        )
    _check_capacity(placed, plan, solver)
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


def check_banks_fit(solver: str, placed: Problem, plan: Plan) -> None:
    """Raise `BankCapacityError` for the first bank the plan overfills."""
    for bank in placed.banks:
        need = plan.arena_sizes.get(bank.pool, 0)
        if need > bank.capacity:
            top = sorted(
                b.id
                for b in placed.buffers
                if b.pool == bank.pool and plan.offsets.get(b.id, 0) + b.size > bank.capacity
            )
            raise BankCapacityError(
                f"{solver}: bank {bank.name!r} (pool {bank.pool}) needs {need} bytes but holds"
                f" {bank.capacity}: {need - bank.capacity} bytes missing; buffers above its capacity:"
                f" {', '.join(top[:10])}" + (" ..." if len(top) > 10 else ""),
                bank.name,
                need - bank.capacity,
                top,
            )


if __name__ != "memplan.solvers":  # pragma: no cover - only a wrong sys.path gets here
    raise ImportError(
        f"memplan's solvers/ directory was imported as {__name__!r}; it is the package"
        " memplan.solvers (install memplan with pip and import memplan.solvers)"
    )
