"""Reproducible mode (issue 15): same input and options, same plan, whatever the machine's load."""

from __future__ import annotations

import json
import threading

import pytest

from memplan import solvers
from memplan.errors import InfeasibleError, SolverOptionError
from memplan.experiments.cli import main as cli
from memplan.experiments.sweep import grid as sweep_grid
from memplan.experiments.sweep import run as sweep
from memplan.experiments.sweep import run_log
from memplan.experiments.zoo import lowering
from memplan.generate import random_problem
from memplan.peak_bound import lower_bound
from memplan.validate import validate


def _burn(stop: threading.Event) -> None:
    while not stop.is_set():  # compete for the CPU with the solver's threads
        sum(range(10_000))


def _fingerprint(plan) -> tuple:
    return (tuple(sorted(plan.offsets.items())), dict(plan.arena_sizes), plan.proven_optimal, plan.status)


def _outcome(problem, capacity) -> tuple:
    """The plan's fingerprint, or the error's message: either must repeat."""
    try:
        plan = solvers.solve(problem, "cpsat", time_limit_s=1, capacity=capacity, reproducible=True)
    except InfeasibleError as err:
        return ("no plan", str(err))
    assert validate(problem, plan) == []
    assert "[reproducible]" in plan.status and "not reproducible" not in plan.status
    return _fingerprint(plan)


@pytest.mark.parametrize("capacity_slack", [None, 40])
def test_cpsat_gives_the_same_plan_on_every_run_and_under_load(capacity_slack) -> None:
    problem = random_problem(40, seed=7, alignment=(1, 16))
    assert solvers.solve(problem, "bestfit").arena_size > lower_bound(problem) + 40  # so the search runs
    capacity = None if capacity_slack is None else lower_bound(problem) + capacity_slack
    first = _outcome(problem, capacity)
    stop = threading.Event()
    burner = threading.Thread(target=_burn, args=(stop,))
    burner.start()
    try:
        second = _outcome(problem, capacity)
    finally:
        stop.set()
        burner.join()
    assert first == second


def test_heuristics_in_reproducible_mode_run_every_ordering_whatever_the_time_limit() -> None:
    problem = random_problem(200, seed=5, alignment=(1, 16))
    for name in ("bestfit", "skyline"):
        full = solvers.solve(problem, name)
        rushed = solvers.solve(problem, name, time_limit_s=1e-9, reproducible=True)
        assert _fingerprint(rushed)[:3] == _fingerprint(full)[:3]


def test_every_solver_but_milp_has_a_reproducible_mode() -> None:
    problem = random_problem(12, seed=2)
    for name in solvers.available():
        if name != "milp":
            assert validate(problem, solvers.solve(problem, name, time_limit_s=1, reproducible=True)) == []


def test_milp_refuses_a_reproducible_mode_it_cannot_keep() -> None:
    with pytest.raises(SolverOptionError, match="milp: no reproducible mode"):
        solvers.solve(random_problem(5, seed=1), "milp", reproducible=True)


def test_a_reproducible_sweep_asks_the_pass_for_the_reproducible_mode(tmp_path, monkeypatch) -> None:
    seen = []
    real = lowering.lower_planned

    def spy(*args, **kwargs):
        seen.append(args[5])
        return real(*args, **kwargs)

    monkeypatch.setattr(sweep, "lower_planned", spy)
    df = sweep.sweep(
        out=tmp_path, models=["cat_seed"], solvers=["cpsat"], jobs=1, progress=False, reproducible=True
    )
    assert seen == [True]
    assert df["reproducible"].all() and df["error"].isna().all()
    again = sweep.sweep(out=tmp_path, models=["cat_seed"], solvers=["cpsat"], jobs=1, progress=False)
    assert sorted(again["reproducible"].tolist()) == [False, True]  # a setting of its own: both kept


def test_records_from_before_the_setting_load_as_not_reproducible(tmp_path) -> None:
    record = {
        "kind": "plan",
        "run": {"model": "m", "solver": "greedy", "alignment": 16, "cat_fusion": True, "time_limit_s": 5.0},
        "result": {"error": None, "rows": []},
    }
    (tmp_path / run_log.RUNS_FILE).write_text(json.dumps(record) + "\n")
    log = run_log.RunLog(tmp_path)
    assert log.is_done(sweep_grid.PlanRun("m", "greedy", 16, True, 5.0))
    assert not log.is_done(sweep_grid.PlanRun("m", "greedy", 16, True, 5.0, reproducible=True))


def test_the_sweep_command_has_a_reproducible_switch(monkeypatch) -> None:
    seen = {}

    def fake_sweep(**kwargs):
        seen.update(kwargs)
        raise KeyboardInterrupt

    monkeypatch.setattr(sweep, "sweep", fake_sweep)
    with pytest.raises(SystemExit):
        cli.main(["sweep", "--reproducible", "--quiet"])
    assert seen["reproducible"] is True
