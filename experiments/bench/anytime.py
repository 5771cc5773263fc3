"""An anytime curve: the best arena a time-limited solver finds against the seconds it is given.

Measured by solving the same problem again at growing time limits (not from inside one run), so
each point is a complete, validated plan: (seconds the solve reported, its arena). Draw it with
`memplan.viz.anytime`.
"""

from __future__ import annotations

from collections.abc import Sequence

from memplan import solvers
from memplan.problem import Problem

DEFAULT_LIMITS = (0.1, 0.3, 1.0, 3.0)


def curve(
    problem: Problem, solver: str = "cpsat", limits: Sequence[float] = DEFAULT_LIMITS
) -> list[tuple[float, int]]:
    """(seconds, arena) per time limit, in the order of `limits`."""
    points = []
    for limit in limits:
        plan = solvers.solve(problem, solver, time_limit_s=limit)
        points.append((max(plan.seconds, 1e-3), plan.arena_size))
    return points
