"""experiments.bench.minimalloc_bounds: the best plan known is a validated one, and the table is printed."""

from __future__ import annotations

import csv
import shutil

from helpers.minimalloc_files import minimalloc_dir

from memplan.experiments.bench import minimalloc_bounds as bench_bounds
from memplan.experiments.bench.minimalloc import minimalloc_problem


def test_a_saved_solution_below_the_readme_counts(tmp_path) -> None:
    problem = minimalloc_problem("D", minimalloc_dir())
    shutil.copy(bench_bounds.SOLUTIONS_DIR / "D.1036288.csv", tmp_path)
    assert bench_bounds.best_plan_known("D", problem, tmp_path) == (1_036_288, "D.1036288.csv")


def test_a_saved_solution_with_an_overlap_is_ignored(tmp_path) -> None:
    problem = minimalloc_problem("D", minimalloc_dir())
    rows = list(csv.reader((bench_bounds.SOLUTIONS_DIR / "D.1036288.csv").open()))
    offset = rows[0].index("offset")
    for r in rows[1:]:
        r[offset] = "0"  # everything at the bottom: conflicting buffers overlap
    with (tmp_path / "D.1000.csv").open("w", newline="") as out:
        csv.writer(out).writerows(rows)
    assert bench_bounds.best_plan_known("D", problem, tmp_path) == (1_038_336, "README")


def test_table_rows_for_solved_and_open_instances(capsys) -> None:
    bench_bounds.bench_bounds(["A", "D"], 0.5, minimalloc_dir())
    out = capsys.readouterr().out
    assert "| A | 154 | 1,048,576 | 1,048,576 |" in out and "not searched" in out
    row_d = next(line for line in out.splitlines() if line.startswith("| D |"))
    best, source = bench_bounds.best_plan_known("D", minimalloc_problem("D", minimalloc_dir()))
    assert best < 1_038_336 and source.startswith("D.")  # a saved plan below the README's best known
    gap = f"{100 * (best - 986_112) / best:.2f}%"
    assert "| 986,112 | " in row_d and f"{best:,} ({source})" in row_d and f"| {gap} | {gap} |" in row_d


def test_generated_rows_report_both_runs(capsys) -> None:
    bench_bounds.bench_generated([6], 2, 5.0, 1.0)
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| 6 |")]
    assert len(rows) == 2 and all(line.count("|") == 13 for line in rows)


def test_the_script_runs_on_its_own(capsys) -> None:
    bench_bounds.main(["--instances", "A", "--sizes", "6", "--seeds", "1", "--time-limit", "2"])
    out = capsys.readouterr().out
    assert "| A | 154 | 1,048,576 | 1,048,576 |" in out
    assert [line.count("|") for line in out.splitlines() if line.startswith("| 6 |")] == [13]
