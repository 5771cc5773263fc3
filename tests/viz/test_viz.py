"""What the plots draw (artists and their coordinates), not how the pixels look."""

from __future__ import annotations

import matplotlib
import matplotlib.pyplot as plt
import pandas as pd
import pytest

from memplan import viz
from memplan.generate import layered_problem
from memplan.peak_bound import lower_bounds
from memplan.plan import Plan
from memplan.problem import Buffer, BufferKind, ContiguousGroup, Problem, SameOffset
from memplan.solvers import solve
from memplan.viz.gantt import (
    ARENA,
    BUFFER_LABEL,
    BUFFERS,
    GROUPS,
    LOWER_BOUND,
    SHARED,
    draw_order,
    pool_bases,
)
from memplan.viz.profile import PEAK, TOTAL, live_bytes
from memplan.viz.style import KIND_COLOURS, format_bytes


@pytest.fixture
def problem() -> Problem:
    """Two pools, a nested cat-style group, a same-offset pair, a fixed buffer, every kind."""
    buffers = (
        Buffer("cat", 0, 4, 96, kind=BufferKind.ACTIVATION),
        Buffer("left", 0, 3, 32),
        Buffer("right", 1, 4, 64),
        Buffer("right_view", 1, 2, 16),
        Buffer("input", 0, 2, 40, kind=BufferKind.GRAPH_INPUT),
        Buffer("output", 3, 6, 50, kind=BufferKind.GRAPH_OUTPUT),
        Buffer("state_a", 0, 2, 24, pool=1, kind=BufferKind.MUTABLE_STATE),
        Buffer("state_b", 4, 6, 24, pool=1, kind=BufferKind.MUTABLE_STATE),
        Buffer("pinned", 2, 5, 8, pool=1, offset=64),
    )
    groups = (
        ContiguousGroup("cat", (("left", 0), ("right", 32))),
        ContiguousGroup("right", (("right_view", 16),)),
    )
    return Problem(buffers, groups, (SameOffset(("state_a", "state_b")),), name="fixture")


@pytest.fixture
def plan(problem: Problem) -> Plan:
    return solve(problem, "bestfit")


def boxes(ax, gid: str) -> list[tuple[float, float, float, float]]:
    """(x0, y0, x1, y1) of every polygon in the collection with this gid, in drawing order."""
    (collection,) = [c for c in ax.collections if c.get_gid() == gid]
    return [tuple(path.get_extents().get_points().ravel()) for path in collection.get_paths()]


def line_heights(ax, gid: str) -> list[float]:
    (lines,) = [c for c in ax.collections if c.get_gid() == gid]
    return sorted(segment[0][1] for segment in lines.get_segments())


def expected_box(problem: Problem, plan: Plan, buffer_id: str) -> tuple[float, float, float, float]:
    buf = problem.buffer(buffer_id)
    low = pool_bases(problem, plan)[buf.pool] + plan.offsets[buffer_id]
    return (buf.start, low, buf.end, low + buf.size)


# -- gantt -------------------------------------------------------------------------


def test_one_box_per_buffer_at_its_offset_and_lifetime(problem: Problem, plan: Plan) -> None:
    ax = viz.gantt(problem, plan)
    order = draw_order(problem)
    assert sorted(order) == sorted(b.id for b in problem.buffers)
    assert boxes(ax, BUFFERS) == [expected_box(problem, plan, b) for b in order]


def test_parents_are_drawn_before_their_members(problem: Problem) -> None:
    order = draw_order(problem)
    assert order.index("cat") < order.index("right") < order.index("right_view")


def test_pools_stack_and_the_y_range_is_the_arena(problem: Problem, plan: Plan) -> None:
    ax = viz.gantt(problem, plan)
    assert pool_bases(problem, plan) == {0: 0, 1: plan.arena_sizes[0]}
    assert ax.get_ylim() == (0, plan.arena_size)
    assert ax.get_xlim() == (0, 6)


def test_arena_and_lower_bound_lines_at_their_heights_with_values_in_the_legend(
    problem: Problem, plan: Plan
) -> None:
    ax = viz.gantt(problem, plan)
    bounds = lower_bounds(problem)
    base_1 = plan.arena_sizes[0]
    assert line_heights(ax, ARENA) == [plan.arena_sizes[0], base_1 + plan.arena_sizes[1]]
    assert line_heights(ax, LOWER_BOUND) == sorted([bounds[0], base_1 + bounds[1]])
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert f"arena {format_bytes(plan.arena_size)} ({plan.arena_size:,} B)" in legend
    total = sum(bounds.values())
    assert f"lower bound {format_bytes(total)} ({total:,} B)" in legend


