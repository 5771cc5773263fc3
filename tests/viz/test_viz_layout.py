"""Readability of the plots: labels that fit, distinct names, rows of charts, step ticks."""

from __future__ import annotations

import matplotlib.pyplot as plt
import pytest

from memplan import viz
from memplan.problem import Buffer, Problem
from memplan.solvers import solve
from memplan.viz.gantt import BUFFER_LABEL, BoxLabel, shorten


def test_long_names_are_cut_in_the_middle_and_stay_distinct() -> None:
    k, v = "layers.0.attention.kv_cache.k_cache", "layers.0.attention.kv_cache.v_cache"
    assert shorten(k) != shorten(v)
    assert len(shorten(k)) == 24 and shorten(k).startswith("layers.0") and shorten(k).endswith("k_cache")
    assert shorten("aten.relu.out") == "aten.relu.out"


def test_a_label_is_drawn_only_where_it_fits_its_box() -> None:
    problem = Problem(
        (
            Buffer("wide", 0, 100, 1000, label="wide"),
            Buffer("narrow", 100, 101, 1000, label="narrow_buffer_name"),
        )
    )
    fig, ax = plt.subplots(figsize=(8, 4))
    viz.gantt(problem, solve(problem, "bestfit"), ax=ax, label_top=2)
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    labels = {t.get_text(): t for t in ax.texts if t.get_gid() == BUFFER_LABEL}
    assert all(isinstance(t, BoxLabel) for t in labels.values())
    assert labels["wide"].fits(renderer) and not labels["narrow_buffer_name"].fits(renderer)

    drawn: list[str] = []
    draw_text = renderer.draw_text

    def record(gc, x, y, s, *args, **kwargs):
        drawn.append(s)
        return draw_text(gc, x, y, s, *args, **kwargs)

    renderer.draw_text = record
    for label in labels.values():
        label.draw(renderer)
    assert drawn == ["wide"]


def test_panels_share_the_byte_scale_and_put_legends_below() -> None:
    charts = []
    for n, size in enumerate((64, 256, 128)):
        problem = Problem((Buffer("a", 0, 3, size), Buffer("b", 1, 4, 32)))
        charts.append((problem, solve(problem, "bestfit"), f"chart {n}"))
    fig = viz.panels(charts, panel_size=(5.0, 4.0))
    axes = fig.axes
    assert [ax.get_title() for ax in axes] == ["chart 0", "chart 1", "chart 2"]
    assert {ax.get_ylim() for ax in axes} == {(0, max(plan.arena_size for _, plan, _ in charts))}
    for ax in axes:
        x, y = ax.get_legend().get_bbox_to_anchor().transformed(ax.transAxes.inverted()).p0
        assert y < 0  # below the chart, not over the neighbour
    with pytest.raises(ValueError, match="at least one"):
        viz.panels([])


def test_step_ticks_are_whole_numbers() -> None:
    problem = Problem((Buffer("a", 0, 7, 64), Buffer("b", 2, 5, 32)))
    ax = viz.gantt(problem, solve(problem, "bestfit"))
    ax.figure.canvas.draw()
    ticks = [t for t in ax.get_xticks() if 0 <= t <= 7]
    assert len(ticks) >= 2 and all(float(t).is_integer() for t in ticks)


def test_profile_arenas_differ_in_line_style_and_give_exact_bytes() -> None:
    problem = Problem((Buffer("a", 0, 3, 100), Buffer("b", 1, 4, 50)))
    plans = {"x": solve(problem, "bestfit"), "y": solve(problem, "greedy")}
    ax = viz.profile(problem, plans)
    arenas = [line for line in ax.lines if line.get_gid().startswith("arena_")]
    assert len({str(line.get_linestyle()) for line in arenas}) == 2
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert f"x: arena {plans['x'].arena_size} B ({plans['x'].arena_size:,} B)" in legend
