"""Two plans next to each other on one byte scale, e.g. before/after cat fusion or two solvers."""

from __future__ import annotations

import matplotlib.pyplot as plt
from matplotlib.figure import Figure

from planner.problem import Plan, Problem
from viz.gantt import gantt


def side_by_side(
    problem_a: Problem,
    plan_a: Plan,
    problem_b: Problem,
    plan_b: Plan,
    titles: tuple[str | None, str | None] | None = None,
    *,
    label_top: int = 8,
) -> Figure:
    """Gantt charts of both plans with a shared y axis up to the larger arena,
    so equal heights mean equal bytes."""
    fig, (left, right) = plt.subplots(1, 2, sharey=True, figsize=(16, 5))
    titles = titles or (None, None)
    gantt(problem_a, plan_a, ax=left, label_top=label_top, title=titles[0])
    gantt(problem_b, plan_b, ax=right, label_top=label_top, title=titles[1])
    left.set_ylim(0, max(plan_a.arena_size, plan_b.arena_size, 1))
    right.set_ylabel("")
    for ax in (left, right):  # legends below, or the left one would cover the right chart
        legend = ax.get_legend()
        labels = [text.get_text() for text in legend.get_texts()]
        ax.legend(legend.legend_handles, labels, loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=3, fontsize=8)
    fig.tight_layout()
    return fig
