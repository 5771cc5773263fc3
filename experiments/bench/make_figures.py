"""Regenerate the figures under docs/ from the zoo: `python -m memplan.experiments.bench.make_figures [--out docs]`.

Each figure is a function returning a matplotlib Figure, so the notebooks
draw the same pictures for other models. Every model is exported once and
lowered through ExecuTorch with `PlannerPass` (experiments.zoo.lowering.lower_planned),
so the plans drawn are the plans written into the program.
"""

from __future__ import annotations

import argparse
import functools
import time
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
from matplotlib.figure import Figure

from memplan import viz
from memplan.peak_bound import lower_bound
from memplan.solvers import DEFAULT_ALIGNMENT
from memplan.viz.captions import describe
from memplan.viz.style import format_bytes

TIME_LIMIT_S = 10.0  # the limit docs/figures.md states for its figures
DPI = 100


@functools.lru_cache(maxsize=8)
def zoo_model(name: str):
    """The zoo model `name`, exported once per process (lowerings reuse its edge program)."""
    from memplan.experiments import zoo
    from memplan.experiments.zoo import runtime

    model = zoo.get(name)
    runtime.edge_program(model)
    return model


@functools.lru_cache(maxsize=32)
def planned(
    model: str,
    solver: str,
    cat_fusion: bool = True,
    time_limit_s: float = TIME_LIMIT_S,
    state_in_place: bool = True,
) -> dict:
    """Method name -> `MethodResult` (problem, plan, cat_report, state_report) of `model` lowered with `solver`.

    Cached: a figure and the numbers printed for it come from one lowering.
    """
    from memplan.experiments.zoo.lowering import lower_planned

    lowered = lower_planned(
        zoo_model(model), solver, DEFAULT_ALIGNMENT, cat_fusion, time_limit_s, state_in_place=state_in_place
    )
    return lowered.planner_pass.results


def _caption(fig: Figure, text: str) -> None:
    fig.suptitle(text, fontsize=12)
    fig.tight_layout()


def solver_figure(
    model: str, solvers: Sequence[str], method: str = "forward", time_limit_s: float = TIME_LIMIT_S
) -> Figure:
    """One Gantt chart per solver on a shared byte scale, cat fusion and state in place off so
    every solver plans ExecuTorch's own problem."""
    results = {
        s: planned(model, s, cat_fusion=False, time_limit_s=time_limit_s, state_in_place=False)[method]
        for s in solvers
    }
    charts = [(r.problem, r.plan, f"{s}: {describe(r.problem, r.plan)}") for s, r in results.items()]
    fig = viz.panels(charts, label_top=6, panel_size=(8.0 if len(charts) <= 2 else 6.0, 5.0))
    first = next(iter(results.values())).problem
    _caption(
        fig,
        f"{model} ({method}): {len(first.buffers)} buffers, lower bound {format_bytes(lower_bound(first))}",
    )
    return fig


def cat_fusion_figure(
    model: str, solver: str = "cpsat", method: str = "forward", time_limit_s: float = TIME_LIMIT_S
) -> Figure:
    """The same solver without and with cat fusion; fused cats are outlined groups."""
    off = planned(model, solver, cat_fusion=False, time_limit_s=time_limit_s)[method]
    on = planned(model, solver, cat_fusion=True, time_limit_s=time_limit_s)[method]
    report = on.cat_report
    fused = len(on.problem.groups)
    removed = f", {format_bytes(report.copy_bytes_removed)} of copies removed" if report else ""
    fig = viz.side_by_side(
        off.problem,
        off.plan,
        on.problem,
        on.plan,
        (
            f"cat fusion off: {describe(off.problem, off.plan)}",
            f"cat fusion on (groups: {fused}{removed}): {describe(on.problem, on.plan)}",
        ),
        label_top=6,
    )
    _caption(
        fig, f"{model} ({method}), {solver}: cat inputs placed inside the cat output, cat copies removed"
    )
    return fig


def state_figure(
    model: str, solver: str = "cpsat", method: str = "forward", time_limit_s: float = TIME_LIMIT_S
) -> Figure:
    """The same solver with ExecuTorch's write-back copies and with the state updated where it lives."""
    off = planned(model, solver, True, time_limit_s, state_in_place=False)[method]
    on = planned(model, solver, True, time_limit_s, state_in_place=True)[method]
    report = on.state_report
    removed = len(report.removed) if report else 0
    saved = format_bytes(report.copy_bytes_removed) if report else "0 B"
    fig = viz.side_by_side(
        off.problem,
        off.plan,
        on.problem,
        on.plan,
        (
            f"write-back copies (stock ExecuTorch): {describe(off.problem, off.plan)}",
            f"state in place ({removed} copies, {saved} per call removed): {describe(on.problem, on.plan)}",
        ),
        label_top=6,
    )
    _caption(fig, f"{model} ({method}), {solver}: new state values written where the state lives")
    return fig


