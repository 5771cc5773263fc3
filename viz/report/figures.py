"""The interactive figures of a report, with plotly: the arena chart and the live-bytes profile.

Plotly, not bokeh: its figures are plain JSON, embed in one HTML file with the library inlined once
(viz.report.plotlyjs: its basic bundle), show inline in Jupyter without a server, and hover, zoom and pan need no
JavaScript of ours. Rectangles are bars (`base` = byte offset, `width` = lifetime), one SVG path each
with its own hover; past `HOVER_LIMIT` tensors per plan the smallest (bytes x steps) are drawn as
outlines in one line trace without hover, so a 20-layer LLM stays a few MB and responsive. No WebGL:
headless and remote-desktop browsers often have none.
"""

from __future__ import annotations

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from memplan.problem import BufferKind
from memplan.viz.report.model import MethodReport, PlanView, TensorInfo
from memplan.viz.style import ARENA_COLOUR, KIND_COLOURS, KIND_NAMES, LOWER_BOUND_COLOUR, format_bytes

HOVER_LIMIT = 4000  # tensors per plan drawn as bars with hover; the rest as outlines
PLAN_COLOURS = ("#222222", "#7F7F7F", "#0072B2")
HOVER = (
    "<b>%{customdata[0]}</b><br>op: %{customdata[1]}<br>shape: %{customdata[2]} %{customdata[3]}"
    "<br>bytes: %{customdata[4]}<br>lifetime: %{customdata[5]}<br>%{customdata[6]}"
    "<br>source: %{customdata[7]}<extra>%{fullData.name}</extra>"
)


def lane_bases(plans: list[PlanView]) -> dict[int, int]:
    """Where each mem_id's byte 0 sits on the shared y axis: lanes stacked in mem_id order, each as
    tall as the largest plan's arena for it, so every plan is drawn on the same axes."""
    height: dict[int, int] = {}
    for plan in plans:
        for mem_id, _ in plan.offsets.values():
            height.setdefault(mem_id, 0)
        for mem_id, size in plan.arenas.items():
            height[mem_id] = max(height.get(mem_id, 0), size)
    bases, at = {}, 0
    for mem_id in sorted(height):
        bases[mem_id] = at
        at += height[mem_id]
    return bases


def _customdata(t: TensorInfo, plan: PlanView) -> list[str]:
    mem_id, offset = plan.offsets[t.name]
    where = f"{plan.lane(mem_id)}, offset {offset:,}" + (f" (inside {t.parent})" if t.parent else "")
    where += " · state shared across methods" if t.shared else ""
    return [t.name, t.op, t.shape, t.dtype, f"{t.nbytes:,}", t.lifetime, where, t.source or "unknown"]


def _drawn(plan: PlanView) -> tuple[list[TensorInfo], list[TensorInfo]]:
    """(tensors drawn as bars with hover, tensors drawn as plain outlines)."""
    order = sorted(plan.tensors.values(), key=lambda t: (-(t.nbytes * (t.end - t.start)), t.name))
    order = [t for t in order if t.nbytes > 0]
    return order[:HOVER_LIMIT], order[HOVER_LIMIT:]


def arena_figure(method: MethodReport, height: int = 460) -> go.Figure:
    """memplan's plan and the plans compared with it side by side, one shared byte axis, lanes per mem_id."""
    plans = method.plans
    bases = lane_bases(plans)
    fig = make_subplots(
        rows=1,
        cols=len(plans),
        shared_yaxes=True,
        horizontal_spacing=0.03,
        subplot_titles=[f"{p.label}: {format_bytes(p.arena_bytes)} ({p.arena_bytes:,} B)" for p in plans],
    )
    shown: set[str] = set()
    for col, plan in enumerate(plans, start=1):
        bars, rest = _drawn(plan)
        for kind in BufferKind:
            mine = [t for t in bars if t.kind == kind.value]
            if not mine:
                continue
            name = KIND_NAMES[kind]
            fig.add_trace(
                go.Bar(
                    x=[(t.start + t.end) / 2 for t in mine],
                    width=[t.end - t.start for t in mine],
                    base=[bases[plan.offsets[t.name][0]] + plan.offsets[t.name][1] for t in mine],
                    y=[t.nbytes for t in mine],
                    customdata=[_customdata(t, plan) for t in mine],
                    hovertemplate=HOVER,
                    name=name,
                    legendgroup=name,
                    showlegend=name not in shown,
                    marker={
                        "color": KIND_COLOURS[kind],
                        # Many boxes: an outline in the box's own colour keeps a one-step box at least a
                        # pixel wide (a 1-step lifetime is a fraction of a pixel on a 2,000-step axis).
                        "line": {"color": "#333333", "width": 0.5}
                        if len(bars) < 300
                        else {"color": KIND_COLOURS[kind], "width": 1},
                        "pattern": {"shape": ["/" if t.shared else "" for t in mine]},
                    },
                    meta=[plan.label],
                ),
                row=1,
                col=col,
            )
            shown.add(name)
        if rest:
            fig.add_trace(_outlines(rest, plan, bases), row=1, col=col)
        for mem_id, base in bases.items():
            size = plan.arenas.get(mem_id, 0)
            fig.add_hline(
                y=base + size, line={"color": ARENA_COLOUR, "dash": "dash", "width": 1}, row=1, col=col
            )
            if base:
                fig.add_hline(y=base, line={"color": "#000000", "width": 1.5}, row=1, col=col)
            if col == 1:
                fig.add_annotation(
                    x=0,
                    y=base,
                    xref="x domain",
                    yref="y",
                    text=plan.lane(mem_id),
                    showarrow=False,
                    xanchor="left",
                    yanchor="bottom",
                    font={"size": 10},
                )
        fig.update_xaxes(title_text="step (instruction order at planning)", row=1, col=col)
    fig.update_yaxes(title_text="bytes (lanes: mem_id)", row=1, col=1)
    fig.update_layout(
        barmode="overlay",
        bargap=0,
        height=height,
        margin={"l": 60, "r": 20, "t": 50, "b": 40},
        hovermode="closest",
        dragmode="zoom",
        legend={"orientation": "h", "y": -0.18},
    )
    return fig


