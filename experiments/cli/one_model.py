"""One zoo model through the planner: a per-method summary, Gantt figures, problem files.

The `memplan plan`, `plot` and `export-problem` commands are thin wrappers
around these functions.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from memplan.experiments.sweep.grid import (
    SweepConfigError,
    check_alignment,
    check_choice,
    check_time_limit,
    prepare_out,
)
from memplan.experiments.sweep.table import RENAMED
from memplan.experiments.zoo.lowering import Lowered, library_warnings_silenced, lower_planned, stock_arenas
from memplan.problem import Problem
from memplan.solvers import DEFAULT_SOLVER, DEFAULT_TIME_LIMIT_S

SUMMARY_COLUMNS = (
    "method",
    "buffers",
    "lower_bound_bytes",
    "arena_bytes",
    "stock_arena_bytes",
    "saving_vs_stock",
    "proven_optimal",
    "solve_seconds",
    "cats_fused",
)
FIGURE_SUFFIXES = (".png", ".svg", ".pdf")
DEFAULT_ALIGNMENT = 16


@dataclass
class ModelPlan:
    """A zoo model lowered with PlannerPass, restricted to `methods`."""

    model: str
    solver: str
    methods: list[str]
    lowered: Lowered
    summary: pd.DataFrame


def _load(name: str):
    from memplan.experiments.zoo import programs

    return programs.load(name)


def _methods(model, method: str | None) -> list[str]:
    from memplan.experiments.zoo.programs import call_order

    names = call_order(model)
    if method is None:
        return names
    check_choice(f"method of {model.name}", method, names)
    return [method]


def plan_model(
    name: str,
    solver: str = DEFAULT_SOLVER,
    method: str | None = None,
    time_limit_s: float = DEFAULT_TIME_LIMIT_S,
    alignment: int = DEFAULT_ALIGNMENT,
    cat_fusion: bool = True,
    with_stock: bool = True,
) -> ModelPlan:
    """Plan every method (or `method`) of zoo model `name` and summarise each."""
    from memplan import solvers

    check_choice("solver", solver, solvers.available())
    check_alignment(alignment)
    check_time_limit(time_limit_s)
    model = _load(name)
    methods = _methods(model, method)
    with library_warnings_silenced():
        lowered = lower_planned(model, solver, alignment, cat_fusion, time_limit_s)
        stock = stock_arenas(model, alignment) if with_stock else {}
    rows = sorted(
        (r for r in lowered.rows() if r["method"] in methods), key=lambda r: methods.index(r["method"])
    )
    df = pd.DataFrame.from_records(rows).rename(columns=RENAMED)
    df["stock_arena_bytes"] = [stock.get(m) for m in df["method"]]
    df["saving_vs_stock"] = 1 - df["arena_bytes"] / df["stock_arena_bytes"].astype("float64")
    return ModelPlan(name, solver, methods, lowered, df[list(SUMMARY_COLUMNS)])


def format_summary(result: ModelPlan) -> str:
    """A title line, then the summary as a Markdown table (experiments.tables: positive saving = smaller)."""
    from memplan.experiments.cli.tables import markdown

    return f"{result.model}: solver {result.solver}\n" + markdown(result.summary)


def check_figure_path(path: str | Path) -> Path:
    """`path` if its suffix is a figure format we write, else SweepConfigError."""
    path = Path(path)
    if path.suffix.lower() not in FIGURE_SUFFIXES:
        raise SweepConfigError(f"figure file {str(path)!r} must end in one of: {', '.join(FIGURE_SUFFIXES)}")
    return path


def save_gantt(result: ModelPlan, path: str | Path) -> Path:
    """One Gantt chart (viz.gantt) per planned method, stacked, written to `path`.

    Drawn on a bare Figure, not pyplot, so a notebook calling it keeps its backend.
    """
    from matplotlib.figure import Figure

    from memplan import viz

    path = check_figure_path(path)
    results = result.lowered.planner_pass.results
    fig = Figure(figsize=(10, 4 * len(result.methods)))
    axes = fig.subplots(len(result.methods), 1, squeeze=False)
    for ax, method in zip(axes[:, 0], result.methods):
        viz.gantt(
            results[method].problem,
            results[method].plan,
            ax=ax,
            title=f"{result.model} · {method} · {result.solver}",
        )
    fig.tight_layout()
    return write_figure(fig, path)


def write_figure(fig, path: Path) -> Path:
    """Save `fig` (format from the suffix); an unwritable path is a SweepConfigError."""
    try:
        fig.savefig(path)
    except OSError as exc:
        raise SweepConfigError(f"cannot write figure {str(path)!r}: {exc.strerror or exc}") from None
    return path


def export_problems(
    name: str,
    out: str | Path,
    alignment: int = DEFAULT_ALIGNMENT,
    cat_fusion: bool = True,
) -> tuple[list[Path], list[str]]:
    """Write each method's Problem as memplan JSON (exact) and MiniMalloc CSV (one per pool).

    Returns the paths written and notes on what the CSV files leave out. The
    problem does not depend on the solver, so the quick best-fit solver does
    the lowering that extracts it.
    """
    from memplan import io

    check_alignment(alignment)
    folder = prepare_out(out)
    model = _load(name)
    with library_warnings_silenced():
        lowered = lower_planned(model, "bestfit", alignment, cat_fusion, DEFAULT_TIME_LIMIT_S)
    written: list[Path] = []
    notes: list[str] = []
    for method, result in sorted(lowered.planner_pass.results.items()):
        stem = f"{name}.{method}"
        io.save_json(result.problem, folder / f"{stem}.json")
        written.append(folder / f"{stem}.json")
        views = minimalloc_views(result.problem)
        for pool, view in views.items():
            path = folder / (f"{stem}.csv" if len(views) == 1 else f"{stem}.pool{pool}.csv")
            io.write_minimalloc_csv(view, path)
            written.append(path)
        dropped = _dropped(result.problem)
        if dropped:
            notes.append(f"{stem}: the CSV files leave out {dropped}; the JSON keeps them")
    return written, notes


def minimalloc_views(problem: Problem) -> dict[int, Problem]:
    """Per pool, the problem MiniMalloc CSV can hold: the group roots, no same-offset sets.

    A contiguous group occupies exactly its root's rectangle, so its root
    stands for it; same-offset sets have no CSV form and are dropped (a
    relaxation: the lower bound is unchanged).
    """
    views = {}
    for pool in problem.pools:
        roots = [dataclasses.replace(b, pool=0) for b in problem.roots() if b.pool == pool]
        views[pool] = Problem(tuple(roots), capacity=problem.capacity, name=f"{problem.name} pool {pool}")
    return views


def _dropped(problem: Problem) -> str:
    parts = []
    if problem.groups:
        parts.append(f"{len(problem.groups)} contiguous groups (their roots stand for them)")
    if problem.same_offsets:
        parts.append(f"{len(problem.same_offsets)} same-offset sets")
    return ", ".join(parts)
