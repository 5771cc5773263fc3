"""The arena as a picture: execution step across, byte offset up, one box per buffer.

Several pools are stacked bottom to top in pool order, each starting where the
previous pool's arena ends and labelled by `Problem.pool_label` ("mem_id 2 ·
cuda:0"). All rectangles go into a few collections (not one artist per
buffer), so a 2,000-buffer plan draws quickly, and only the largest few
buffers get a text label.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import matplotlib.pyplot as plt
from matplotlib.axes import Axes
from matplotlib.collections import PolyCollection
from matplotlib.colors import to_rgba
from matplotlib.patches import Patch
from matplotlib.text import Text
from matplotlib.ticker import MaxNLocator

from memplan.peak_bound import lower_bounds
from memplan.plan import Plan
from memplan.problem import Buffer, Problem
from memplan.viz.style import (
    ARENA_COLOUR,
    KIND_COLOURS,
    KIND_NAMES,
    LOWER_BOUND_COLOUR,
    bytes_axis,
    format_bytes,
)

# gids of the artists, for code (and tests) that look the drawing up
BUFFERS, GROUPS, SHARED = "buffers", "groups", "shared"
ARENA, LOWER_BOUND = "arena", "lower_bound"
BUFFER_LABEL, POOL_LABEL = "buffer_label", "pool_label"

_MANY = 300  # above this many buffers, boxes lose their edges (they would be all edge)


def draw_order(problem: Problem) -> list[str]:
    """Buffer ids in the order their boxes are drawn: outer parents before their members."""

    def depth(buf: Buffer) -> int:
        level, node = 0, buf.id
        while (link := problem.parent_of(node)) is not None:
            node, level = link[0], level + 1
        return level

    return [b.id for b in sorted(problem.buffers, key=depth)]


def pool_bases(problem: Problem, plan: Plan) -> dict[int, int]:
    """Where each pool's byte 0 sits on the y axis (pools stacked in pool order)."""
    bases, base = {}, 0
    for pool in problem.pools:
        bases[pool] = base
        base += plan.arena_sizes.get(pool, 0)
    return bases


def gantt(
    problem: Problem,
    plan: Plan,
    ax: Axes | None = None,
    *,
    label_top: int = 8,
    op_names: Sequence[str] | None = None,
    title: str | None = None,
) -> Axes:
    """Draw `plan` for `problem`; returns the axes.

    Boxes span `[start, end)` across and `[offset, offset + size)` up, coloured
    by buffer kind; contiguous-group parents get a black outline around their
    members, same-offset (shared) buffers a hatch. Lines mark the arena and the
    lower bound. The `label_top` largest buffers (bytes x steps) are labelled,
    each only where its name fits inside its box; `op_names[i]` names step i
    on the x axis (for small graphs).
    """
    if ax is None:
        _, ax = plt.subplots(figsize=(10, 5))
    bases = pool_bases(problem, plan)

    def box(buf: Buffer) -> list[tuple[float, float]]:
        low = bases[buf.pool] + plan.offsets[buf.id]
        return [(buf.start, low), (buf.end, low), (buf.end, low + buf.size), (buf.start, low + buf.size)]

    parents, shared = _draw_boxes(ax, problem, box)
    x_low = min((b.start for b in problem.buffers), default=0)
    x_high = max((b.end for b in problem.buffers), default=1)
    _bound_lines(ax, problem, plan, bases, x_low, x_high)
    _label_largest(ax, problem.buffers, box, label_top)
    _label_pools(ax, problem, bases, x_low)
    ax.set_xlim(x_low, x_high)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # steps are whole numbers
    ax.set_ylim(0, max(plan.arena_size, 1))
    bytes_axis(ax.yaxis)
    ax.set_xlabel("execution step")
    ax.set_ylabel("byte offset")
    if op_names is not None:
        _name_steps(ax, op_names, x_high)
    ax.set_title(title if title is not None else _default_title(problem, plan))
    handles = _legend_handles(ax, problem, parents, shared)
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1), fontsize=8)
    return ax


def _draw_boxes(
    ax: Axes, problem: Problem, box: Callable[[Buffer], list[tuple[float, float]]]
) -> tuple[set[str], list[str]]:
    """Every buffer's box, group parents outlined, shared buffers hatched; (parents, shared) ids.

    One collection per kind of mark (not one artist per box) keeps 100k-buffer plots drawable.
    """
    by_id = {b.id: b for b in problem.buffers}
    parents = {g.parent for g in problem.groups}
    order = [by_id[i] for i in draw_order(problem)]
    edge = 0.0 if len(order) > _MANY else 0.4
    ax.add_collection(
        PolyCollection(
            [box(b) for b in order],
            facecolors=[to_rgba(KIND_COLOURS[b.kind], 0.35 if b.id in parents else 1.0) for b in order],
            edgecolors="white",
            linewidths=edge,
            gid=BUFFERS,
        )
    )
    if parents:
        ax.add_collection(
            PolyCollection(
                [box(by_id[p]) for p in sorted(parents)],
                facecolors="none",
                edgecolors="black",
                linewidths=1.2,
                gid=GROUPS,
                zorder=3,
            )
        )
    shared = sorted({b for s in problem.same_offsets for b in s.buffers})
    if shared:
        ax.add_collection(
            PolyCollection(
                [box(by_id[b]) for b in shared],
                facecolors="none",
                edgecolors="0.15",
                linewidths=0.0,
                hatch="///",
                gid=SHARED,
                zorder=2,
            )
        )
    return parents, shared


