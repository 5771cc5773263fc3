"""The error hierarchy and the typed plan outcome: what callers may rely on."""

from __future__ import annotations

import dataclasses
import json

import pytest

from memplan.errors import (
    InfeasibleError,
    InvalidPlanError,
    MemplanError,
    ProblemError,
    SolverFailure,
    SolverOptionError,
    UnknownSolverError,
    UsageError,
)
from memplan.io import load_json, save_json
from memplan.plan import Outcome, Plan
from memplan.problem import Buffer, Problem
from memplan.solvers import solve
from memplan.validate import check_plan

WALLS = Problem(tuple(Buffer(f"b{i}", 0, 2, 3) for i in range(4)) + (Buffer("wall", 0, 2, 1, offset=5),))


def test_every_error_is_a_memplan_error_and_keeps_its_builtin_base() -> None:
    for error in (InfeasibleError, InvalidPlanError, SolverOptionError, UnknownSolverError):
        assert issubclass(error, MemplanError) and issubclass(error, ValueError)
    assert issubclass(SolverFailure, MemplanError) and issubclass(SolverFailure, RuntimeError)
    assert not issubclass(SolverOptionError, ProblemError)  # a bad option is not a bad problem
    assert issubclass(UsageError, MemplanError) and issubclass(UsageError, ValueError)
    assert not issubclass(UsageError, ProblemError)  # asking for what does not exist is not a bad problem


def test_the_experiments_errors_are_memplan_errors_too() -> None:
    """Raised above the model (zoo, sweep, replan check), caught by the command line as MemplanError."""
    from memplan.experiments.sweep.executors import ExecutorUnavailableError
    from memplan.experiments.zoo import UnknownModelError, get
    from memplan.experiments.zoo.programs import ProgramSpecError
    from memplan.experiments.zoo.pte_check import CheckError

    assert issubclass(UnknownModelError, UsageError) and issubclass(UnknownModelError, KeyError)
    assert issubclass(ProgramSpecError, UsageError)
    assert issubclass(ExecutorUnavailableError, MemplanError) and issubclass(
        ExecutorUnavailableError, RuntimeError
    )
    assert issubclass(CheckError, MemplanError) and issubclass(CheckError, AssertionError)
    with pytest.raises(UnknownModelError) as err:
        get("nope")
    assert str(err.value).startswith("unknown zoo model 'nope'; valid names: ")  # not KeyError's quoting


def test_an_infeasibility_proof_says_so_and_a_failed_heuristic_does_not() -> None:
    problem = Problem((Buffer("a", 0, 2, 4), Buffer("b", 1, 3, 4)))
    with pytest.raises(InfeasibleError) as bound:
        solve(problem, "cpsat", capacity=7)
    assert bound.value.proven
    # Greedy's shared objects grow to 5 bytes; the bound (4) fits, so nothing is proven.
    reuse = Problem((Buffer("a", 3, 4, 1), Buffer("b", 3, 5, 3), Buffer("c", 1, 2, 2), Buffer("d", 1, 2, 2)))
    with pytest.raises(InfeasibleError) as heuristic:
        solve(reuse, "greedy", capacity=4)
    assert not heuristic.value.proven


def test_bad_options_raise_the_option_error() -> None:
    with pytest.raises(SolverOptionError, match="num_workers"):
        solve(WALLS, "cpsat", num_workers=0)
    with pytest.raises(SolverOptionError, match="unknown backend"):
        solve(WALLS, "milp", backend="nope")
    with pytest.raises(UnknownSolverError, match="unknown solver 'nope'"):
        solve(WALLS, "nope")


def test_an_invalid_plan_carries_its_violations() -> None:
    plan = Plan(offsets={b.id: 0 for b in WALLS.buffers}, arena_sizes={0: 6}, solver="zero")
    with pytest.raises(InvalidPlanError) as err:
        check_plan(WALLS, plan)
    assert err.value.violations and "zero" in str(err.value)


def test_proven_optimal_is_read_off_the_outcome_alone() -> None:
    assert Plan({}, {}, "x", outcome=Outcome.OPTIMAL).proven_optimal
    assert Plan({}, {}, "x").outcome is Outcome.HEURISTIC and not Plan({}, {}, "x").proven_optimal
    for outcome in set(Outcome) - {Outcome.OPTIMAL}:
        assert not Plan({}, {}, "x", outcome=outcome).proven_optimal
    proven = Plan({}, {}, "x", outcome=Outcome.OPTIMAL)
    assert not dataclasses.replace(proven, outcome=Outcome.NOT_PROVEN).proven_optimal  # proof withdrawn
    with pytest.raises(TypeError):
        Plan({}, {}, "x", proven_optimal=True)  # type: ignore[call-arg]  # one statement of the proof


def test_a_plan_file_older_than_outcome_reads_its_proof(tmp_path) -> None:
    written = {
        "type": "plan",
        "version": 1,
        "solver": "old",
        "seconds": 0.0,
        "proven_optimal": True,
        "lower_bound": 8,
        "status": "",
        "arena_sizes": {"0": 8},
        "offsets": {"a": 0},
    }
    path = tmp_path / "old.json"
    path.write_text(json.dumps(written))
    assert load_json(path).outcome is Outcome.OPTIMAL


def test_the_outcome_survives_a_json_round_trip(tmp_path) -> None:
    plan = solve(WALLS, "milp", backend="highs", backend_options={"gapRel": 0.5}, warm_start=False)
    assert plan.outcome is Outcome.GAP_LIMIT
    path = tmp_path / "plan.json"
    save_json(plan, path)
    assert load_json(path).outcome is Outcome.GAP_LIMIT
