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


def test_cadence_lowerings_leave_the_preserve_ops_list_as_they_found_it():
    """ExecuTorch's verifier multiplies Cadence's module-level list on every lowering; the bench
    lowers many programs in one process, so each lowering and plan is wrapped (compat.preserve_ops_kept)."""
    from memplan.planner.algorithms.cadence.importable import cadence_passes_importable

    cadence_passes_importable()
    from executorch.backends.cadence.aot import compiler
    from executorch.backends.cadence.aot.memory_planning import MemoryConfig

    from memplan.planner.algorithms.cadence.algo import MemplanCadenceAlgo

    before = list(compiler.TO_EDGE_PRESERVE_OPS)
    plan = cadence.cadence_lowering(*cadence.program("add_chain"))
    plan(MemplanCadenceAlgo(MemoryConfig([1 << 16, 1 << 20])))
    assert compiler.TO_EDGE_PRESERVE_OPS == before