def _label_pools(ax: Axes, problem: Problem, bases: dict[int, int], x_low: float) -> None:
    """Each pool's label at its base, unless the plot is one unnamed pool (nothing to tell apart)."""
    if len(bases) > 1 or set(bases) & set(problem.pool_names):
        for pool, base in bases.items():
            ax.text(
                x_low,
                base,
                f" {problem.pool_label(pool)}",
                va="bottom",
                ha="left",
                fontsize=8,
                color="0.2",
                gid=POOL_LABEL,
            )


def _bound_lines(
    ax: Axes, problem: Problem, plan: Plan, bases: dict[int, int], x_low: float, x_high: float
) -> None:
    """One arena and one lower-bound line per pool, each set a single legend entry."""
    bounds = lower_bounds(problem)
    arena_ys = [bases[p] + plan.arena_sizes.get(p, 0) for p in bases]
    bound_ys = [bases[p] + bounds.get(p, 0) for p in bases]
    total_bound = sum(bounds.values())
    ax.hlines(
        arena_ys,
        x_low,
        x_high,
        colors=ARENA_COLOUR,
        linewidths=1.5,
        zorder=4,
        clip_on=False,
        gid=ARENA,
        label=f"arena {format_bytes(plan.arena_size)} ({plan.arena_size:,} B)",
    )
    ax.hlines(
        bound_ys,
        x_low,
        x_high,
        colors=LOWER_BOUND_COLOUR,
        linewidths=1.2,
        linestyles="--",
        zorder=4,
        clip_on=False,
        gid=LOWER_BOUND,
        label=f"lower bound {format_bytes(total_bound)} ({total_bound:,} B)",
    )


def _label_largest(
    ax: Axes, buffers: Sequence[Buffer], box: Callable[[Buffer], list[tuple[float, float]]], count: int
) -> None:
    largest = sorted(buffers, key=lambda b: (b.size * (b.end - b.start), b.id), reverse=True)[: max(count, 0)]
    for buf in largest:
        (x0, y0), _, (x1, y1), _ = box(buf)
        label = BoxLabel(
            (x0, y0, x1, y1),
            (x0 + x1) / 2,
            (y0 + y1) / 2,
            shorten(buf.label or buf.id),
            ha="center",
            va="center",
            fontsize=7,
            clip_on=True,
            gid=BUFFER_LABEL,
            zorder=5,
        )
        ax.add_artist(label)


def shorten(name: str, limit: int = 24) -> str:
    """`name` cut in the middle to `limit` characters: the head and tail of an FQN tell
    buffers apart ('layers.0.at…he.k_cache' vs '…he.v_cache'), a shared prefix does not."""
    if len(name) <= limit:
        return name
    head = (limit - 1) // 2
    return name[:head] + "…" + name[len(name) - (limit - 1 - head) :]


class BoxLabel(Text):
    """A buffer's name that is drawn only if it fits inside the buffer's box.

    Checked at draw time, when the figure's final size and layout are known,
    so narrow neighbouring boxes do not get overlapping names.
    """

    def __init__(self, box: tuple[float, float, float, float], *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.box = box

    def fits(self, renderer) -> bool:
        x0, y0, x1, y1 = self.box
        assert self.axes is not None, "a label is drawn on its axes"
        (px0, py0), (px1, py1) = self.axes.transData.transform([(x0, y0), (x1, y1)])
        text = self.get_window_extent(renderer)
        return text.width <= abs(px1 - px0) and text.height <= abs(py1 - py0)

    def draw(self, renderer) -> None:
        if self.axes is not None and not self.fits(renderer):
            return
        super().draw(renderer)


def _name_steps(ax: Axes, op_names: Sequence[str], x_high: int) -> None:
    if len(op_names) < x_high:
        raise ValueError(
            f"op_names has {len(op_names)} names but buffers live up to step {x_high - 1};"
            f" name every step 0..{x_high - 1}"
        )
    ax.set_xticks(
        [i + 0.5 for i in range(x_high)], [str(n) for n in op_names[:x_high]], rotation=90, fontsize=7
    )


def _legend_handles(ax: Axes, problem: Problem, parents: set[str], shared: list[str]) -> list:
    kinds = [k for k in KIND_COLOURS if any(b.kind == k for b in problem.buffers)]
    handles: list = [Patch(facecolor=KIND_COLOURS[k], label=KIND_NAMES[k]) for k in kinds]
    if parents:
        handles.append(Patch(facecolor="none", edgecolor="black", label="contiguous group"))
    if shared:
        handles.append(Patch(facecolor="none", edgecolor="0.15", hatch="///", label="same offset (shared)"))
    lines, _ = ax.get_legend_handles_labels()
    return handles + lines


def _default_title(problem: Problem, plan: Plan) -> str:
    proof = ", proven optimal" if plan.proven_optimal else ""
    name = f"{problem.name}: " if problem.name else ""
    return f"{name}{plan.solver}, {len(problem.buffers)} buffers{proof}"