def _outlines(tensors: list[TensorInfo], plan: PlanView, bases: dict[int, int]) -> go.Scatter:
    """The many small tensors as rectangle outlines in one trace (None separates them)."""
    xs: list[float | None] = []
    ys: list[float | None] = []
    for t in tensors:
        mem_id, offset = plan.offsets[t.name]
        low = bases[mem_id] + offset
        high = low + t.nbytes
        xs += [t.start, t.end, t.end, t.start, t.start, None]
        ys += [low, low, high, high, low, None]
    return go.Scatter(
        x=xs,
        y=ys,
        mode="lines",
        line={"width": 0.5, "color": "#555555"},
        hoverinfo="skip",
        name=f"{len(tensors):,} smaller tensors (outline only)",
    )


def arena_lines(plans: list[PlanView]) -> list[tuple[str, str, int]]:
    """(colour, label, bytes) of one dashed line per distinct arena size: plans of equal arenas share a
    line and one label ("arena memplan (cpsat) = ExecuTorch (stock): 1,572,864 B"), since labels drawn
    at the same height overprint each other."""
    lines: dict[int, tuple[str, list[str]]] = {}
    for colour, plan in zip(PLAN_COLOURS, plans):
        lines.setdefault(plan.arena_bytes, (colour, []))[1].append(plan.label)
    return [
        (colour, f"arena {' = '.join(labels)}: {arena:,} B", arena)
        for arena, (colour, labels) in lines.items()
    ]


def profile_figure(method: MethodReport, height: int = 320) -> go.Figure:
    """Bytes live at each step under every plan, each plan's arena, memplan's lower bound, the peak."""
    fig = go.Figure()
    for colour, plan in zip(PLAN_COLOURS, method.plans):
        steps, levels = plan.live_profile()
        fig.add_trace(
            go.Scatter(
                x=steps,
                y=levels,
                mode="lines",
                line={"shape": "hv", "color": colour, "width": 1.5},
                name=f"live bytes, {plan.label}",
                hovertemplate="step %{x}: %{y:,} B live<extra></extra>",
            )
        )
    for colour, text, arena in arena_lines(method.plans):
        fig.add_hline(
            y=arena,
            line={"color": colour, "dash": "dash", "width": 1},
            annotation_text=text,
            annotation_position="top left",
        )
    primary = method.primary
    if primary.lower_bound is not None:
        fig.add_hline(
            y=primary.lower_bound,
            line={"color": LOWER_BOUND_COLOUR, "dash": "dot", "width": 1.5},
            annotation_text=f"lower bound {primary.lower_bound:,} B",
            annotation_position="bottom right",
        )
    peak, step = primary.peak()
    fig.add_trace(
        go.Scatter(
            x=[step],
            y=[peak],
            mode="markers+text",
            marker={"color": ARENA_COLOUR, "size": 10},
            text=[f"peak {format_bytes(peak)} at step {step}"],
            textposition="top left",
            name="peak",
            hovertemplate="peak: %{y:,} B live at step %{x}<extra></extra>",
        )
    )
    fig.update_layout(
        height=height,
        margin={"l": 60, "r": 20, "t": 30, "b": 40},
        xaxis_title="step",
        yaxis_title="bytes live",
        legend={"orientation": "h", "y": -0.25},
    )
    return fig
