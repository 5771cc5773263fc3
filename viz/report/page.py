"""One self-contained HTML page of a program's report: opens offline, plotly's JavaScript inlined once.

Top: the verdict per bank (when a budget is given) and the whole budget; then per method the
numbers, the arena chart, the live-bytes profile and "the peak explained". Elements carry classes and
`data-` attributes (`section.method[data-method]`, `tr[data-tensor]`, `li.verdict[data-bank]`) so
tests and scripts can read the page.
"""

from __future__ import annotations

import html
from pathlib import Path

from memplan.viz.report.budget import BudgetBank, assumes_first_bank, budget_rows, verdicts
from memplan.viz.report.explain import peak_rows
from memplan.viz.report.figures import arena_figure, profile_figure
from memplan.viz.report.model import MethodReport, PlanView, ProgramReport
from memplan.viz.style import format_bytes

PEAK_ROWS = 25  # tensors listed in "the peak explained"; the rest are summed in one line
_CONFIG = {"displaylogo": False, "scrollZoom": True, "responsive": True}

_STYLE = """
body{font-family:system-ui,sans-serif;margin:1.5em auto;max-width:1400px;color:#222;padding:0 1em}
table{border-collapse:collapse;margin:.5em 0;font-size:13px}td,th{border:1px solid #ccc;padding:3px 7px;
text-align:left;vertical-align:top}th{background:#f3f3f3}td.num{text-align:right;font-variant-numeric:tabular-nums}
.verdict.fits{color:#11772d}.verdict.fails{color:#b00020}.unknown{color:#8a5a00}section.method{border-top:2px solid
#444;margin-top:2em}.note{color:#555;font-size:13px}code{font-size:12px}
"""


def _e(text: object) -> str:
    return html.escape(str(text))


def _bytes(n: int | None) -> str:
    return '<span class="unknown">unknown</span>' if n is None else f"{n:,} B ({_e(format_bytes(n))})"


def render(report: ProgramReport, budget: list[BudgetBank] | None = None) -> str:
    """The page as a string."""
    parts = [
        "<!DOCTYPE html><html><head><meta charset='utf-8'>",
        f"<title>memplan report: {_e(report.name)}</title><style>{_STYLE}</style></head><body>",
        f"<h1>memplan report: {_e(report.name)}</h1>",
        f"<p class='note'>{_e(report.source)}; levers: "
        + (_e(", ".join(f"{k} {'on' if v else 'off'}" for k, v in report.levers.items())) or "n/a")
        + "</p>",
        _summary(report),
        _budget(report, budget),
    ]
    first = True
    for method in report.methods:
        parts.append(_method(method, first))
        first = False
    parts.append("</body></html>")
    return "\n".join(parts)


def write(report: ProgramReport, path: str | Path, budget: list[BudgetBank] | None = None) -> Path:
    path = Path(path)
    path.write_text(render(report, budget), encoding="utf-8")
    return path


def _summary(report: ProgramReport) -> str:
    labels = [p.label for p in report.methods[0].plans] if report.methods else []
    head = "".join(f"<th>{_e(label)}</th>" for label in labels)
    rows = []
    for m in report.methods:
        cells = "".join(f"<td class='num'>{p.arena_bytes:,}</td>" for p in m.plans)
        bound = m.primary.lower_bound
        rows.append(
            f"<tr><td>{_e(m.method)}</td><td class='num'>{len(m.primary.tensors):,}</td>{cells}"
            f"<td class='num'>{'' if bound is None else f'{bound:,}'}</td>{_proof_cell(m.primary)}</tr>"
        )
    return (
        "<h2>Methods</h2><table class='summary'><tr><th>method</th><th>tensors</th>"
        f"{head}<th>lower bound</th><th>proven ({_e(labels[0] if labels else '')})</th></tr>{''.join(rows)}"
        "</table><p class='note'>arena bytes per plan; proven: no smaller arena exists for the program"
        " (the solver proved it, or the arena is the program's lower bound)</p>"
    )


def _proof_cell(plan: PlanView) -> str:
    if plan.proven is None:
        return "<td></td>"
    if plan.proven:
        return "<td class='proven'>yes</td>"
    return f"<td class='not-proven'>no: {_e(plan.not_proven_because)}</td>"


