"""What a planned model and the pass's results show in a Jupyter cell: the numbers and a small inline
SVG of the live bytes (no plotly), the peak the one the plan has."""

from __future__ import annotations

import re

import pytest


@pytest.fixture(scope="module")
def planned():
    import memplan

    return memplan.plan_model("unet", "bestfit", time_limit_s=2)


def test_planned_model_shows_its_table_and_live_bytes(planned) -> None:
    shown = planned._repr_html_()
    report = planned.report_data()
    peak, step = report.methods[0].primary.peak()
    assert shown.count("<svg") == len(report.methods) == 1
    assert "ExecuTorch (stock)" in shown and "stock_arena_bytes" in shown
    assert f"at step {step}" in shown and "plotly" not in shown
    assert len(shown) < 20_000
    # the red dot sits on the peak: the chart's highest y (smallest pixel) among the plotted levels
    assert re.search(r"<circle cx='[\d.]+' cy='[\d.]+' r='2.5' fill='#d7191c'/>", shown)
    assert f"{planned.summary['arena_bytes'][0]}" in shown


def test_method_result_shows_its_arena_bound_levers_and_live_bytes(planned) -> None:
    from memplan.peak_bound import lower_bound

    result = planned.results["forward"]
    shown = result._repr_html_()
    assert f"{sum(result.buffer_sizes):,}" in shown and f"{sum(result.stock_sizes):,}" in shown
    assert f"{lower_bound(result.problem):,}" in shown
    assert "fused" in shown  # the cat report's summary
    assert f"peak {planned.report_data().methods[0].primary.peak()[0]:,} B" in shown


def test_planned_model_writes_model_explorer_node_data_and_its_program(planned, tmp_path) -> None:
    import json

    written = planned.model_explorer(tmp_path / "unet.json")
    assert written[0] == tmp_path / "unet.json" and len(written) == 5
    assert (tmp_path / "unet.pte").read_bytes() == planned.buffer
    live = json.loads(written[0].read_text())["forward"]["results"]
    assert max(v["value"] for v in live.values()) == planned.report_data().methods[0].primary.peak()[0]
