"""The results API: a sweep folder read back with nullable dtypes, the same from CSV, Parquet or the run log."""

from __future__ import annotations

import json

import pandas as pd
import pytest

import memplan
from memplan.errors import UsageError
from memplan.experiments.cli import main as cli
from memplan.experiments.sweep import report, results
from memplan.experiments.sweep.grid import PlanRun, StockRun
from memplan.experiments.sweep.run_log import RunLog
from memplan.experiments.sweep.table import table


def _row(method: str, arena: int, proven: bool) -> dict:
    return {
        "method": method,
        "buffers": 7,
        "lower_bound_bytes": 900,
        "arena_bytes": arena,
        "proven_optimal": proven,
        "plan_solver": "bestfit",
        "solve_seconds": 0.01,
        "export_seconds": 1.5,
        "cats_fused": 0,
        "copy_removed_bytes": 0,
    }


@pytest.fixture
def folder(tmp_path):
    log = RunLog(tmp_path)
    log.add(StockRun("m", 16), {"error": None, "arena_bytes": {"forward": 1000, "decode": 2000}})
    log.add(
        PlanRun("m", "bestfit", 16, True, 5.0),
        {"error": None, "rows": [_row("forward", 900, True), _row("decode", 1900, False)]},
    )
    log.add(PlanRun("m", "cpsat", 16, True, 5.0), {"error": "ValueError: boom [x.py:1]", "rows": []})
    return tmp_path


EXPECTED = {
    "model": "string",
    "method": "string",
    "solver": "string",
    "alignment": "Int64",
    "cat_fusion": "boolean",
    "lower_bound_bytes": "Int64",
    "arena_bytes": "Int64",
    "stock_arena_bytes": "Int64",
    "proven_optimal": "boolean",
    "ran_ok": "boolean",
    "matches_eager": "boolean",
    "saving_vs_stock": "float64",
    "error": "string",
}


@pytest.mark.parametrize("fmt", ["csv", "parquet", "runs"])
def test_load_results_gives_nullable_dtypes_from_every_source(folder, fmt):
    df = table(RunLog(folder))
    if fmt != "runs":
        report.write_outputs(df, folder, fmt)
    loaded = memplan.load_results(folder)
    for column, dtype in EXPECTED.items():
        assert str(loaded[column].dtype) == dtype, (fmt, column, loaded[column].dtype)
    assert loaded["ran_ok"].isna().all()  # not checked: <NA>, not False and not NaN
    error_row = loaded[loaded["solver"] == "cpsat"].iloc[0]
    assert pd.isna(error_row["arena_bytes"]) and error_row["method"] == ""
    ok = loaded[loaded["solver"] == "bestfit"].set_index("method")
    assert ok.loc["forward", "arena_bytes"] == 900 and bool(ok.loc["forward", "proven_optimal"])
    assert not bool(ok.loc["decode", "proven_optimal"])
    assert ok.loc["decode", "saving_vs_stock"] == pytest.approx(0.05)  # positive = smaller than stock
    pd.testing.assert_frame_equal(loaded, results.typed(df), check_like=True)


def test_a_format_switch_removes_the_stale_table(folder):
    df = table(RunLog(folder))
    report.write_outputs(df, folder, "parquet")
    report.write_outputs(df, folder, "csv")
    assert (folder / "results.csv").exists() and not (folder / "results.parquet").exists()


def test_parquet_without_pyarrow_is_a_clear_error(monkeypatch, tmp_path, capsys):
    real = results.importlib.util.find_spec
    monkeypatch.setattr(
        results.importlib.util, "find_spec", lambda name, *a: None if name == "pyarrow" else real(name, *a)
    )
    with pytest.raises(UsageError, match=r"pip install 'memplan\[parquet\]'"):
        results.check_format("parquet")
    try:
        code = cli.main(
            ["sweep", "--models", "cat_seed", "--format", "parquet", "--out", str(tmp_path / "x")]
        )
    except SystemExit as exc:
        code = exc.code
    assert code == 2 and "needs pyarrow" in capsys.readouterr().err
    assert not (tmp_path / "x").exists()


def test_a_folder_without_results_says_so(tmp_path):
    with pytest.raises(UsageError, match="holds no sweep results"):
        memplan.load_results(tmp_path)
    (tmp_path / "runs.jsonl").write_text(json.dumps({"kind": "plan"}) + "\n")
    with pytest.raises(UsageError, match="not a sweep record"):
        memplan.load_results(tmp_path)


def test_a_program_of_several_methods_gets_a_program_row_and_its_own_summary_section(tmp_path) -> None:
    from memplan.experiments.zoo.lowering import PROGRAM_ROW

    log = RunLog(tmp_path)
    stock = {"error": None, "arena_bytes": {"encode": 1000, "decode": 2000}, "program_arena_bytes": 2000}
    log.add(StockRun("m", 16), stock)
    rows = [_row("encode", 900, True), _row("decode", 1900, False)]
    log.add(
        PlanRun("m", "bestfit", 16, True, 5.0), {"error": None, "rows": rows, "program_arena_bytes": 1900}
    )
    df = table(log)
    program = df[df["method"] == PROGRAM_ROW].iloc[0]
    assert (program["arena_bytes"], program["stock_arena_bytes"], program["buffers"]) == (1900, 2000, 14)
    assert program["saving_vs_stock"] == pytest.approx(0.05)
    text = report.summary_markdown(df)
    assert "2 rows, one per method, solver and settings: 2 methods of 1 models x 1 solvers" in text
    assert "plus 1 whole-program rows" in text
    assert "| m | bestfit | 1,900 | 2,000 | +5.0% |" in text


def test_load_results_shows_the_solvers_compared_in_jupyter(folder):
    df = table(RunLog(folder))
    report.write_outputs(df, folder, "csv")
    loaded = memplan.load_results(folder)
    shown = loaded._repr_html_()
    assert "3 rows: 1 models, 2 solvers, 1 failed runs" in shown
    assert "<svg" in shown and ">bestfit<" in shown  # the bestfit bar: geometric mean of 900/900 and 1900/900
    assert f"{(1900 / 900) ** 0.5:.3f}" in shown
    assert type(loaded[loaded["solver"] == "bestfit"]) is pd.DataFrame  # derived tables are plain
