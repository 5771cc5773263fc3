"""Issue 36: where a plan's outcome is shown (`memplan plan`'s summary, `memplan run`'s table, the sweep's
table and summary, the report page), a method whose emitted lower bound cannot be derived says why
in one line of the table, not only in the `Plan` repr. The bound is made underivable by an emitter
that raises a two-line error."""

from __future__ import annotations

import pandas as pd
import pytest
import torch
from executorch.exir import to_edge

import memplan
from memplan.experiments.cli import run as run_cli
from memplan.experiments.cli.one_model import format_summary
from memplan.experiments.planning import plan_model
from memplan.experiments.sweep import report as sweep_report
from memplan.planner.stages.result import UNKNOWN_BOUND

REASON = f"{UNKNOWN_BOUND}: emitting it raised RuntimeError: the emitter broke here and there"


class Branches(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a, self.b = torch.nn.Conv2d(3, 4, 1), torch.nn.Conv2d(3, 4, 3, padding=1)

    def forward(self, x):
        return torch.cat([self.a(x), self.b(x)], dim=1).relu()


EXAMPLE = (torch.randn(1, 3, 8, 8),)


@pytest.fixture
def broken_emitter(monkeypatch):
    def raises(*args, **kwargs):
        raise RuntimeError("the emitter broke here\nand there")

    monkeypatch.setattr("memplan.planner.stages.proof_check.emitted_bounds", raises)
    # the certificate read off the graph would settle this plan without emitting: make it settle nothing
    monkeypatch.setattr("memplan.planner.stages.proof_check._certified", lambda *args, **kwargs: False)


@pytest.fixture
def planned(broken_emitter):
    return plan_model(Branches().eval(), "cpsat", example_inputs=EXAMPLE, stock=False)


def test_plan_summary_has_the_reason_in_its_column_and_one_line_under_the_table(planned):
    row = planned.summary.set_index("method").loc["forward"]
    assert not row["proven_optimal"] and row["not_proven_because"] == REASON
    text = format_summary(planned)
    assert f"\n* forward: {REASON}" in text
    assert "not_proven_because" not in text.splitlines()[1]  # a footnote, not a column of the table


def test_the_report_page_says_not_proven_and_why(planned, tmp_path):
    page = planned.report(tmp_path / "r.html").read_text()
    assert f"<td class='not-proven'>no: {REASON}</td>" in page.replace("&#x27;", "'")


def test_the_run_table_has_the_reason_under_it(broken_emitter):
    with memplan.substituted(solver="bestfit") as run:
        to_edge(torch.export.export(Branches().eval(), EXAMPLE)).to_executorch()
    [program] = run.programs
    [row] = program.rows()
    assert row["proven"] is False and row["not_proven_because"] == REASON
    text = run_cli.tables(run.programs)
    assert f"\n* forward: {REASON}" in text and text.count(REASON) == 1


def test_the_sweep_summary_lists_the_rows_without_a_bound(planned):
    rows = planned.summary.assign(
        model="branches", solver="cpsat", alignment=16, cat_fusion=True, time_limit_seconds=5.0, error=None
    )
    rows["stock_arena_bytes"] = rows["arena_bytes"]
    rows["saving_vs_stock"] = 0.0
    rows["ran_ok"] = rows["matches_eager"] = pd.NA
    text = sweep_report.summary_markdown(rows)
    why = REASON.removeprefix(UNKNOWN_BOUND + ": ")
    assert "## Lower bounds not derived" in text and f"| branches | forward | cpsat | {why} |" in text


def test_a_plan_with_its_bound_derived_shows_no_reason():
    planned = plan_model(Branches().eval(), "cpsat", example_inputs=EXAMPLE, stock=False)
    row = planned.summary.set_index("method").loc["forward"]
    assert row["proven_optimal"] and row["not_proven_because"] == ""
    assert row["lower_bound_bytes"] == planned.results["forward"].emitted_lower_bound == row["arena_bytes"]
    assert "\n* " not in format_summary(planned)