def shared_state_figure(model: str, solver: str = "cpsat", time_limit_s: float = TIME_LIMIT_S) -> Figure:
    """Every method of a multi-method program; the shared state sits in the same
    pool (mem_id 2) at the same offsets in each."""
    results = planned(model, solver, time_limit_s=time_limit_s)
    charts = []
    from memplan.experiments.planning import call_order

    for method in call_order(zoo_model(model)):
        r = results[method]
        state = r.plan.arena_sizes.get(2, 0)
        charts.append(
            (
                r.problem,
                r.plan,
                f"{method}: arena {format_bytes(r.plan.arena_size)}\n"
                f"(pool 1: {format_bytes(r.plan.arena_sizes.get(1, 0))},"
                f" shared state: {format_bytes(state)})",
            )
        )
    fig = viz.panels(charts, label_top=6, panel_size=(5.5, 5.0))
    _caption(fig, f"{model}, {solver}: {len(charts)} methods, one copy of the mutable state (pool 2) for all")
    return fig


def profile_figure(
    model: str, solvers: Sequence[str], method: str = "forward", time_limit_s: float = TIME_LIMIT_S
) -> Figure:
    """Bytes live per step against each solver's arena (cat fusion and state in place off:
    ExecuTorch's own problem for all)."""
    results = {
        s: planned(model, s, cat_fusion=False, time_limit_s=time_limit_s, state_in_place=False)[method]
        for s in solvers
    }
    problem = next(iter(results.values())).problem
    plans = {s: r.plan for s, r in results.items()}
    title = f"{model} ({method}): live bytes vs. arenas; lower bound {format_bytes(lower_bound(problem))}"
    if viz.peak_window(problem, plans) is None:
        fig, ax = plt.subplots(figsize=(10, 4))
        viz.profile(problem, plans, ax=ax)
        ax.set_title(title)
        fig.tight_layout()
        return fig
    fig, (ax, zoom) = plt.subplots(1, 2, figsize=(12, 4.2), gridspec_kw={"width_ratios": [3, 1]})
    viz.profile(problem, plans, ax=ax, zoom=zoom)
    ax.set_title(title)
    ax.legend(loc="lower center", ncol=3, fontsize=8)  # the zoom panel takes the space on the right
    fig.tight_layout()
    return fig


FIGURES = {
    "llama_decode_cpsat_vs_greedy.png": lambda: solver_figure("llama_decode", ["cpsat", "greedy"]),
    "unet_cat_fusion.png": lambda: cat_fusion_figure("unet"),
    "llama_decode_state_in_place.png": lambda: state_figure("llama_decode"),
    "multi_method_state.png": lambda: shared_state_figure("multi_method_cache"),
    "profile_llama_decode.png": lambda: profile_figure("llama_decode", ["greedy", "bestfit", "cpsat"]),
}


# (model, solver, cat fusion[, state in place]) of every plan drawn above, for the numbers in docs/figures.md
NUMBERS: list[tuple[Any, ...]] = [  # numbers() arguments: model, solver, cat fusion[, state in place]
    ("llama_decode", "greedy", False, False),
    ("llama_decode", "bestfit", False, False),
    ("llama_decode", "cpsat", False, False),
    ("llama_decode", "cpsat", True, False),
    ("llama_decode", "cpsat", True, True),
    ("unet", "cpsat", False),
    ("unet", "cpsat", True),
    ("multi_method_cache", "cpsat", True),
]


def numbers(model: str, solver: str, cat_fusion: bool, state_in_place: bool = True) -> list[str]:
    """One line per method: buffers, lower bound, arena per pool (what the figures show)."""
    lines = []
    results = planned(model, solver, cat_fusion, state_in_place=state_in_place)
    for method, r in sorted(results.items()):
        pools = ", ".join(f"pool {p}: {s:,}" for p, s in sorted(r.plan.arena_sizes.items()))
        lines.append(
            f"{model:20s} {method:10s} {solver:8s} fusion {'on ' if cat_fusion else 'off'}"
            f" state {'on ' if state_in_place else 'off'}"
            f" buffers {len(r.problem.buffers):4d}  lower bound {lower_bound(r.problem):>8,} B"
            f"  arena {r.plan.arena_size:>8,} B ({pools}){'  proven' if r.plan.proven_optimal else ''}"
        )
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="docs", help="folder for the PNGs (default: %(default)s)")
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore")  # torch and ExecuTorch warn on every export, as the CLI silences them
    plt.switch_backend("Agg")  # files only; importing this module leaves a notebook's backend alone
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for name, draw in FIGURES.items():
        began = time.perf_counter()
        fig = draw()
        fig.savefig(out / name, dpi=DPI)
        plt.close(fig)
        size = (out / name).stat().st_size
        print(f"wrote {out / name} ({size / 1024:.0f} KiB, {time.perf_counter() - began:.1f} s)")
    for entry in NUMBERS:
        print("\n".join(numbers(*entry)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
