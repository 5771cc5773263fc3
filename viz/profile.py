"""Bytes live over time against the arenas plans need: how much room a planner wastes."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence

import matplotlib.pyplot as plt
from matplotlib.axes import Axes

from memplan.plan import Plan
from memplan.problem import Problem
from memplan.viz.style import ARENA_COLOUR, SOLVER_COLOURS, bytes_axis, format_bytes, solver_colour

TOTAL, PEAK = "live_total", "peak"  # gids; per-pool lines are "live_pool_<pool>", arenas "arena_<name>"
_ARENA_STYLES = ("--", "-.", ":", (0, (5, 1, 1, 1, 1, 1)))


def live_bytes(problem: Problem, pool: int | None = None) -> tuple[list[int], list[int]]:
    """(times, bytes live from each time on) over group roots, in one pool or all.

    A step function: `bytes[i]` are live over `[times[i], times[i + 1])`.
    Lifetimes are half-open, so a buffer ending at t and one starting at t are
    never counted together.
    """
    change: dict[int, int] = defaultdict(int)
    for buf in problem.roots():
        if pool is None or buf.pool == pool:
            change[buf.start] += buf.size
            change[buf.end] -= buf.size
    times = sorted(change)
    live, levels = 0, []
    for t in times:
        live += change[t]
        levels.append(live)
    return times, levels


def profile(
    problem: Problem,
    plans: Plan | Sequence[Plan] | Mapping[str, Plan],
    ax: Axes | None = None,
    *,
    zoom: Axes | None = None,
) -> Axes:
    """Bytes live at each step (total, and per pool when there are several),
    each plan's arena as a horizontal line, and the peak marked.

    `zoom`: a second axes that shows the same around the peak, where arenas a
    few hundred bytes apart would share a pixel row on the full scale (the
    window is outlined on `ax`); left empty when no two arenas are that close.
    """
    if ax is None:
        _, ax = plt.subplots(figsize=(10, 4))
    if zoom is not None:
        _zoom(problem, plans, ax, zoom)
    named = _named(plans)
    times, levels = live_bytes(problem)
    ax.step(times, levels, where="post", color="0.15", linewidth=1.4, label="live, all pools", gid=TOTAL)
    if len(problem.pools) > 1:
        for pool in problem.pools:
            pool_times, pool_levels = live_bytes(problem, pool)
            ax.step(
                pool_times,
                pool_levels,
                where="post",
                linewidth=1.0,
                alpha=0.8,
                label=f"live, {problem.pool_label(pool)}",
                gid=f"live_pool_{pool}",
            )
    if levels:
        peak = max(levels)
        at = times[levels.index(peak)]
        ax.plot(
            [at],
            [peak],
            marker="v",
            color="0.15",
            linestyle="none",
            gid=PEAK,
            label=f"peak {format_bytes(peak)} at step {at}",
        )
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for n, (name, plan) in enumerate(named.items()):
        ax.axhline(  # styles differ too: arenas a few bytes apart draw on the same pixels
            plan.arena_size,
            linestyle=_ARENA_STYLES[n % len(_ARENA_STYLES)],
            linewidth=1.2,
            gid=f"arena_{name}",
            color=_arena_colour(name, plan, len(named), colours[n % len(colours)]),
            label=f"{name}: arena {format_bytes(plan.arena_size)} ({plan.arena_size:,} B)",
        )
    ax.set_ylim(bottom=0)
    if times:
        ax.set_xlim(times[0], times[-1])
    bytes_axis(ax.yaxis)
    ax.set_xlabel("execution step")
    ax.set_ylabel("bytes")
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1), fontsize=8)
    return ax


def peak_window(
    problem: Problem, plans: Plan | Sequence[Plan] | Mapping[str, Plan], near: float = 0.02
) -> tuple[tuple[float, float], tuple[float, float]] | None:
    """(x range, y range) around the peak and the lowest two arenas within `near` of each other;
    None when no two arenas are that close."""
    times, levels = live_bytes(problem)
    arenas = sorted(p.arena_size for p in _named(plans).values())
    pairs = [(a, b) for a, b in zip(arenas, arenas[1:]) if b - a <= near * b]
    if not levels or not pairs:
        return None
    low, high = pairs[0]
    at = times[levels.index(max(levels))]
    margin = max(high - low, high // 200, 1)
    width = max((times[-1] - times[0]) // 20, 2)
    return (at - width, at + width), (low - 3 * margin, high + 2 * margin)


def _zoom(problem: Problem, plans, ax: Axes, zoom: Axes) -> None:
    window = peak_window(problem, plans)
    if window is None:
        zoom.set_axis_off()
        return
    profile(problem, plans, ax=zoom)
    legend = zoom.get_legend()
    if legend is not None:
        legend.remove()
    (x0, x1), (y0, y1) = window
    zoom.set_xlim(x0, x1)
    zoom.set_ylim(y0, y1)
    zoom.set_ylabel("")
    zoom.set_title("around the peak", fontsize=10)
    ax.indicate_inset((x0, y0, x1 - x0, y1 - y0), edgecolor="0.3", gid="zoom_window")


def _arena_colour(name: str, plan: Plan, count: int, cycled: str) -> str:
    """A solver's fixed colour when the line is named after one (or its plan's solver), else the cycle."""
    for candidate in (name, plan.solver):
        if candidate.split(",")[0].split(" (")[0] in SOLVER_COLOURS:
            return solver_colour(candidate)
    return ARENA_COLOUR if count == 1 else cycled


def _named(plans: Plan | Sequence[Plan] | Mapping[str, Plan]) -> dict[str, Plan]:
    """Plans keyed by the name shown in the legend (the solver unless given)."""
    if isinstance(plans, Plan):
        return {plans.solver: plans}
    if isinstance(plans, Mapping):
        return dict(plans)
    named: dict[str, Plan] = {}
    for plan in plans:
        name, k = plan.solver, 2
        while name in named:
            name, k = f"{plan.solver} ({k})", k + 1
        named[name] = plan
    return named
