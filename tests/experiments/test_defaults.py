"""Every entry point takes its defaults from `memplan.solvers` (defined once there), and a time limit
is checked by one rule whichever door it comes in by."""

from __future__ import annotations

import inspect

import pytest
from executorch.exir.tensor import ALIGNMENT as EXECUTORCH_ALIGNMENT

from memplan import solvers
from memplan.errors import SolverOptionError, UsageError
from memplan.experiments import checks, planning
from memplan.experiments.cli import main as cli
from memplan.experiments.sweep import grid
from memplan.planner.pass_ import PlannerPass
from memplan.planner.pte import program as pte
from memplan.planner.pte import replan


def _defaults(function) -> dict:
    return {k: p.default for k, p in inspect.signature(function).parameters.items()}


def test_the_alignment_default_is_executorchs() -> None:
    assert solvers.DEFAULT_ALIGNMENT == EXECUTORCH_ALIGNMENT
    assert _defaults(PlannerPass.__init__)["alignment"] == solvers.DEFAULT_ALIGNMENT


@pytest.mark.parametrize(
    "function",
    [PlannerPass.__init__, replan.replan, planning.plan_model],
    ids=["PlannerPass", "replan", "memplan.plan_model and memplan plan"],
)
def test_entry_points_default_to_the_solvers_defaults(function) -> None:
    defaults = _defaults(function)
    assert defaults["solver"] == solvers.DEFAULT_SOLVER
    assert defaults["time_limit_s"] == solvers.DEFAULT_TIME_LIMIT_S
    if "alignment" in defaults:
        assert defaults["alignment"] == solvers.DEFAULT_ALIGNMENT


def test_the_command_line_and_the_sweep_default_to_the_solvers_defaults() -> None:
    parser = cli.build_parser()
    plan = parser.parse_args(["plan", "cat_seed"])
    assert (plan.solver, plan.time_limit, plan.alignment) == (
        solvers.DEFAULT_SOLVER,
        solvers.DEFAULT_TIME_LIMIT_S,
        solvers.DEFAULT_ALIGNMENT,
    )
    assert parser.parse_args(["inspect", "x.pte"]).alignment == solvers.DEFAULT_ALIGNMENT
    assert grid.DEFAULT_ALIGNMENTS == (solvers.DEFAULT_ALIGNMENT,)
    assert _defaults(grid.grid)["time_limit_s"] == solvers.DEFAULT_TIME_LIMIT_S
    assert _defaults(pte.read_program)["alignment"] == solvers.DEFAULT_ALIGNMENT


@pytest.mark.parametrize("limit", [float("nan"), float("inf"), -1.0, 0, True, "5"])
def test_a_sweep_refuses_exactly_the_time_limits_the_solvers_refuse(limit: object) -> None:
    with pytest.raises(SolverOptionError):
        solvers.checked_time_limit("cpsat", limit)  # type: ignore[arg-type]
    with pytest.raises(UsageError, match="time limit must be a positive number"):
        checks.check_time_limit(limit)  # type: ignore[arg-type]


@pytest.mark.parametrize("limit", [0.5, 5, 30.0])
def test_a_sweep_accepts_the_time_limits_the_solvers_accept(limit: float) -> None:
    assert solvers.checked_time_limit("cpsat", limit) == float(limit)
    checks.check_time_limit(limit)
