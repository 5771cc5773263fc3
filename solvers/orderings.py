""" "Best of several orderings": run one placement heuristic under each ordering, keep the best.

Like XLA's heap simulator, the heuristics (bestfit, skyline) only know how to
place units in a given order; trying orders, stopping at the lower bound and
honouring the time limit live here, once.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Sequence

from memplan.planner.errors import SolverOptionError
from memplan.planner.problem import Outcome, Plan, Problem, lower_bounds
from memplan.solvers.units import Unit, arena_of, make_plan


def check_names(solver: str, names: Sequence[str], known: Collection[str]) -> None:
    """Refuse an empty or unknown list of ordering names, listing the valid ones."""
    unknown = [name for name in names if name not in known]
    if unknown or not names:
        raise SolverOptionError(f"{solver}: unknown orderings {unknown}; choose from {list(known)}")


def best_of_orderings(
    problem: Problem,
    units: Sequence[Unit],
    names: Sequence[str],
    place: Callable[[str], list[int]],
    *,
    solver: str,
    status: str,
    began: float,
    time_limit_s: float | None = None,
) -> Plan:
    """The plan of the ordering whose placement (`place(name)` -> unit offsets) has the smallest arena.

    Stops early when an ordering reaches the lower bound; with `time_limit_s`,
    no new ordering starts once the time is up (the first always runs).
    `status` is formatted with the winning ordering's name.
    """
    bounds = lower_bounds(problem)
    bound = sum(bounds.values())
    best: tuple[int, str, list[int], dict[int, int]] | None = None
    for name in names:
        if best is not None and time_limit_s is not None and time.perf_counter() - began > time_limit_s:
            break
        offsets = place(name)
        arena = arena_of(units, offsets)
        total = sum(arena.values())
        if best is None or total < best[0]:
            best = (total, name, offsets, arena)
        if total == bound:
            break
    assert best is not None, "at least one ordering always runs"
    _, name, offsets, arena = best
    return make_plan(
        problem,
        units,
        offsets,
        solver,
        time.perf_counter() - began,
        outcome=Outcome.OPTIMAL
        if all(arena.get(pool, 0) == need for pool, need in bounds.items())
        else Outcome.HEURISTIC,
        status=status.format(name),
        bound=bound,
    )