def test_group_outlines_and_shared_hatching(problem: Problem, plan: Plan) -> None:
    ax = viz.gantt(problem, plan)
    assert boxes(ax, GROUPS) == [expected_box(problem, plan, p) for p in ("cat", "right")]
    assert boxes(ax, SHARED) == [expected_box(problem, plan, b) for b in ("state_a", "state_b")]
    (shared,) = [c for c in ax.collections if c.get_gid() == SHARED]
    assert shared.get_hatch()


def test_colours_follow_the_buffer_kind(problem: Problem, plan: Plan) -> None:
    ax = viz.gantt(problem, plan)
    (collection,) = [c for c in ax.collections if c.get_gid() == BUFFERS]
    faces = collection.get_facecolors()
    for i, buffer_id in enumerate(draw_order(problem)):
        kind = problem.buffer(buffer_id).kind
        assert tuple(faces[i][:3]) == pytest.approx(matplotlib.colors.to_rgb(KIND_COLOURS[kind]))


def test_y_axis_in_byte_units(plan: Plan) -> None:
    problem = Problem((Buffer("a", 0, 2, 3 << 20), Buffer("b", 1, 3, 1 << 20)))
    ax = viz.gantt(problem, solve(problem, "bestfit"))
    ax.figure.canvas.draw()
    labels = [t.get_text() for t in ax.get_yticklabels() if t.get_text()]
    assert "0 B" in labels and "1 MiB" in labels and "4 MiB" in labels
    assert all(label.endswith(("B", "KiB", "MiB")) for label in labels)


def test_op_names_label_the_steps(problem: Problem, plan: Plan) -> None:
    names = [f"op{i}" for i in range(6)]
    ax = viz.gantt(problem, plan, op_names=names)
    assert [t.get_text() for t in ax.get_xticklabels()] == names
    assert list(ax.get_xticks()) == [i + 0.5 for i in range(6)]
    with pytest.raises(ValueError, match="op_names has 3 names but buffers live up to step 5"):
        viz.gantt(problem, plan, op_names=names[:3])


def test_title_names_the_problem_and_solver(problem: Problem, plan: Plan) -> None:
    assert viz.gantt(problem, plan).get_title().startswith("fixture: bestfit")
    assert viz.gantt(problem, plan, title="mine").get_title() == "mine"


def test_two_thousand_buffers_label_only_the_largest() -> None:
    problem = layered_problem(2000, seed=3)
    plan = solve(problem, "bestfit")
    ax = viz.gantt(problem, plan, label_top=8)
    assert len(boxes(ax, BUFFERS)) == len(problem.buffers)
    labels = [t for t in ax.texts if t.get_gid() == BUFFER_LABEL]
    assert len(labels) == 8
    assert len(ax.texts) <= 8 + len(problem.pools)
    largest = max(problem.buffers, key=lambda b: b.size * (b.end - b.start))
    assert (largest.label or largest.id)[:23] in {t.get_text()[:23] for t in labels}


# -- profile -----------------------------------------------------------------------


def test_profile_steps_live_bytes_and_marks_the_peak(problem: Problem, plan: Plan) -> None:
    other = solve(problem, "milp", time_limit_s=10)
    ax = viz.profile(problem, {"bestfit": plan, "milp": other})
    (total,) = [line for line in ax.lines if line.get_gid() == TOTAL]
    times, levels = live_bytes(problem)
    assert list(total.get_xdata()) == times and list(total.get_ydata()) == levels
    # roots only: the group counts once (96 B), not once per member
    assert max(levels) == max(sum(b.size for b in problem.roots() if b.start <= t < b.end) for t in range(6))
    (peak,) = [line for line in ax.lines if line.get_gid() == PEAK]
    assert list(peak.get_ydata()) == [max(levels)]
    for name, p in {"bestfit": plan, "milp": other}.items():
        (arena,) = [line for line in ax.lines if line.get_gid() == f"arena_{name}"]
        assert list(arena.get_ydata()) == [p.arena_size, p.arena_size]
    assert {line.get_gid() for line in ax.lines} >= {"live_pool_0", "live_pool_1"}


def test_profile_accepts_one_plan_or_a_list(problem: Problem, plan: Plan) -> None:
    ax = viz.profile(problem, plan)
    assert [line.get_gid() for line in ax.lines if line.get_gid().startswith("arena_")] == ["arena_bestfit"]
    ax = viz.profile(problem, [plan, plan])
    assert [line.get_gid() for line in ax.lines if line.get_gid().startswith("arena_")] == [
        "arena_bestfit",
        "arena_bestfit (2)",
    ]


# -- compare -----------------------------------------------------------------------


def sweep_rows() -> pd.DataFrame:
    rows = [
        ("mlp", "forward", "greedy", 1200, 1000, False),
        ("mlp", "forward", "milp", 1000, 1000, True),
        ("llama", "forward", "greedy", 5300, 5000, False),
        ("llama", "forward", "milp", 5100, 5000, False),
        ("state", "init", "milp", 300, 300, True),
        ("state", "step", "milp", 330, 300, False),
    ]
    return pd.DataFrame(
        rows, columns=["model", "method", "solver", "arena_bytes", "lower_bound_bytes", "proven_optimal"]
    )


