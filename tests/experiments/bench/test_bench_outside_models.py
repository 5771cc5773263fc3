"""The outside-models bench (issue 31's table of 11 kinds): each row's columns agree with each other.

The default run takes the cheapest model through the row function and the script; `-m slow` runs
every model. A row agrees when memplan needs no more than stock, replan finds nothing smaller than
what memplan wrote, a proof is the emitted program's bound, and the program runs equal to its
reference (eager, or the stock program for the int8 model).
"""

from __future__ import annotations

import pytest

from memplan.experiments.bench import outside_models
from memplan.experiments.zoo.lowering import PROGRAM_ROW
from memplan.experiments.zoo.models.outside import MODELS


def assert_consistent(rows: list[dict]) -> None:
    assert rows
    for row in rows:
        where = f"{row['model']}/{row['method']}"
        assert row["memplan_bytes"] <= row["stock_bytes"], where
        if row["replan_bytes"] is not None:
            assert row["replan_bytes"] >= row["memplan_bytes"], where
        if row.get("proven"):
            assert row["emitted_bound"] == row["memplan_bytes"] - row["padding"], where
        assert row["runtime"].startswith("equal to "), (where, row["runtime"])
        assert row["finding"] == "", (where, row["finding"])
    methods = [r["method"] for r in rows]
    assert (PROGRAM_ROW in methods) == (len(methods) > 1)


def test_the_cheapest_model_gives_a_consistent_row(capsys):
    rows = outside_models.rows("zero_size")
    assert_consistent(rows)
    [row] = rows
    assert row["replan_bytes"] is not None and row["runtime"] == "equal to eager, 2 calls"

    assert outside_models.main(["--models", "zero_size", "--quiet"]) == 0
    header, _, line = capsys.readouterr().out.splitlines()[:3]
    cells = [c.strip() for c in line.strip("|").split("|")]
    assert [c.strip() for c in header.strip("|").split("|")] == list(outside_models.COLUMNS)
    assert cells[:2] == ["zero_size", "forward"] and cells[-1] == ""


def test_a_row_that_contradicts_a_claim_is_a_finding():
    row = {
        "memplan_bytes": 1_000,
        "stock_bytes": 900,
        "replan_bytes": 800,
        "proven": True,
        "emitted_bound": 800,
        "padding": 0,
        "runtime": "DIFFERS: call 0 output 0",
    }
    assert outside_models.findings(row) == [
        "replan finds 200 B less",
        "proven at 1,000 B of tensors, but the emitted bound is 800",
        "memplan above stock",
        "runtime differs",
    ]


@pytest.mark.slow
@pytest.mark.parametrize("name", list(MODELS))
def test_every_outside_model_gives_consistent_rows(name):
    assert_consistent(outside_models.rows(name))
