"""memplan.experiments.bench.scale: its pieces work on small inputs (the real runs are benchmarks, not tests)."""

from __future__ import annotations

import pytest
from helpers.minimalloc_files import minimalloc_dir

from memplan.experiments.bench import scale as bench_scale
from memplan.experiments.bench.minimalloc import minimalloc_problem
from memplan.io import save_json
from memplan.problem import Buffer, Problem


def test_every_config_runs_and_reports_arena_and_proof() -> None:
    problem = Problem((Buffer("a", 0, 2, 4), Buffer("b", 1, 3, 4), Buffer("c", 0, 3, 2, offset=8)))
    for config in bench_scale.CONFIGS:
        result = bench_scale.run(problem, config, time_limit_s=5)
        assert result["arena"] == 10, config
        assert result["proven"], (config, result["status"])


def test_a_capacity_too_small_is_a_row_not_an_error() -> None:
    problem = Problem((Buffer("a", 0, 2, 4), Buffer("b", 1, 3, 4)))
    result = bench_scale.run(problem, "full", time_limit_s=5, capacity=7)
    assert result["arena"] is None and "capacity 7" in result["status"]


def test_minimalloc_problems_are_read_by_instance_name() -> None:
    assert minimalloc_problem("A", minimalloc_dir()).name.startswith("A")


def test_llama_problem_is_read_from_json(tmp_path) -> None:
    problem = Problem((Buffer("a", 0, 2, 4),), name="tiny")
    save_json(problem, tmp_path / "tiny.json")
    assert bench_scale.llama_problems(str(tmp_path / "tiny.json")) == {"tiny": problem}


@pytest.mark.parametrize(
    "argv",
    [
        ["--sections", "everything"],
        ["--instances", "Z"],
        ["--configs", "turbo"],
        ["--minimise-configs", "turbo"],
    ],
)
def test_unknown_names_are_refused(argv: list[str], capsys) -> None:
    with pytest.raises(SystemExit):
        bench_scale.main(argv)
    assert "unknown" in capsys.readouterr().err


@pytest.mark.parametrize("section,script", [("pass", "bench.llm"), ("bounds", "bench.minimalloc_bounds")])
def test_a_section_that_became_a_script_names_it(section: str, script: str, capsys) -> None:
    with pytest.raises(SystemExit):
        bench_scale.main(["--sections", section])
    err = capsys.readouterr().err
    assert f"unknown section {section!r}" in err and f"memplan.experiments.{script}" in err


def _fake_minimalloc(tmp_path, body: str):
    binary = tmp_path / "minimalloc"
    binary.write_text(f"#!/bin/sh\n{body}\n")
    binary.chmod(0o755)
    return str(binary)


def test_minimalloc_binary_time_is_its_own_elapsed_time(tmp_path) -> None:
    binary = _fake_minimalloc(tmp_path, 'echo "Elapsed time 0.125s" >&2')
    result = bench_scale.run_minimalloc(binary, tmp_path / "x.csv", 1024, limit=1)
    assert result == {"seconds": 0.125, "fits": True, "status": "ok"}


def test_minimalloc_binary_failure_is_reported(tmp_path) -> None:
    binary = _fake_minimalloc(
        tmp_path, 'echo "Elapsed time 2.000s" >&2; echo "DEADLINE_EXCEEDED" >&2; exit 1'
    )
    result = bench_scale.run_minimalloc(binary, tmp_path / "x.csv", 1024, limit=1)
    assert not result["fits"] and result["seconds"] == 2.0 and "DEADLINE" in result["status"]


def test_a_missing_minimalloc_binary_is_refused(tmp_path, capsys) -> None:
    with pytest.raises(SystemExit):
        bench_scale.main(["--sections", "minimalloc", "--minimalloc-binary", str(tmp_path / "nope")])
    assert "no such file" in capsys.readouterr().err


def test_a_plan_below_the_best_known_is_saved_as_a_minimalloc_solution(tmp_path) -> None:
    from memplan.io import read_minimalloc_csv

    problem = Problem((Buffer("a", 0, 2, 4), Buffer("b", 1, 3, 4)), name="T.64")
    result = bench_scale.run(problem, "full", time_limit_s=5)
    assert bench_scale.save_if_better(problem, result, best_known=8, folder=tmp_path) == ""
    path = bench_scale.save_if_better(problem, result, best_known=9, folder=tmp_path)
    assert path.endswith("T.8.csv")
    solved = read_minimalloc_csv(path)
    assert {b.id for b in solved.buffers} == {"a", "b"}
