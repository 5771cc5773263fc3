"""Plans next to each other on one byte scale, e.g. before/after cat fusion or several solvers."""

from __future__ import annotations

from collections.abc import Sequence

import matplotlib.pyplot as plt
from matplotlib.figure import Figure

from memplan.plan import Plan
from memplan.problem import Problem
from memplan.viz.gantt import gantt

Chart = tuple[Problem, Plan, str | None]  # problem, plan, title (None: gantt's default title)


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
    titles = titles or (None, None)
    return panels([(problem_a, plan_a, titles[0]), (problem_b, plan_b, titles[1])], label_top=label_top)


def panels(
    charts: Sequence[Chart],
    *,
    label_top: int = 8,
    panel_size: tuple[float, float] = (8.0, 5.0),
) -> Figure:
    """A row of Gantt charts with a shared y axis up to the largest arena.

    Each chart's legend goes below it (a legend to the right would cover the
    next chart); `panel_size` is (width, height) in inches per chart.
    """
    if not charts:
        raise ValueError("panels: give at least one (problem, plan, title) to draw")
    width, height = panel_size
    fig, axes = plt.subplots(
        1, len(charts), sharey=True, figsize=(width * len(charts), height), squeeze=False
    )
    row = list(axes[0])
    for ax, (problem, plan, title) in zip(row, charts):
        gantt(problem, plan, ax=ax, label_top=label_top, title=title)
    row[0].set_ylim(0, max(max(plan.arena_size for _, plan, _ in charts), 1))
    for ax in row[1:]:
        ax.set_ylabel("")
    columns = 3 if width >= 7 else 2
    for ax in row:
        legend = ax.get_legend()
        labels = [text.get_text() for text in legend.get_texts()]
        ax.legend(
            legend.legend_handles,
            labels,
            loc="upper center",
            bbox_to_anchor=(0.5, -0.14),
            ncol=columns,
            fontsize=8,
        )
    fig.tight_layout()
    return fig
