"""One program through the planner: its summary, Gantt figures, problem files.

The `memplan plan`, `plot` and `export-problem` commands are thin wrappers around these functions and
`memplan.plan_model` (experiments.planning), the one function behind the CLI and the Python API.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path
from typing import Any

from memplan.errors import UsageError
from memplan.experiments.checks import check_alignment, prepare_out
from memplan.experiments.planning import PlannedModel
from memplan.experiments.zoo.lowering import library_warnings_silenced, lower_planned
from memplan.problem import Problem
from memplan.solvers import DEFAULT_ALIGNMENT, DEFAULT_TIME_LIMIT_S

FIGURE_SUFFIXES = (".png", ".svg", ".pdf")
PTE_SUFFIX = ".pte"
# Errors of a lowering that a flag fixes: (words in the error, what to tell the user).
LOWERING_HINTS = (
    (
        ("Missing out variants", "quantized_decomposed::"),
        "the program has quantized ops (quantized_decomposed::...) with no out variants loaded here;"
        " lower it with --partitioner xnnpack, which runs them",
    ),
)


def format_summary(result: PlannedModel) -> str:
    """A title line (solver, how the program was lowered, the levers), then the summary as a Markdown table."""
    from memplan.experiments.markdown import markdown_with_notes

    title = f"{result.model.name}: solver {result.solver}; lowered with {result.model.lowering}"
    tiling = "".join(
        f"\n{method}: {result.results[method].tiling.summary()}"
        for method in result.methods
        if getattr(result.results[method], "tiling", None) is not None
    )
    table = markdown_with_notes(result.summary, "not_proven_because", ["method"])
    return f"{title}; levers: {result.summary.attrs.get('levers', '')}{tiling}\n" + table


def format_banks(result: PlannedModel) -> str:
    """Per method planned across a memory map, what each of its banks holds, next to the stock banked
    pass's, and the bytes every call moves through each bank (the banks as the method's problem has
    them: name, capacity, mem_id)."""
    from memplan.experiments.zoo import runtime

    stock = runtime.stock_arena_bytes(result.stock_program) if result.stock_program is not None else {}
    lines = []
    for method in result.methods:
        planned, theirs = result.results[method].buffer_sizes, stock.get(method)
        traffic = result.results[method].traffic
        cells = []
        for bank in result.results[method].problem.banks:
            pool = bank.pool
            mine = planned[pool] if pool < len(planned) else 0
            versus = "" if theirs is None else f", stock {theirs[pool] if pool < len(theirs) else 0:,}"
            moved = f", {traffic.get(pool, 0):,} B moved per call" if traffic else ""
            cells.append(f"{bank.name} {mine:,} of {bank.capacity:,} B{versus}{moved}")
        lines.append(f"{method} banks: " + "; ".join(cells))
    return "\n".join(lines)


def check_figure_path(path: str | Path) -> Path:
    """`path` if its suffix is a figure format we write, else UsageError."""
    path = Path(path)
    if path.suffix.lower() not in FIGURE_SUFFIXES:
        raise UsageError(f"figure file {str(path)!r} must end in one of: {', '.join(FIGURE_SUFFIXES)}")
    return path


def check_pte_path(path: str | Path) -> Path:
    """`path` if it ends in .pte and its folder exists (checked before minutes of planning), else UsageError."""
    path = Path(path)
    if path.suffix.lower() != PTE_SUFFIX:
        raise UsageError(f"program file {str(path)!r} must end in {PTE_SUFFIX}")
    if not path.parent.is_dir():
        raise UsageError(f"cannot write {str(path)!r}: no folder {str(path.parent)!r}")
    if path.is_dir():
        raise UsageError(f"cannot write {str(path)!r}: it is a folder")
    return path


def save_pte(result: PlannedModel, path: str | Path) -> Path:
    """The planned program written to `path`; an unwritable path is a UsageError."""
    try:
        return result.save(check_pte_path(path))
    except OSError as exc:
        raise UsageError(f"cannot write {str(path)!r}: {exc.strerror or exc}") from None


def check_against_stock(result: PlannedModel, atol: float | None = None) -> int:
    """Run the model's calls on memplan's program and on the stock program of the same graph; CheckError
    unless they agree bit for bit (or within `atol`). Returns the calls compared."""
    from memplan.experiments.zoo.pte_check import check_same_as_stock

    if result.stock_program is None:
        raise UsageError("no stock program to compare with (planned with stock=False)")
    with library_warnings_silenced():
        return check_same_as_stock(result.buffer, result.stock_program.buffer, result.model.calls, atol)


def lowering_hint(exc: BaseException) -> str | None:
    """One line saying which flag a failed lowering needs, or None when the error is not one we know."""
    from memplan.experiments.zoo.model_errors import error_chain

    text = " ".join(str(e) for e in error_chain(exc))
    for words, hint in LOWERING_HINTS:
        if all(w in text for w in words):
            return hint
    return None


def save_gantt(result: PlannedModel, path: str | Path) -> Path:
    """One Gantt chart (viz.gantt) per planned method, stacked, written to `path`.

    Drawn on a bare Figure, not pyplot, so a notebook calling it keeps its backend.
    """
    from matplotlib.figure import Figure

    from memplan import viz

    path = check_figure_path(path)
    results = result.results
    fig = Figure(figsize=(10, 4 * len(result.methods)))
    axes = fig.subplots(len(result.methods), 1, squeeze=False)
    for ax, method in zip(axes[:, 0], result.methods):
        viz.gantt(
            results[method].problem,
            results[method].plan,
            ax=ax,
            title=f"{result.model.name} · {method} · {result.solver}" + _padding_note(results[method]),
        )
    fig.tight_layout()
    return write_figure(fig, path)


def _padding_note(result: Any) -> str:
    """The bytes the program adds above the plan (XNNPACK's padding), so legend and table agree."""
    padding = getattr(result, "padding", 0)
    return f" (the program adds {padding} B of XNNPACK padding per arena)" if padding else ""


def write_figure(fig, path: Path) -> Path:
    """Save `fig` (format from the suffix); an unwritable path is a UsageError."""
    try:
        fig.savefig(path)
    except OSError as exc:
        raise UsageError(f"cannot write figure {str(path)!r}: {exc.strerror or exc}") from None
    return path


def export_problems(
    name: str,
    out: str | Path,
    alignment: int = DEFAULT_ALIGNMENT,
    cat_fusion: bool = True,
    **lowering: Any,
) -> tuple[list[Path], list[str]]:
    """Write each method's Problem as memplan JSON (exact) and MiniMalloc CSV (one per pool).

    Returns the paths written and notes on what the CSV files leave out. The
    problem does not depend on the solver, so the quick best-fit solver does
    the lowering that extracts it. Files are named after the program (`file:factory` ->
    `file_factory.forward.json`), never after the path of its spec. `lowering` takes
    `plan_model`'s partitioner, convert_linear and const_prop.
    """
    from memplan import io
    from memplan.experiments.zoo import programs

    check_alignment(alignment)
    folder = prepare_out(out)
    model = programs.with_lowering(programs.load(name), **lowering)
    with library_warnings_silenced():
        lowered = lower_planned(model, "bestfit", alignment, cat_fusion, DEFAULT_TIME_LIMIT_S)
    written: list[Path] = []
    notes: list[str] = []
    for method, result in sorted(lowered.planner_pass.results.items()):
        stem = file_stem(f"{model.name}.{method}")
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


def file_stem(name: str) -> str:
    """`name` as one portable file name: characters other than letters, digits, `.`, `-`, `_` become `_`."""
    return re.sub(r"[^A-Za-z0-9._-]", "_", name)


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
