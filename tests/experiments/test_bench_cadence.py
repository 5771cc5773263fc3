"""The Cadence comparison script: a Markdown row per memory config; memplan fits wherever Cadence does."""

from __future__ import annotations

from memplan.experiments.bench import cadence


def test_cadence_bench_prints_a_row_per_config_and_memplan_fits_where_cadence_fits(capsys):
    assert cadence.main(["--models", "cat_slice", "--time-limit", "0.5"]) == 0
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| cat_slice")]
    assert len(lines) == len(cadence.CONFIGS)
    for line in lines:
        cells = dict(zip(cadence.HEADER, (c.strip() for c in line.strip("|").split("|"))))
        cadence_fits = cells["bytes PBGH"] != "-" or cells["bytes GWH"] != "-"
        assert cadence_fits <= (cells["bytes memplan"] != "-")
        if cells["bytes memplan"] != "-":
            sizes = [int(x) for x in cells["memory sizes"].split("/")]
            used = [int(x) for x in cells["bytes memplan"].split("/")]
            assert len(used) == len(sizes) and all(u <= s for u, s in zip(used, sizes))
