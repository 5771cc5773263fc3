"""The benchmark scripts speak the CLI's language: comma lists, the sweep's solver set and defaults,
Markdown tables, positive saving = smaller than stock."""

from __future__ import annotations

from memplan.experiments.bench import catfusion_report, compare_stock
from memplan.experiments.cli import args as script_args


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
    script_args.add_common(parser)
    args = parser.parse_args([])
    assert script_args.solvers_of(args) == solvers.available()
    assert args.time_limit == DEFAULT_TIME_LIMIT_S and script_args.switch_of(args.cat_fusion) is True


def test_shorten_cuts_at_a_word_boundary():
    from memplan.experiments.cli.tables import shorten

    text = "not proven: skyline probes (12) found 1,234 bytes, none found below 1,000"
    cut = shorten(text, 40)
    assert len(cut) <= 40 and cut.endswith("...") and text.startswith(cut[:-3])
    assert text[len(cut) - 3] == " "  # the cut falls between words
    assert shorten("short", 40) == "short"
