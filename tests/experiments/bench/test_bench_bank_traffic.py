"""bench.bank_traffic prints one row per model and sram size, each saying whether the guarantee held."""

from __future__ import annotations

import pytest

from memplan.experiments.bench import bank_traffic


@pytest.mark.slow
def test_bank_traffic_rows_say_the_guarantee_held(capsys, monkeypatch):
    monkeypatch.setattr(bank_traffic, "FRACTIONS", (0.5,))
    assert bank_traffic.main(["--models", "cat_seed", "--time-limit", "1"]) == 0
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| cat_seed")]
    assert len(lines) == 1
    cells = [c.strip() for c in lines[0].strip("|").split("|")]
    assert cells[1] == "50%" and cells[-2:] == ["yes", "yes"]
    fast, slow = (int(n.replace(",", "")) for n in cells[4].split("/"))
    assert fast + slow > 0
