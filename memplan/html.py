"""Small HTML for notebooks: a table and a step-line chart as inline SVG, no library and no script.

The objects that show themselves in Jupyter (`_repr_html_` of `Plan`, of the pass's results, of
`memplan.plan_model`'s `PlannedModel`, of `memplan.load_results`' table) stay a few kilobytes: a
plotly figure would carry its 4 MB JavaScript into every notebook cell.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from dataclasses import dataclass

WIDTH, HEIGHT = 420, 130  # pixels of a chart
_PAD = 4


def table(columns: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """An HTML table; numbers right-aligned with thousands separators."""
    head = "".join(f"<th>{html.escape(c)}</th>" for c in columns)
    body = "".join("<tr>" + "".join(_cell(v) for v in row) + "</tr>" for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _cell(value: object) -> str:
    if isinstance(value, bool) or value is None:
        return f"<td>{'' if value is None else value}</td>"
    if isinstance(value, int):
        return f"<td style='text-align:right'>{value:,}</td>"
    if isinstance(value, float):
        return f"<td style='text-align:right'>{value:.3g}</td>"
    return f"<td>{html.escape(str(value))}</td>"


@dataclass(frozen=True)
class Series:
    """A step function: `levels[i]` holds from `steps[i]` to the next step."""

    label: str
    colour: str
    steps: Sequence[int]
    levels: Sequence[int]


def step_chart(title: str, series: Sequence[Series], marks: Sequence[tuple[int, int]] = ()) -> str:
    """An inline SVG of step functions on shared axes (x: steps, y: bytes from 0), `marks` (step,
    bytes) drawn as dots; the title and a legend as text."""
    xs = [s for line in series for s in line.steps] or [0]
    top = max([v for line in series for v in line.levels] + [v for _, v in marks] + [1])
    low, high = min(xs), max(max(xs), min(xs) + 1)

    def x(step: float) -> float:
        return _PAD + (step - low) / (high - low) * (WIDTH - 2 * _PAD)

    head = 16 + 12 * len(series)  # the title and one legend line per series, above the lines

    def y(value: float) -> float:
        return HEIGHT - _PAD - value / top * (HEIGHT - head - _PAD)

    parts = [
        f"<svg xmlns='http://www.w3.org/2000/svg' width='{WIDTH}' height='{HEIGHT}' role='img'"
        f" aria-label='{html.escape(title)}'>",
        f"<text x='{_PAD}' y='11' font-size='11' font-family='sans-serif'>{html.escape(title)}</text>",
    ]
    for n, line in enumerate(series):
        points = []
        for i, (step, level) in enumerate(zip(line.steps, line.levels)):
            nxt = line.steps[i + 1] if i + 1 < len(line.steps) else step
            points += [f"{x(step):.1f},{y(level):.1f}", f"{x(nxt):.1f},{y(level):.1f}"]
        parts.append(
            f"<polyline fill='none' stroke='{line.colour}' stroke-width='1.3' points='{' '.join(points)}'/>"
        )
        parts.append(
            f"<text x='{_PAD}' y='{23 + 12 * n}' font-size='10'"
            f" font-family='sans-serif' fill='{line.colour}'>{html.escape(line.label)}</text>"
        )
    for step, value in marks:
        parts.append(f"<circle cx='{x(step):.1f}' cy='{y(value):.1f}' r='2.5' fill='#d7191c'/>")
    parts.append("</svg>")
    return "".join(parts)


def bar_chart(title: str, bars: Sequence[tuple[str, float, str]], base: float = 0.0) -> str:
    """An inline SVG of horizontal bars `(label, value, colour)` rising from `base`, values printed."""
    row = 16
    height = 18 + row * len(bars)
    top = max([v - base for _, v, _ in bars] + [1e-9])
    room = WIDTH - 150
    parts = [
        f"<svg xmlns='http://www.w3.org/2000/svg' width='{WIDTH}' height='{height}' role='img'"
        f" aria-label='{html.escape(title)}'>",
        f"<text x='{_PAD}' y='11' font-size='11' font-family='sans-serif'>{html.escape(title)}</text>",
    ]
    for n, (label, value, colour) in enumerate(bars):
        y = 16 + row * n
        width = max(0.0, (value - base) / top * room)
        parts += [
            f"<text x='{_PAD}' y='{y + 11}' font-size='10' font-family='sans-serif'>{html.escape(label)}</text>",
            f"<rect x='90' y='{y + 2}' width='{width:.1f}' height='{row - 4}' fill='{colour}'/>",
            f"<text x='{94 + width:.1f}' y='{y + 11}' font-size='10' font-family='sans-serif'>{value:.3f}</text>",
        ]
    parts.append("</svg>")
    return "".join(parts)
