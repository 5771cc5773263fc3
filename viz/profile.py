"""Bytes live over time against the arenas plans need: how much room a planner wastes."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence

import matplotlib.pyplot as plt
from matplotlib.axes import Axes

from memplan.planner.problem import Plan, Problem
from memplan.viz.style import ARENA_COLOUR, bytes_axis, format_bytes

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
) -> Axes:
    """Bytes live at each step (total, and per pool when there are several),
    each plan's arena as a horizontal line, and the peak marked."""
    if ax is None:
        _, ax = plt.subplots(figsize=(10, 4))
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
                label=f"live, pool {pool}",
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
            color=ARENA_COLOUR if len(named) == 1 else colours[n % len(colours)],
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
