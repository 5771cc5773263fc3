"""What every entry point uses when not told, defined once, and the one check of a time limit.

`PlannerPass`, `replan`, `plan_model`, `memplan plan`, the sweeps and `solve`
all read these (re-exported as `memplan.solvers.DEFAULT_SOLVER`, ...), so a
default changes here or nowhere.
"""

from __future__ import annotations

import math

from memplan.errors import SolverOptionError

DEFAULT_SOLVER = "cpsat"
"""What `solve`, `PlannerPass`, `replan`, `plan_model` and `memplan plan` run when not told
(CP-SAT, starting from best-fit's plan)."""

DEFAULT_TIME_LIMIT_S = 5.0
"""Seconds per method for `PlannerPass`, `replan`, `plan_model`, `memplan plan` and sweeps when not
told. `solve` itself passes None on, which leaves each solver its own budget (`CPSAT_BUDGET_S`,
`MILP_BUDGET_S`)."""

CPSAT_BUDGET_S = 10.0
"""cpsat's wall-clock budget when the caller gives none: proves small and medium problems, and keeps
a sweep over many models short; pass more for hard ones."""

MILP_BUDGET_S = 60.0
"""milp's wall-clock budget when the caller gives none: enough to prove small problems, short enough
that a sweep over a model zoo finishes."""

DEFAULT_ALIGNMENT = 16
"""Bytes every planned tensor's offset is a multiple of unless told: ExecuTorch's
(`executorch.exir.tensor.ALIGNMENT`, which this torch-free floor cannot import; a test holds them equal)."""


def checked_time_limit(solver: str, time_limit_s: float | None) -> float | None:
    """`time_limit_s` as a float, or None; NaN, infinities, zero, negatives and non-numbers are refused.

    Checked before any work: a NaN limit would otherwise reach a solver's clock
    arithmetic and come back as a confusing failure deep inside it. `solver`
    names who asked, for the message.
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
