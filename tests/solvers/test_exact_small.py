"""The exact solvers on problems small enough to know the answer by hand."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers.minimalloc_files import minimalloc_dir

from memplan.errors import InfeasibleError
from memplan.generate import pigeonholes
from memplan.io import read_minimalloc_csv
from memplan.peak_bound import lower_bound
from memplan.plan import Outcome
from memplan.problem import Buffer, Problem
from memplan.solvers import UnknownSolverError, available, solve
from memplan.validate import validate

# (solver, options): both exact solvers, the MILP on both back ends, warm and cold
# (cold makes the model itself find and prove the optimum), and once as one
# model without decomposition.
EXACT_RUNS = [
    ("cpsat", {}),
    ("milp", {"backend": "cbc"}),
    ("milp", {"backend": "highs"}),
    ("milp", {"backend": "cbc", "warm_start": False}),
    ("milp", {"backend": "highs", "warm_start": False}),
    ("milp", {"backend": "cbc", "warm_start": False, "decompose": False}),
]
RUN_IDS = ["cpsat", "milp-cbc", "milp-highs", "milp-cbc-cold", "milp-highs-cold", "milp-cbc-cold-whole"]


@pytest.mark.parametrize(("solver", "options"), EXACT_RUNS, ids=RUN_IDS)
def test_minimalloc_input_12_is_solved_at_12_and_proven(solver: str, options: dict) -> None:
    problem = read_minimalloc_csv(minimalloc_dir() / "input.12.csv")
    plan = solve(problem, solver, time_limit_s=30, **options)
    assert plan.arena_size == 12
    assert plan.proven_optimal, plan.status
    assert validate(problem, plan) == []


@pytest.mark.parametrize(("solver", "options"), EXACT_RUNS, ids=RUN_IDS)
def test_optimum_above_the_lower_bound_is_proven(solver: str, options: dict) -> None:
    problem = pigeonholes(buffers=4, holes=2)
    assert lower_bound(problem) == 14
    plan = solve(problem, solver, time_limit_s=30, **options)
    assert plan.arena_size == 18
    assert plan.proven_optimal, plan.status


@pytest.mark.parametrize(("solver", "options"), EXACT_RUNS, ids=RUN_IDS)
def test_alignment_padding_is_proven(solver: str, options: dict) -> None:
    """Eight 1-byte buffers aligned to 4, all live: 7 * 4 + 1 bytes, not 8."""
    problem = Problem(tuple(Buffer(f"b{i}", 0, 2, 1, alignment=4) for i in range(8)))
    plan = solve(problem, solver, time_limit_s=30, **options)
    assert plan.arena_size == 29
    assert plan.proven_optimal, plan.status


@pytest.mark.parametrize(("solver", "options"), EXACT_RUNS, ids=RUN_IDS)
def test_capacity_below_the_peak_is_infeasible(solver: str, options: dict) -> None:
    problem = Problem((Buffer("a", 0, 2, 4), Buffer("b", 1, 3, 4)), capacity=7)
    with pytest.raises(InfeasibleError, match="capacity 7"):
        solve(problem, solver, time_limit_s=30, **options)


@pytest.mark.parametrize(("solver", "options"), EXACT_RUNS, ids=RUN_IDS)
def test_capacity_between_bound_and_optimum_is_proven_infeasible(solver: str, options: dict) -> None:
    """The bound (14) fits in 17 bytes, the optimum (18) does not: only search can tell."""
    with pytest.raises(InfeasibleError, match="capacity 17"):
        solve(pigeonholes(buffers=4, holes=2), solver, time_limit_s=30, capacity=17, **options)


@pytest.mark.parametrize("backend", ["cbc", "highs"])
def test_milp_time_out_returns_a_valid_unproven_plan_no_worse_than_bestfit(backend: str) -> None:
    problem = pigeonholes(buffers=12, holes=6)
    heuristic = solve(problem, "bestfit")
    plan = solve(problem, "milp", time_limit_s=1, backend=backend)
    assert validate(problem, plan) == []
    assert plan.arena_size <= heuristic.arena_size
    assert plan.outcome is Outcome.TIME_LIMIT
    assert plan.seconds < 15  # 1 s budget; generous for a loaded machine, catches a limit that is ignored


@pytest.mark.parametrize("backend", ["cbc", "highs"])
def test_milp_leaves_no_files_in_the_working_directory(
    backend: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    solve(pigeonholes(buffers=4, holes=2), "milp", backend=backend, warm_start=False)
    assert list(tmp_path.iterdir()) == []


def test_unknown_solver_lists_the_choices() -> None:
    problem = Problem((Buffer("a", 0, 1, 1),))
    with pytest.raises(UnknownSolverError) as caught:
        solve(problem, "simplex")
    for name in available():
        assert name in str(caught.value)


def test_unknown_milp_backend_is_a_clear_error() -> None:
    problem = Problem((Buffer("a", 0, 1, 1),))
    with pytest.raises(ValueError, match=r"unknown backend 'nope'.*cbc, highs"):
        solve(problem, solver="milp", backend="nope")


@pytest.mark.parametrize("backend", ["cbc", "highs"])
def test_unknown_milp_option_is_a_clear_error(backend: str) -> None:
    problem = Problem((Buffer("a", 0, 1, 1),))
    with pytest.raises(ValueError, match="bogus"):
        solve(problem, solver="milp", backend=backend, backend_options={"bogus": 1})
