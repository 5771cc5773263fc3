"""bench_bestfit runs a checkout against a baseline and says whether their plans agree."""

from __future__ import annotations

import sys

from memplan.experiments.bench import bestfit_at_scale as bench_bestfit


def test_a_checkout_against_itself_gives_the_same_offsets(capsys) -> None:
    bench_bestfit.main(["--baseline", sys.executable, "--sizes", "300", "--repeats", "1"])
    out = capsys.readouterr().out
    rows = [line for line in out.splitlines() if line.startswith("| 300 |")]
    assert len(rows) == 2
    for line in rows:
        cells = [c.strip() for c in line.strip("|").split("|")]
        assert cells[1] in ("this", "baseline")
        assert float(cells[5]) >= 1.0  # arena / lower bound
        assert cells[-1] == "yes"
