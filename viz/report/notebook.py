"""A program's report as a few kilobytes of HTML for a Jupyter cell: the per-method table, and per
method a small inline SVG of the live bytes under each plan with memplan's peak marked.

`PlannedModel._repr_html_` shows it; the whole interactive report is one call away
(`planned.report("report.html")`), as is Model Explorer (`memplan explore MODEL`).
"""

from __future__ import annotations

import html

from memplan.html import Series, step_chart
from memplan.viz.report.figures import PLAN_COLOURS
from memplan.viz.report.model import MethodReport, ProgramReport
from memplan.viz.style import format_bytes


def live_bytes_chart(method: MethodReport) -> str:
    """Live bytes over the steps under every plan of `method`, memplan's peak as a red dot."""
    series = [
        Series(f"{plan.label}: arena {plan.arena_bytes:,} B", colour, *plan.live_profile())
        for colour, plan in zip(PLAN_COLOURS, method.plans)
    ]
    peak, step = method.primary.peak()
    title = f"{method.method}: live bytes, peak {format_bytes(peak)} at step {step}"
    return step_chart(title, series, [(step, peak)])


def program_html(report: ProgramReport, heading: str, table_html: str) -> str:
    """`heading`, the per-method table (HTML), one live-bytes chart per method, where the rest is."""
    charts = "".join(f"<div class='memplan-live'>{live_bytes_chart(m)}</div>" for m in report.methods)
    return (
        f"<div class='memplan'><b>{html.escape(heading)}</b>{table_html}{charts}"
        "<div style='font-size:11px;color:#555'>the whole interactive report: <code>.report('report.html')</code>;"
        " in Model Explorer: <code>memplan explore MODEL</code></div></div>"
    )