def bar_tops(ax, series: str) -> list[float]:
    (bars,) = [c for c in ax.containers if c.get_label() == series]
    return [round(b.get_y() + b.get_height(), 6) for b in bars]


def test_compare_bars_are_arena_over_lower_bound_per_model_and_solver() -> None:
    ax = viz.compare(sweep_rows())
    assert bar_tops(ax, "greedy") == [1.2, 1.06]
    assert bar_tops(ax, "milp") == [1.0, 1.02, 1.0, 1.1]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["mlp", "llama", "state/init", "state/step"]
    (bound,) = [line for line in ax.lines if line.get_gid() == "lower_bound"]
    assert list(bound.get_ydata()) == [1.0, 1.0]


def test_compare_splits_bars_by_a_setting_that_varies() -> None:
    df = sweep_rows().assign(alignment=16)
    df = pd.concat([df, df.assign(alignment=64, arena_bytes=df["arena_bytes"] * 2)])
    ax = viz.compare(df)
    labels = {c.get_label() for c in ax.containers}
    assert labels == {
        "greedy, alignment=16",
        "greedy, alignment=64",
        "milp, alignment=16",
        "milp, alignment=64",
    }
    assert bar_tops(ax, "greedy, alignment=64") == [2.4, 2.12]


def test_compare_divides_by_the_lowest_bound_of_a_case() -> None:
    """Cat fusion may give solvers different problems of one program: the lowest bound counts."""
    df = pd.DataFrame(
        [("unet", "forward", "greedy", 1200, 1200, True), ("unet", "forward", "cpsat", 1000, 1000, True)],
        columns=["model", "method", "solver", "arena_bytes", "lower_bound_bytes", "proven_optimal"],
    )
    ax = viz.compare(df)
    assert bar_tops(ax, "greedy") == [1.2]
    assert bar_tops(ax, "cpsat") == [1.0]


def test_compare_names_missing_columns() -> None:
    with pytest.raises(ValueError, match=r"lacks columns \['lower_bound_bytes'\]"):
        viz.compare(sweep_rows().drop(columns=["lower_bound_bytes"]))


# -- side by side ------------------------------------------------------------------


def test_side_by_side_shares_the_byte_scale(problem: Problem, plan: Plan) -> None:
    small = Problem((Buffer("x", 0, 1, 16),))
    small_plan = solve(small, "bestfit")
    fig = viz.side_by_side(problem, plan, small, small_plan, titles=("big", "small"))
    left, right = fig.axes[:2]
    assert [left.get_title(), right.get_title()] == ["big", "small"]
    assert left.get_ylim() == right.get_ylim() == (0, plan.arena_size)
    assert len(boxes(left, BUFFERS)) == len(problem.buffers) and len(boxes(right, BUFFERS)) == 1


# -- the breakdown plots, each on a given ax ---------------------------------------------------


def _kinds_problem() -> tuple[Problem, Plan]:
    from memplan.problem import BufferKind

    buffers = (
        Buffer("in", 0, 2, 64, kind=BufferKind.GRAPH_INPUT),
        Buffer("a", 1, 3, 32),
        Buffer("s", 0, 4, 16, kind=BufferKind.MUTABLE_STATE),
        Buffer("out", 3, 4, 48, kind=BufferKind.GRAPH_OUTPUT),
    )
    plan = Plan({"in": 0, "a": 64, "s": 96, "out": 0}, {0: 112}, "bestfit")
    return Problem(buffers), plan


def test_kinds_stacks_live_bytes_by_kind_on_the_given_ax() -> None:
    problem, plan = _kinds_problem()
    fig, ax = plt.subplots()
    assert viz.kinds(problem, plan, ax=ax) is ax
    gids = {c.get_gid() for c in ax.collections}
    assert {"kind_graph_input", "kind_activation", "kind_mutable_state", "kind_graph_output"} <= gids
    (arena,) = [line for line in ax.lines if line.get_gid() == "arena"]
    assert arena.get_ydata()[0] == 112
    from memplan.viz.breakdown import kind_bytes

    times, levels = kind_bytes(problem)
    assert [sum(v[i] for v in levels.values()) for i in range(len(times))] == live_bytes(problem)[1]
    plt.close(fig)


