"""The benchmark scripts speak the CLI's language: comma lists, the sweep's solver set and defaults,
Markdown tables, positive saving = smaller than stock."""

from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path

import pytest

import memplan.experiments.bench
import memplan.experiments.cli
from memplan.experiments import flags
from memplan.experiments.bench import catfusion_report, compare_stock


def test_compare_stock_prints_a_markdown_table_with_positive_savings(capsys):
    code = compare_stock.main(["--models", "cat_seed", "--solvers", "greedy,bestfit", "--quiet"])
    out = capsys.readouterr().out
    assert code == 0
    header, rule, line = out.splitlines()[:3]
    cells = [c.strip() for c in header.strip("|").split("|")]
    assert (
        cells[:4] == ["model", "stock_bytes", "greedy_bytes", "bestfit_bytes"] and "saving_vs_stock" in cells
    )
    assert set(rule) <= {"|", "-", ":"}
    saving = [c.strip() for c in line.strip("|").split("|")][cells.index("saving_vs_stock")]
    assert saving.startswith("+")  # cat_seed's stock plan is beaten: a saving is positive


def test_catfusion_report_takes_comma_lists(capsys):
    assert catfusion_report.main(["--models", "cat_seed", "--solvers", "bestfit", "--quiet"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("| ") and "copy_removed_bytes" in out and "| bestfit |" in out.replace("  ", " ")


def test_scripts_default_to_the_sweeps_solvers_and_time_limit():
    import argparse

    from memplan import solvers
    from memplan.experiments.sweep.grid import DEFAULT_TIME_LIMIT_S

    parser = argparse.ArgumentParser()
    flags.add_common(parser)
    args = parser.parse_args([])
    assert flags.solvers_of(args) == solvers.available()
    assert args.time_limit == DEFAULT_TIME_LIMIT_S and flags.switch_of(args.cat_fusion) is True


def test_shorten_cuts_at_a_word_boundary():
    from memplan.experiments.markdown import shorten

    text = "not proven: skyline probes (12) found 1,234 bytes, none found below 1,000"
    cut = shorten(text, 40)
    assert len(cut) <= 40 and cut.endswith("...") and text.startswith(cut[:-3])
    assert text[len(cut) - 3] == " "  # the cut falls between words
    assert shorten("short", 40) == "short"


BENCH = Path(memplan.experiments.bench.__file__).parent
CLI = Path(memplan.experiments.cli.__file__).parent
SCRIPTS = sorted(p.stem for p in BENCH.glob("*.py") if "__main__" in p.read_text())


def _table_literals(tree: ast.AST) -> list[str]:
    """String pieces that start a hand-made Markdown row or rule ('| a | b |', '|---|')."""
    found = []
    for node in ast.walk(tree):
        text = node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None
        if isinstance(node, ast.JoinedStr) and node.values and isinstance(node.values[0], ast.Constant):
            text = str(node.values[0].value)
        if text is not None and text.startswith(("| ", "|-", "|:")):
            found.append(text[:30])
    return found


def test_flags_and_tables_come_from_the_shared_helpers_only():
    for path in sorted([*BENCH.glob("*.py"), *CLI.glob("*.py")]):
        if path.name in ("args.py", "tables.py"):
            continue
        tree = ast.parse(path.read_text())
        declared = [
            node.args[0].value
            for node in ast.walk(tree)
            if isinstance(node, ast.Call)
            and getattr(node.func, "attr", "") == "add_argument"
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and node.args[0].value in ("--time-limit", "--models", "--solvers")
        ]
        assert not declared, f"{path.name} declares {declared} itself (experiments.flags has them)"
        assert not _table_literals(tree), f"{path.name} builds Markdown rows by hand: {_table_literals(tree)}"
        uses_nargs = [  # nargs="?" (one optional value, as bench-csv's folder) is not a list
            kw.arg
            for node in ast.walk(tree)
            if isinstance(node, ast.Call)
            for kw in node.keywords
            if kw.arg == "nargs" and not (isinstance(kw.value, ast.Constant) and kw.value.value == "?")
        ]
        assert not uses_nargs, f"{path.name}: lists are comma-separated, not nargs"


@pytest.mark.parametrize("script", SCRIPTS)
def test_every_time_limit_is_the_solvers_default_or_says_why(script, capsys):
    from memplan.solvers import DEFAULT_TIME_LIMIT_S

    module = importlib.import_module(f"memplan.experiments.bench.{script}")
    with pytest.raises(SystemExit) as done:
        module.main(["--help"])
    assert done.value.code == 0
    text = " ".join(capsys.readouterr().out.split())
    if "--time-limit" not in text:
        return
    found = re.search(r"seconds per solve for time-limited solvers \(default: ([0-9.]+)(;?)", text)
    assert found, f"{script}: --time-limit is not the shared flag"
    assert float(found.group(1)) == DEFAULT_TIME_LIMIT_S or found.group(2) == ";", (
        f"{script}: a default of {found.group(1)} s needs its reason in the help"
    )


def test_a_script_list_flag_takes_commas_and_refuses_unknown_names(capsys):
    from memplan.experiments.bench import heuristics

    heuristics.main(["--sizes", "50,60", "--solvers", "greedy,bestfit"])
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| ")][1:]
    assert [[c.strip() for c in r.strip("|").split("|")][:2] for r in rows] == [
        ["50", "greedy"],
        ["50", "bestfit"],
        ["60", "greedy"],
        ["60", "bestfit"],
    ]
    with pytest.raises(SystemExit) as done:
        heuristics.main(["--solvers", "greedy,bestfir"])
    assert done.value.code == 2
    assert "unknown solver 'bestfir' (did you mean 'bestfit'?)" in capsys.readouterr().err


def test_a_streamed_table_formats_cells_as_the_whole_table_does(capsys):
    import pandas as pd

    from memplan.experiments.markdown import StreamedTable, markdown

    values = ["unet", 1_048_576, True, None, 0.125, -0.03]
    columns = ["model", "arena_bytes", "proven", "note", "solve_seconds", "saving_vs_stock"]
    StreamedTable(columns).row(values)
    header, rule, row = capsys.readouterr().out.splitlines()
    assert header == "| " + " | ".join(columns) + " |" and set(rule) <= {"|", "-"}
    whole = markdown(pd.DataFrame([values], columns=columns)).splitlines()[2]
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells == [c.strip() for c in whole.strip("|").split("|")]
    assert cells == ["unet", "1,048,576", "yes", "", "0.125", "-3.0%"]
    with pytest.raises(ValueError, match="2 cells for the 6 columns"):
        StreamedTable(columns).row(["a", "b"])
