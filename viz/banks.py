"""Plans across memory banks: one panel per bank, each against its capacity.

A bank is its own address space, so stacking banks on one axis (as `gantt`
stacks pools) would hide what matters: how full each bank is and what went
where. Each panel is the ordinary `gantt` / `profile` of the buffers placed in
that bank, plus a line at the bank's capacity and the bank's share of the
program's traffic (bytes x accesses) in the title.
"""

from __future__ import annotations

import dataclasses

import matplotlib.pyplot as plt
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from memplan.bank_placement import BankUsage, bank_part, bank_report, place_in_banks
from memplan.plan import Plan
from memplan.problem import Problem
from memplan.viz.gantt import gantt
from memplan.viz.profile import live_bytes
from memplan.viz.style import bytes_axis, format_bytes

CAPACITY = "capacity"  # gid of each panel's capacity line
CAPACITY_COLOUR = "#c0392b"


def bank_gantt(problem: Problem, plan: Plan, *, label_top: int = 6, title: str | None = None) -> Figure:
    """One Gantt panel per bank (preference order, fastest on top), then per other pool used."""
    rows = _rows(problem, plan)
    fig, axes = plt.subplots(len(rows), 1, figsize=(11, 2.8 * len(rows)), squeeze=False)
    placed = place_in_banks(problem, plan.pools)
    total = sum(r.traffic for r in rows) or 1
    for ax, row in zip(axes[:, 0], rows, strict=True):
        sub = _in_pool(placed, row.pool)
        if not sub.buffers:
            _empty(ax, _heading(problem, row))
            continue
        sub_plan = dataclasses.replace(
            plan,
            offsets={b.id: plan.offsets[b.id] for b in sub.buffers},
            arena_sizes={row.pool: plan.arena_sizes.get(row.pool, 0)},
            pools={},
        )
        gantt(sub, sub_plan, ax, label_top=label_top, title=_title(problem, row, total))
        ax.set_xlim(
            min(b.start for b in problem.buffers), max(b.end for b in problem.buffers)
        )  # one time axis
        _capacity_line(ax, row)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    return fig


def bank_profile(problem: Problem, plan: Plan, *, title: str | None = None) -> Figure:
    """Bytes live at each step, one panel per bank, against the bank's capacity and arena."""
    rows = _rows(problem, plan)
    fig, axes = plt.subplots(len(rows), 1, figsize=(11, 2.2 * len(rows)), squeeze=False, sharex=True)
    placed = place_in_banks(problem, plan.pools)
    total = sum(r.traffic for r in rows) or 1
    for ax, row in zip(axes[:, 0], rows, strict=True):
        times, levels = live_bytes(placed, row.pool)
        ax.step(
            times,
            levels,
            where="post",
            color="0.15",
            linewidth=1.2,
            label="live bytes",
            gid=f"live_{row.pool}",
        )
        ax.axhline(
            row.bytes,
            color="#2c7fb8",
            linestyle="--",
            linewidth=1.0,
            label=f"arena {format_bytes(row.bytes)}",
        )
        _capacity_line(ax, row)
        ax.set_ylim(bottom=0)
        bytes_axis(ax.yaxis)
        ax.set_ylabel("bytes")
        ax.set_title(_title(problem, row, total), fontsize=9)
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1), fontsize=8)
    axes[-1, 0].set_xlabel("execution step")
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    return fig


def _rows(problem: Problem, plan: Plan) -> list[BankUsage]:
    rows = [r for r in bank_report(problem, plan) if problem.bank(r.pool) is not None or r.buffers]
    return rows or bank_report(problem, plan)


def _in_pool(placed: Problem, pool: int) -> Problem:
    return bank_part(placed, {b.id for b in placed.buffers if b.pool == pool})


def _heading(problem: Problem, row: BankUsage) -> str:
    """ "sram (mem_id 1)" for a bank, "mem_id 3 · cuda:0" or "mem_id 3" for another pool."""
    return f"{row.name} (mem_id {row.pool})" if problem.bank(row.pool) is not None else row.name


def _title(problem: Problem, row: BankUsage, total_traffic: int) -> str:
    cap = "" if row.capacity is None else f" of {format_bytes(row.capacity)}"
    return (
        f"{_heading(problem, row)}: {format_bytes(row.bytes)}{cap}, peak {format_bytes(row.peak)},"
        f" {row.buffers} buffers, {row.traffic / total_traffic:.0%} of the traffic"
    )


def _capacity_line(ax: Axes, row: BankUsage) -> None:
    """The capacity, when it is within sight of the arena (a 16 MiB DRAM would flatten the panel)."""
    if row.capacity is None or row.capacity > 2 * max(row.bytes, 1):
        return
    ax.axhline(
        row.capacity,
        color=CAPACITY_COLOUR,
        linewidth=1.5,
        gid=CAPACITY,
        label=f"capacity {format_bytes(row.capacity)}",
    )
    ax.set_ylim(0, max(row.capacity, row.bytes) * 1.05)


def _empty(ax: Axes, heading: str) -> None:
    ax.text(0.5, 0.5, f"{heading}: empty", ha="center", va="center", transform=ax.transAxes)
    ax.set_axis_off()
