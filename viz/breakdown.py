"""Where the bytes go: live bytes by tensor kind, fragmentation over time, and anytime curves.

Each function draws on the `ax` it is given (or a new one) and returns it.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence

import matplotlib.pyplot as plt
from matplotlib.axes import Axes

from memplan.plan import Plan
from memplan.problem import BufferKind, Problem
from memplan.viz.profile import _named, live_bytes
from memplan.viz.style import (
    ARENA_COLOUR,
    KIND_COLOURS,
    KIND_NAMES,
    LOWER_BOUND_COLOUR,
    bytes_axis,
    format_bytes,
    solver_colour,
)


def kind_bytes(problem: Problem) -> tuple[list[int], dict[BufferKind, list[int]]]:
    """(times, per kind the bytes live from each time on) over group roots."""
    change: dict[BufferKind, dict[int, int]] = defaultdict(lambda: defaultdict(int))
    for buf in problem.roots():
        change[buf.kind][buf.start] += buf.size
        change[buf.kind][buf.end] -= buf.size
    times = sorted({t for steps in change.values() for t in steps})
    levels: dict[BufferKind, list[int]] = {}
    for kind in BufferKind:
        if kind not in change:
            continue
        live, series = 0, []
        for t in times:
            live += change[kind].get(t, 0)
            series.append(live)
        levels[kind] = series
    return times, levels


def kinds(problem: Problem, plan: Plan | None = None, ax: Axes | None = None) -> Axes:
    """Bytes live at each step, stacked by tensor kind (activations, inputs, outputs, state, ...),
    with the plan's arena as a line: which kind of tensor sets the peak."""
    if ax is None:
        _, ax = plt.subplots(figsize=(10, 4))
    times, levels = kind_bytes(problem)
    if times:
        kinds_drawn = list(levels)
        ax.stackplot(
            times,
            [levels[k] for k in kinds_drawn],
            step="post",
            colors=[KIND_COLOURS[k] for k in kinds_drawn],
            labels=[f"{KIND_NAMES[k]} (peak {format_bytes(max(levels[k]))})" for k in kinds_drawn],
        )
        for collection, kind in zip(ax.collections, kinds_drawn):
            collection.set_gid(f"kind_{kind.value}")
        ax.set_xlim(times[0], times[-1])
    if plan is not None:
        ax.axhline(
            plan.arena_size,
            color=ARENA_COLOUR,
            linestyle="--",
            linewidth=1.2,
            gid="arena",
            label=f"{plan.solver}: arena {format_bytes(plan.arena_size)}",
        )
    ax.set_ylim(bottom=0)
    bytes_axis(ax.yaxis)
    ax.set_xlabel("execution step")
    ax.set_ylabel("bytes live")
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1), fontsize=8)
    return ax


def fragmentation(
    problem: Problem, plans: Plan | Sequence[Plan] | Mapping[str, Plan], ax: Axes | None = None
) -> Axes:
    """Per plan, its arena minus the bytes live at each step: room the plan holds but does not use.

    Its minimum is the plan's excess over the lower bound (zero for a plan at the bound).
    """
    if ax is None:
        _, ax = plt.subplots(figsize=(10, 4))
    times, levels = live_bytes(problem)
    for name, plan in _named(plans).items():
        free = [plan.arena_size - live for live in levels]
        ax.step(
            times,
            free,
            where="post",
            color=solver_colour(name),
            linewidth=1.2,
            gid=f"free_{name}",
            label=f"{name}: at least {format_bytes(min(free, default=0))} unused",
        )
    if times:
        ax.set_xlim(times[0], times[-1])
    ax.set_ylim(bottom=0)
    bytes_axis(ax.yaxis)
    ax.set_xlabel("execution step")
    ax.set_ylabel("arena - live bytes")
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1), fontsize=8)
    return ax


def anytime(
    curves: Mapping[str, Sequence[tuple[float, int]]],
    lower_bound: int | None = None,
    ax: Axes | None = None,
) -> Axes:
    """Best arena found against seconds spent, one step curve per solver (`(seconds, arena)` points),
    with the lower bound as a line: how long a solver needs to get close."""
    if ax is None:
        _, ax = plt.subplots(figsize=(7, 4))
    for name, points in curves.items():
        points = sorted(points)
        best, xs, ys = None, [], []
        for seconds, arena in points:
            best = arena if best is None else min(best, arena)
            xs.append(seconds)
            ys.append(best)
        ax.step(
            xs,
            ys,
            where="post",
            marker="o",
            markersize=3,
            color=solver_colour(name),
            label=name,
            gid=f"anytime_{name}",
        )
    if lower_bound is not None:
        ax.axhline(
            lower_bound,
            color=LOWER_BOUND_COLOUR,
            linestyle="--",
            linewidth=1.0,
            gid="lower_bound",
            label=f"lower bound {format_bytes(lower_bound)}",
        )
    bytes_axis(ax.yaxis)
    ax.set_xlabel("seconds")
    ax.set_ylabel("best arena")
    ax.legend(fontsize=8)
    return ax