def test_fragmentation_is_arena_minus_live_bytes_per_plan() -> None:
    problem, plan = _kinds_problem()
    tight = Plan(plan.offsets, {0: 112}, "cpsat")
    fig, ax = plt.subplots()
    assert viz.fragmentation(problem, {"bestfit": plan, "cpsat": tight}, ax=ax) is ax
    (line,) = [ln for ln in ax.lines if ln.get_gid() == "free_bestfit"]
    # live bytes: 80 (in+s), 112 (in+a+s), 48 (a+s), 64 (s+out), then 0 after the end
    assert list(line.get_ydata()) == [112 - 80, 0, 112 - 48, 112 - 64, 112]
    from memplan.viz.style import solver_colour

    assert line.get_color() == solver_colour("bestfit")
    plt.close(fig)


def test_anytime_draws_the_best_so_far_per_solver_and_the_bound() -> None:
    from memplan.viz.style import solver_colour

    fig, ax = plt.subplots()
    assert viz.anytime({"cpsat": [(0.1, 130), (1.0, 140), (0.3, 120)]}, lower_bound=112, ax=ax) is ax
    (line,) = [ln for ln in ax.lines if ln.get_gid() == "anytime_cpsat"]
    assert list(line.get_ydata()) == [130, 120, 120]  # never worse than an earlier point
    assert line.get_color() == solver_colour("cpsat")
    (bound,) = [ln for ln in ax.lines if ln.get_gid() == "lower_bound"]
    assert bound.get_ydata()[0] == 112
    plt.close(fig)


def test_anytime_curve_measures_growing_limits() -> None:
    from memplan.experiments.bench.anytime import curve
    from memplan.peak_bound import lower_bound

    problem = layered_problem(30, seed=2, alignment=1)
    points = curve(problem, "cpsat", limits=(0.2, 1.0))
    assert len(points) == 2 and all(arena >= lower_bound(problem) for _, arena in points)


def test_one_colour_per_solver_in_compare_and_profile() -> None:
    from matplotlib.colors import to_hex

    from memplan.viz.style import solver_colour

    ax = viz.compare(sweep_rows())
    for container in ax.containers:
        if hasattr(container, "patches") and container.get_label() in ("greedy", "milp"):
            assert (
                to_hex(container.patches[0].get_facecolor()) == solver_colour(container.get_label()).lower()
            )
    problem, plan = _kinds_problem()
    fig, ax2 = plt.subplots()
    viz.profile(problem, {"greedy": plan, "cpsat": plan}, ax=ax2)
    colours = {ln.get_gid(): ln.get_color() for ln in ax2.lines}
    assert colours["arena_greedy"] == solver_colour("greedy") and colours["arena_cpsat"] == solver_colour(
        "cpsat"
    )
    plt.close(fig)


def test_compare_draws_bars_at_exactly_one_and_keeps_proof_marks_beyond_40_bars() -> None:
    rows = pd.DataFrame(
        [(f"m{i}", "forward", s, 100, 100, True) for i in range(25) for s in ("greedy", "cpsat")],
        columns=["model", "method", "solver", "arena_bytes", "lower_bound_bytes", "proven_optimal"],
    )
    ax = viz.compare(rows)
    bars = [b for c in ax.containers for b in c]
    assert len(bars) == 50 and all(b.get_height() > 0 for b in bars)  # 1.000 is a visible bar
    marks = [t.get_text() for t in ax.texts]
    assert marks.count("*") == 50


def test_profile_zoom_draws_around_the_peak_on_the_given_ax() -> None:
    problem, plan = _kinds_problem()
    close = Plan(plan.offsets, {0: 113}, "greedy")
    fig, (ax, zoom) = plt.subplots(1, 2)
    viz.profile(problem, {"bestfit": plan, "greedy": close}, ax=ax, zoom=zoom)
    assert zoom.get_title() == "around the peak"
    (y0, y1) = zoom.get_ylim()
    assert y0 < 112 < 113 < y1 and y1 - y0 < 112
    plt.close(fig)


def test_compare_marks_proven_only_against_the_bound_and_orders_the_legend_like_the_table() -> None:
    from memplan import solvers
    from memplan.viz.compare import STOCK_SERIES

    rows = [
        # unet: cpsat's fused problem has the lowest bound; greedy proved its own (unfused) plan optimal
        ("unet", "forward", "greedy", 1143, 1100, True),
        ("unet", "forward", "cpsat", 1000, 1000, True),
        ("unet", "forward", "bestfit", 1050, 1000, False),
    ]
    df = pd.DataFrame(
        rows, columns=["model", "method", "solver", "arena_bytes", "lower_bound_bytes", "proven_optimal"]
    )
    df["stock_arena_bytes"] = 1200
    ax = viz.compare(df)
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    order = [s for s in solvers.available() if s in ("greedy", "cpsat", "bestfit")]
    assert legend == ["lower bound", STOCK_SERIES, *order]  # the summary table's column order
    texts = {t.get_text() for t in ax.texts}
    assert "1.143" in texts and "1.143*" not in texts  # proven for its own problem, not against the bound
    assert "1.000*" in texts
