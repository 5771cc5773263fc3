"""`memplan inspect` and `memplan replan`: what a built `.pte` plans, and the same program re-planned.

The analysis is `memplan.planner.pte.program`; this module turns it into tables and figures.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pandas as pd

from memplan.experiments.markdown import markdown
from memplan.planner.pte.layout import MethodLayout, ProgramLayout
from memplan.planner.pte.replan import Replan

MAX_OVERLAPS_SHOWN = 20
TENSOR_COLUMNS = (
    "value",
    "mem_id",
    "offset",
    "bytes",
    "shape",
    "dtype",
    "role",
    "first",
    "last",
    "written_by",
)


def methods_frame(program: ProgramLayout) -> pd.DataFrame:
    """One row per method: arenas, tensors, instructions, lower bound for this order, and what is missing."""
    rows = []
    for m in program.methods.values():
        rows.append(
            {
                "method": m.name,
                "instructions": m.num_instructions,
                "delegates": _counted(m.delegates),
                "planned_tensors": len(m.tensors),
                "arenas (mem_id 1, 2, ...)": " + ".join(_arena(m, i) for i in range(1, len(m.arenas))) or "0",
                "arena_bytes": m.planned_bytes,
                "lower_bound_bytes": m.lower_bound,
                "arena_over_lb": (m.planned_bytes / m.lower_bound) if m.lower_bound else None,
            }
        )
    return pd.DataFrame(rows).astype({"lower_bound_bytes": "Int64"})


def _arena(method: MethodLayout, mem_id: int) -> str:
    """An arena's bytes, and its device when it is not on the host: "512 (cuda:0)"."""
    device = method.devices.get(mem_id)
    return f"{method.arenas[mem_id]:,}" + (f" ({device})" if device else "")


def _counted(names: list[str]) -> str:
    """ "XnnpackBackend x15" rather than the name fifteen times."""
    counts = Counter(names)
    return ", ".join(name if n == 1 else f"{name} x{n}" for name, n in counts.items())


def tensors_frame(method: MethodLayout) -> pd.DataFrame:
    """One row per planned tensor of the method, in value order."""
    rows = [
        {
            "value": t.value,
            "mem_id": t.mem_id,
            "offset": t.offset,
            "bytes": t.nbytes,
            "shape": "x".join(map(str, t.shape)) or "scalar",
            "dtype": t.dtype,
            "role": t.role,
            "first": t.first,
            "last": t.last,
            "written_by": t.writer,
        }
        for t in sorted(method.tensors, key=lambda t: t.value)
    ]
    return pd.DataFrame(rows, columns=list(TENSOR_COLUMNS)).astype({"first": "Int64", "last": "Int64"})


def format_program(program: ProgramLayout, tensors: bool = True) -> str:
    """The report `memplan inspect` prints."""
    lines = [f"# {program.path or 'program'}", "", markdown(methods_frame(program))]
    for m in program.methods.values():
        lines += ["", f"## {m.name}", ""]
        lines.append(f"inputs: {_values(m.inputs)}; outputs: {_values(m.outputs)}")
        if m.devices:
            arenas = ", ".join(f"mem_id {i} on {d} ({m.arenas[i]:,} bytes)" for i, d in m.devices.items())
            lines.append(f"device arenas: {arenas}; the runtime allocates them on those devices")
        if m.lower_bound is not None:
            lines.append(
                f"the file plans {m.planned_bytes:,} bytes; lower bound for this instruction order:"
                f" {m.lower_bound:,} bytes"
            )
        if m.state_placement:
            lines.append(m.state_placement)
        for reason in m.cannot:
            lines.append(f"cannot derive lifetimes: {reason}")
        for overlap in m.overlaps[:MAX_OVERLAPS_SHOWN]:
            lines.append(f"live overlap: {overlap}")
        if len(m.overlaps) > MAX_OVERLAPS_SHOWN:
            lines.append(f"live overlap: ... and {len(m.overlaps) - MAX_OVERLAPS_SHOWN} more")
        for note in m.notes:
            lines.append(f"note: {note}")
        if tensors and m.tensors:
            lines += ["", markdown(tensors_frame(m))]
    return "\n".join(lines) + "\n"


def _values(values: list[int]) -> str:
    return ", ".join(f"v{v}" for v in values) or "none"


def format_replan(result: Replan) -> str:
    """One row per method: arenas before and after, the solver's plan, or why the method was kept."""
    rows = []
    for m in result.methods:
        rows.append(
            {
                "method": m.method,
                "before_bytes": sum(m.before),
                "after_bytes": sum(m.after),
                "saving": (m.saved_bytes / sum(m.before)) if sum(m.before) else None,
                "proven_optimal": None if m.plan is None else bool(m.plan.proven_optimal),
                "kept_because": m.kept_because,
            }
        )
    return markdown(pd.DataFrame(rows).astype({"proven_optimal": "boolean"})) + "\n"


def save_figure(program: ProgramLayout, path: str | Path) -> Path:
    """Gantt chart and memory profile of each method whose problem could be derived, one row each."""
    from matplotlib.figure import Figure

    from memplan import viz
    from memplan.experiments.cli.one_model import check_figure_path, write_figure

    path = check_figure_path(path)
    drawn = [m for m in program.methods.values() if m.problem is not None and m.layout is not None]
    if not drawn:
        raise ValueError("no method's lifetimes could be derived, so there is nothing to draw")
    fig = Figure(figsize=(14, 4.5 * len(drawn)))
    axes = fig.subplots(len(drawn), 2, squeeze=False, gridspec_kw={"width_ratios": [2, 1]})
    for (gantt_ax, profile_ax), m in zip(axes, drawn):
        assert m.problem is not None and m.layout is not None
        viz.gantt(m.problem, m.layout, ax=gantt_ax, title=f"{m.name}: as built")
        viz.profile(m.problem, {"as built": m.layout}, ax=profile_ax)
        profile_ax.set_title(f"{m.name}: live bytes")
    fig.tight_layout()
    return write_figure(fig, path)
