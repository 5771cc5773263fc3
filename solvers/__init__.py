"""Solvers chosen by name: a `Problem` in, a validated `Plan` out. No torch here.

Each registry entry (`solvers.registry`, contract in `solvers.contract`) names a
function `solve_x(problem, params, *, time_limit_s) -> Plan`, its frozen
parameter dataclass, the problem features it honours and its fallbacks (entries
themselves). Modules are imported on first use, so asking for `bestfit` never
imports OR-Tools or PuLP. `solve` is the one way in: it refuses what the solver
does not support, runs it (with its fallbacks if asked: `solvers.fallback`),
and validates the plan once. The defaults every entry point shares live in
`solvers.defaults`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from memplan.bank_placement import place_in_banks
from memplan.errors import InfeasibleError, SolverOptionError, UnknownSolverError, UnsupportedProblemError
from memplan.plan import Plan
from memplan.problem import Problem
from memplan.solvers.contract import Form, SolverEntry
from memplan.solvers.defaults import (
    DEFAULT_ALIGNMENT,
    DEFAULT_SOLVER,
    DEFAULT_TIME_LIMIT_S,
    checked_time_limit,
)
from memplan.solvers.fits import check_banks_fit, check_capacity
from memplan.solvers.registry import (
    SOLVERS,
    alternatives,
    available,
    entry,
    for_memory_map,
    makes_shared_objects,
    prepared,
    reproducible_solvers,
)
from memplan.solvers.stages import StageLog, in_words, opened, stage
from memplan.solvers.units import shared_units, unit_proof_caveat, without_unit_proof
from memplan.validate import check_plan

__all__ = [
    "DEFAULT_ALIGNMENT",
    "DEFAULT_SOLVER",
    "DEFAULT_TIME_LIMIT_S",
    "SOLVERS",
    "Form",
    "UnknownSolverError",
    "UnsupportedProblemError",
    "alternatives",
    "available",
    "check_banks_fit",
    "checked_time_limit",
    "entry",
    "for_memory_map",
    "get_solver",
    "makes_shared_objects",
    "prepared",
    "solve",
]


def get_solver(name: str) -> Callable[..., Plan]:
    """The solve function registered under `name`."""
    return entry(name).load()


def solve(
    problem: Problem,
    solver: str = DEFAULT_SOLVER,
    time_limit_s: float | None = None,
    capacity: int | None = None,
    reproducible: bool = False,
    *,
    fallback: bool = False,
    params: Any = None,
    **options: Any,
) -> Plan:
    """Plan `problem` with the named solver (`DEFAULT_SOLVER` when not told) and return a plan that
    passes `validate`.

    `time_limit_s=None` leaves the solver its own budget. Options are the
    fields of the solver's parameter dataclass (or pass `params`, an instance
    of it). `capacity` (bytes per pool) turns the run into a decision problem:
    the plan must fit, or `InfeasibleError` is raised. A problem with banks
    must fit every bank, or `BankCapacityError` names the bank and the missing
    bytes; solvers outside `available(banks=True)` plan it only if no buffer has a bank
    choice. `fallback=True` runs the solver with its fallbacks
    (`solvers.fallback.WithFallback`): the smallest of their plans when the
    solver's is not proven optimal.
    `reproducible` asks for the same plan on every run of the same input and
    options, whatever the machine's load (`SolverEntry.reproducible` says how
    each solver gets there; milp, with only wall-clock limits, refuses).
    The time limit counts from this call to the validated plan: a plan that
    ran past it says by how much and in which stages (`Plan.seconds_over_limit`,
    `Plan.over_limit_stages`, and its status; `solvers.stages`), except in
    reproducible runs, whose limit is a budget of work, not of seconds.
    """
    spec = entry(solver)
    time_limit_s = checked_time_limit(solver, time_limit_s)
    log = StageLog(time_limit_s)
    if capacity is not None:
        problem = dataclasses.replace(problem, capacity=capacity)
    with opened(log), shared_units():
        with stage("loading the solver"):
            if params is None:
                params = spec.make_params(options)
            elif options:
                raise SolverOptionError(
                    f"{solver}: give either params or options {sorted(options)}, not both"
                )
            spec.load()
        if reproducible:
            log.limit_s = None  # the same plan, status included, whatever the machine's load
            if not spec.reproducible:
                raise SolverOptionError(
                    f"{solver}: no reproducible mode (its time limit is wall-clock time, so what it finds"
                    f" depends on the machine's load); reproducible solvers: {', '.join(reproducible_solvers())}"
                )
            if spec.reproducible == "untimed":
                time_limit_s = None
            elif spec.reproducible == "option":
                params = dataclasses.replace(params, reproducible=True)
        elif time_limit_s is not None:  # what loading took is gone (not under reproducible: a budget there)
            time_limit_s = max(log.left(), MIN_SOLVER_SECONDS)
        plan = _planned(problem, spec, params, time_limit_s, fallback)
    return _with_overrun(plan, log)


MIN_SOLVER_SECONDS = 1e-3
"""The time limit a solver is given when loading it used up the caller's (its first plan still comes)."""


def _planned(
    problem: Problem, spec: SolverEntry, params: Any, time_limit_s: float | None, fallback: bool
) -> Plan:
    """The solver's plan (with its fallbacks if asked), in its banks, checked and validated."""
    try:
        if fallback:
            from memplan.solvers.fallback import WithFallback

            plan = WithFallback(spec)(problem, params, time_limit_s=time_limit_s)
        else:
            target = prepared(problem, spec)
            spec.check(target, alternatives(target))
            plan = spec.load()(target, params, time_limit_s=time_limit_s)
    except InfeasibleError as err:
        caveat = unit_proof_caveat(problem)
        if caveat is not None:
            err.withdraw(caveat)
        raise
    with stage("validation"):
        placed = place_in_banks(problem, plan.pools)
        check_banks_fit(spec.name, placed, plan)
        plan = without_unit_proof(problem, plan, placed)
        check_capacity(placed, plan, spec.name)
        check_plan(problem, plan)
    return plan


def _with_overrun(plan: Plan, log: StageLog) -> Plan:
    """`plan` with the time the call ran past its limit, per stage and in its status (unchanged inside it)."""
    total, by_stage = log.overrun()
    if log.limit_s is None or total <= 0:
        return plan
    words = in_words(log.limit_s, total, by_stage)
    return dataclasses.replace(
        plan,
        seconds_over_limit=total,
        over_limit_stages=by_stage,
        status=f"{plan.status}; {words}" if plan.status else words,
    )


if __name__ != "memplan.solvers":  # pragma: no cover - only a wrong sys.path gets here
    raise ImportError(
        f"memplan's solvers/ directory was imported as {__name__!r}; it is the package"
        " memplan.solvers (install memplan with pip and import memplan.solvers)"
    )
