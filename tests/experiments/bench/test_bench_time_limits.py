"""The time-limits bench: a row per (size, solver) with the stage a solve overran in, its own column."""

from __future__ import annotations

from helpers.fake_clock import slow_validation_of

from memplan.experiments.bench import time_limits


def test_a_row_names_the_stage_that_ran_past_the_limit_and_dashes_one_that_kept_to_it(capsys, monkeypatch):
    """Validation takes 4 s on a clock the test moves (nothing is timed): 1 s past a 3 s limit."""
    slow_validation_of(monkeypatch, "bestfit", 4.0)
    time_limits.main(["--sizes", "300", "--solvers", "bestfit,greedy", "--time-limit", "3"])
    lines = capsys.readouterr().out.splitlines()
    header = [c.strip() for c in lines[0].strip("|").split("|")]
    rows = {
        row["solver"]: row
        for row in (dict(zip(header, (c.strip() for c in line.strip("|").split("|")))) for line in lines[2:])
    }
    assert rows["bestfit"]["overran in"] == "validation 1.00 s"
    assert rows["greedy"]["overran in"] == "-"
