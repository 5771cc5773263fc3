"""Solvers chosen by name: a `Problem` in, a validated `Plan` out. No torch here.

Each solver is a function `solve_x(problem, *, time_limit_s, **options) -> Plan`
registered under a name. Modules are imported on first use, so asking for
`bestfit` never imports OR-Tools or PuLP.
"""

from __future__ import annotations

import dataclasses
import importlib
import math
from collections.abc import Callable
from typing import Any

from memplan.planner.problem import (
    BankCapacityError,
    InfeasibleError,
    Plan,
    Problem,
    ProblemError,
    SolverOptionError,
    UnsupportedProblemError,
    check_plan,
    lower_bound,
    place_in_banks,
)
from memplan.solvers.units import planned_exactly

# name -> "module:function"; the order is the order `available()` lists them in.
_REGISTRY: dict[str, str] = {
    "greedy": "memplan.solvers.greedy:solve_greedy",
    "bestfit": "memplan.solvers.bestfit:solve_bestfit",
    "skyline": "memplan.solvers.skyline:solve_skyline",
    "cpsat": "memplan.solvers.cpsat:solve_cpsat",
    "milp": "memplan.solvers.milp:solve_milp",
}

# Solvers for problems with banks only (a memory map); `available(banks=True)` lists them.
_BANK_ONLY: dict[str, str] = {
    "banked_greedy": "memplan.solvers.banked_greedy:solve_banked_greedy",
    "banked_bestfit": "memplan.solvers.banked_bestfit:solve_banked_bestfit",
}

# Solvers that choose a bank for each buffer themselves. The others plan a problem with banks
# only when no buffer has a choice (every buffer in its pool, capacities checked afterwards).
BANK_SOLVERS: tuple[str, ...] = ("banked_greedy", "banked_bestfit", "cpsat")


# How each solver is made reproducible (same problem and options -> same plan):
# "deterministic": it is already; "untimed": it runs every ordering, without a time cut;
# "option": it takes reproducible=True (a deterministic-time budget). Absent: it cannot be.
_REPRODUCIBLE: dict[str, str] = {
    "greedy": "deterministic",
    "bestfit": "untimed",
    "skyline": "untimed",
    "cpsat": "option",
    "banked_greedy": "deterministic",
    "banked_bestfit": "untimed",
}


class UnknownSolverError(ProblemError):
    """The solver name is not registered."""


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


def available(banks: bool = False) -> list[str]:
    """Names accepted by `solve`; with `banks`, the solvers that choose banks (for memory maps)."""
    return list(BANK_SOLVERS) if banks else list(_REGISTRY)


def get_solver(name: str) -> Callable[..., Plan]:
    """The solve function registered under `name`."""
    try:
        target = _REGISTRY.get(name) or _BANK_ONLY[name]
    except KeyError:
        raise UnknownSolverError(
            f"unknown solver {name!r}; choose one of: {', '.join(available())}"
            f" (for memory maps also {', '.join(_BANK_ONLY)})"
        ) from None
    module_name, func_name = target.split(":")
    return getattr(importlib.import_module(module_name), func_name)


def solve(
    problem: Problem,
    solver: str = "bestfit",
    time_limit_s: float | None = None,
    capacity: int | None = None,
    reproducible: bool = False,
    **options: Any,
) -> Plan:
    """Plan `problem` with the named solver and return a plan that passes `validate`.

    `capacity` (bytes per pool) turns the run into a decision problem: the plan
    must fit, or `InfeasibleError` is raised. A problem with banks must fit
    every bank, or `BankCapacityError` names the bank and the missing bytes;
    solvers outside `BANK_SOLVERS` plan it only if no buffer has a bank choice.
    `reproducible` asks for the same plan on every run of the same input and
    options, whatever the machine's load: heuristics then run every ordering,
    cpsat spends its time limit as deterministic time; milp (CBC and HiGHS
    have only wall-clock limits) refuses.
    """
    fn = get_solver(solver)
    time_limit_s = checked_time_limit(solver, time_limit_s)
    if reproducible:
        how = _REPRODUCIBLE.get(solver)
        if how is None:
            raise SolverOptionError(
                f"{solver}: no reproducible mode (its time limit is wall-clock time, so what it finds"
                f" depends on the machine's load); reproducible solvers: {', '.join(_REPRODUCIBLE)}"
            )
        if how == "untimed":
            time_limit_s = None
        elif how == "option":
            options["reproducible"] = True
    if capacity is not None:
        problem = dataclasses.replace(problem, capacity=capacity)
    target = problem
    if problem.banks and solver not in BANK_SOLVERS:
        if problem.has_bank_choice:
            raise UnsupportedProblemError(
                f"{solver} cannot choose banks, but buffers of this problem may go to several;"
                f" use one of {', '.join(sorted(BANK_SOLVERS))}"
            )
        target = place_in_banks(problem, {})
    try:
        plan = fn(target, time_limit_s=time_limit_s, **options)
    except InfeasibleError as err:
        if planned_exactly(problem) or "not proven" in str(err):
            raise
        raise InfeasibleError(
            f"{err} (not proven infeasible: gaps whose window starts above the offset were planned"
            " with the bytes below the window in use)",
            err.buffers,
        ) from None
    placed = place_in_banks(problem, plan.pools)
    _check_banks_fit(solver, placed, plan)
    if plan.proven_optimal and plan.arena_size > lower_bound(placed) and not planned_exactly(problem):
        plan = dataclasses.replace(
            plan,
            proven_optimal=False,
            status=f"not proven: gaps whose window starts above the offset were planned with the bytes"
            f" below the window in use ({plan.status})",
        )
    if problem.capacity is not None:
        over = {p: s for p, s in plan.arena_sizes.items() if s > problem.capacity}
        if over:
            top = sorted(
                b.id
                for b in placed.buffers
                if b.pool in over and plan.offsets[b.id] + b.size > problem.capacity
            )
            raise InfeasibleError(
                f"{solver}: no plan within capacity {problem.capacity} found (best needs"
                f" {max(over.values())} bytes); buffers above the capacity: {', '.join(top[:10])}"
                + (" ..." if len(top) > 10 else ""),
                top,
            )
    check_plan(problem, plan)
    return plan


def _check_banks_fit(solver: str, placed: Problem, plan: Plan) -> None:
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
