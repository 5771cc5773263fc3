"""The shared-objects benchmark prints its table (slow: it lowers each model four times)."""

from __future__ import annotations

import pytest

from memplan.experiments.bench import shared_objects


@pytest.mark.slow
def test_the_table_compares_executorch_and_memplan_on_a_model(capsys):
    assert shared_objects.main(["--models", "cat_seed", "--check"]) == 0
    header, _, line = capsys.readouterr().out.splitlines()[:3]
    columns = [c.strip() for c in header.strip("|").split("|")]
    cells = dict(zip(columns, (c.strip() for c in line.strip("|").split("|"))))
    assert cells["model"] == "cat_seed"
    assert int(cells["memplan"].replace(",", "")) <= int(cells["ET greedy(no overlap)"].replace(",", ""))
    assert float(cells["memplan fast share"].rstrip("%")) >= float(cells["ET fast share"].rstrip("%"))
