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


@pytest.mark.slow
def test_bank_traffic_over_given_maps_counts_the_cases_below_banked_greedy(capsys):
    assert bank_traffic.main(["--models", "cat_seed", "--time-limit", "1", "--maps", "0.5:4"]) == 0
    out = capsys.readouterr().out
    (line,) = [line for line in out.splitlines() if line.startswith("| cat_seed")]
    cells = [c.strip() for c in line.strip("|").split("|")]
    assert cells[1] == "50.0% / 400%" and cells[-2:] == ["yes", "yes"]
    assert "cases where memplan is below BankedGreedy (more slow bytes or a smaller fast share): 0" in out


def test_random_maps_are_drawn_within_their_ranges_and_repeat_by_seed():
    maps = bank_traffic.random_maps(7, 20)
    assert maps == bank_traffic.random_maps(7, 20) != bank_traffic.random_maps(8, 20)
    assert all(0.05 <= fast <= 0.9 and slow in (1.0, 4.0) for fast, slow in maps)
