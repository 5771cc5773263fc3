"""`memplan sweep --tiling`: tiled runs are their own units and their rows show the region, bands and
extra MACs next to the tiled program's arena."""

from __future__ import annotations

from memplan.experiments.sweep import grid as sweep_grid
from memplan.experiments.sweep import run as sweep
from memplan.planner.tiling import TilingOptions


def test_tiled_runs_are_their_own_units_and_their_options_read_back() -> None:
    options = TilingOptions(max_extra_macs=0.1, budget_bytes=4096)
    text = sweep_grid.tiling_text(options)
    assert text == "max_extra_macs=0.1,budget=4096"
    assert sweep_grid.tiling_options_of(text) == options
    assert sweep_grid.tiling_options_of("") is None and sweep_grid.tiling_text(None) == ""
    plain = sweep_grid.PlanRun("m", "greedy", 16, True, 5.0)
    tiled = sweep_grid.PlanRun("m", "greedy", 16, True, 5.0, tiling=text)
    assert tiled.key == plain.key + (text,)


def test_a_tiled_sweep_row_shows_the_region_bands_and_extra_macs(tmp_path) -> None:
    kwargs = {"models": ["resnet8"], "solvers": ["bestfit"], "progress": False, "jobs": 1}
    plain = sweep.sweep(out=tmp_path / "plain", **kwargs)
    df = sweep.sweep(out=tmp_path / "tiled", tiling=TilingOptions(), **kwargs)
    (row,) = df.to_dict("records")
    assert row["tiling"] == "max_extra_macs=0.15" and "tiling" in row["levers"]
    assert row["tiling_bands"] >= 2 and row["tiling_extra_macs"] == 0, row["tiled_region"]  # rows kept
    assert " -> " in row["tiled_region"]
    assert row["tiling_peak_bound_after"] < row["tiling_peak_bound_before"]
    assert row["arena_bytes"] < plain["arena_bytes"].iloc[0]