def _budget(report: ProgramReport, budget: list[BudgetBank] | None) -> str:
    parts = ["<h2>The whole budget</h2>"]
    if budget:
        items = []
        for v in verdicts(report, budget):
            change = f"<br><span class='note'>smallest change: {_e(v.change)}</span>" if v.change else ""
            items.append(
                f"<li class='verdict {'fits' if v.fits else 'fails'}' data-bank='{_e(v.bank)}'"
                f" data-needed='{v.needed}' data-capacity='{v.capacity}'>"
                f"<b>{'FITS' if v.fits else 'DOES NOT FIT'}</b> {_e(v.sentence())}"
                f" (needs {v.needed:,} B of {v.capacity:,} B){change}</li>"
            )
        parts.append(f"<ul class='verdicts'>{''.join(items)}</ul>")
        if assumes_first_bank(report, budget) and len(budget) > 1:
            parts.append(
                f"<p class='note first-bank'>This plan was made without a memory map: every arena counts"
                f" against the first bank, {_e(budget[0].name)}, and the later banks hold nothing planned."
                " Report with --memory-map to plan across the banks.</p>"
            )
    rows = "".join(
        f"<tr><td>{_e(r.what)}</td><td class='num'>{_bytes(r.bytes)}</td><td>{_e(r.where)}</td></tr>"
        for r in budget_rows(report)
    )
    parts.append(f"<table class='budget'><tr><th>what</th><th>bytes</th><th>where</th></tr>{rows}</table>")
    return "\n".join(parts)


def figure_html(fig, div_id: str, include_js: bool) -> str:
    return fig.to_html(full_html=False, include_plotlyjs=include_js, div_id=div_id, config=_CONFIG)


def _method(method: MethodReport, include_js: bool) -> str:
    slug = "".join(c if c.isalnum() else "_" for c in method.method)
    parts = [f"<section class='method' data-method='{_e(method.method)}'><h2>Method {_e(method.method)}</h2>"]
    emitted = " + ".join(f"{s:,}" for s in method.emitted[1:]) or "0"
    parts.append(f"<p>arenas written into the program (mem_id 1, 2, ...): {emitted} B</p>")
    parts += [f"<p class='note'>{_e(n)}</p>" for n in method.notes]
    parts.append("<h3>Arena</h3>")
    parts.append(figure_html(arena_figure(method), f"arena_{slug}", include_js))
    parts.append("<h3>Live bytes over the instruction stream</h3>")
    parts.append(figure_html(profile_figure(method), f"profile_{slug}", False))
    parts.append(_peak(method))
    parts.append("</section>")
    return "\n".join(parts)


def _peak(method: MethodReport) -> str:
    peak, step, rows = peak_rows(method)
    shown = rows[:PEAK_ROWS]
    body = []
    for r in shown:
        t = r.tensor
        holds = f"<br><span class='note'>holds {_e(', '.join(r.holds))}</span>" if r.holds else ""
        said = "<br>".join(_e(a) for a in r.actions)
        body.append(
            f"<tr data-tensor='{_e(t.name)}' data-bytes='{t.nbytes}'><td><code>{_e(t.name)}</code>{holds}</td>"
            f"<td class='num'>{t.nbytes:,}</td><td class='num'>{r.share:.0%}</td><td>{_e(t.op)}</td>"
            f"<td>{_e(t.shape)} {_e(t.dtype)}</td><td>{_e(t.lifetime)}</td>"
            f"<td><code>{_e(t.source or 'unknown')}</code></td><td>{said}</td></tr>"
        )
    rest = rows[PEAK_ROWS:]
    more = (
        f"<p class='note'>and {len(rest):,} more tensors of {sum(r.tensor.nbytes for r in rest):,} B together</p>"
        if rest
        else ""
    )
    return (
        f"<h3>The peak explained</h3><p class='peak-summary' data-peak='{peak}' data-step='{step}'>"
        f"{peak:,} B ({_e(format_bytes(peak))}) live at step {step} under {_e(method.primary.label)},"
        f" in {len(rows):,} tensors, largest first:</p>"
        "<table class='peak'><tr><th>tensor</th><th>bytes</th><th>share</th><th>written by</th><th>shape</th>"
        f"<th>lifetime</th><th>source line</th><th>what memplan did</th></tr>{''.join(body)}</table>{more}"
    )
