"""`memplan.plan_model`: plan any program (a zoo name, a `.pt2`, `file.py:factory`, a module) with
`PlannerPass` next to the stock planner, for notebooks and scripts; `memplan plan` is this function.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
from torch import nn

from memplan.experiments.checks import check_alignment, check_choice, check_time_limit
from memplan.experiments.zoo import ZooModel
from memplan.experiments.zoo.programs import from_module, load, with_lowering
from memplan.solvers import DEFAULT_ALIGNMENT, DEFAULT_SOLVER, DEFAULT_TIME_LIMIT_S


@dataclass
class PlannedModel:
    """A model lowered to ExecuTorch with `PlannerPass`, next to the stock planner's arenas.

    `results[method]` has the problem, the plan, the cat report; `summary` is one row per method;
    `matches_eager` is set when the program was run and compared with eager PyTorch.
    """

    model: ZooModel
    solver: str
    program: Any  # ExecutorchProgramManager
    results: dict[str, Any]
    methods: list[str]
    stock_arena_bytes: dict[str, int] = field(default_factory=dict)
    summary: pd.DataFrame = field(default_factory=pd.DataFrame)
    matches_eager: bool | None = None

    @property
    def buffer(self) -> bytes:
        """The `.pte` bytes."""
        return self.program.buffer

    def save(self, path: str | Path) -> Path:
        """Write the planned `.pte` to `path`."""
        path = Path(path)
        path.write_bytes(self.buffer)
        return path

    def _repr_html_(self) -> str:
        return f"<b>{self.model.name}</b>, solver {self.solver}<br>" + self.summary.to_html(index=False)

    def __repr__(self) -> str:
        arenas = ", ".join(
            f"{m}: {self.summary.set_index('method').at[m, 'arena_bytes']:,} B" for m in self.methods
        )
        return f"PlannedModel({self.model.name!r}, solver={self.solver!r}, {arenas})"


def call_order(model: ZooModel) -> list[str]:
    """Methods in the order the model's call sequence first uses them."""
    order = list(dict.fromkeys(name for name, _ in model.calls))
    return order + [m for m in model.methods if m not in order]


SUMMARY_COLUMNS = (
    "method",
    "buffers",
    "lower_bound_bytes",
    "arena_bytes",
    "stock_arena_bytes",
    "saving_vs_stock",
    "proven_optimal",
    "plan_solver",
    "solve_seconds",
    "cats_fused",
    "state_copies_removed",
)


def plan_model(
    source: str | ZooModel | nn.Module | Mapping[str, tuple[nn.Module, tuple]],
    solver: str = DEFAULT_SOLVER,
    *,
    example_inputs: tuple | None = None,
    method: str | None = None,
    time_limit_s: float = DEFAULT_TIME_LIMIT_S,
    alignment: int = DEFAULT_ALIGNMENT,
    cat_fusion: bool = True,
    state_in_place: bool = True,
    stock: bool = True,
    check: bool = False,
    partitioner: str | None = None,
    convert_linear: bool | None = None,
    const_prop: bool | None = None,
) -> PlannedModel:
    """Export -> edge -> ExecuTorch with `PlannerPass(solver)`; the stock pass too; optionally run it.

    `source` is a zoo name, a `.pt2` path, `file.py:factory`, a ZooModel, an `nn.Module` (with
    `example_inputs`) or a dict of methods. Your own program is lowered exactly as given: plain
    `to_edge`, or `to_edge_transform_and_lower` with `partitioner="xnnpack"`; `convert_linear` (XNNPACK's
    ConvertToLinearPass) and `const_prop` (constant folding) only when asked. A zoo model keeps its
    recipe unless an option says otherwise; `summary.attrs["lowering"]` says how it was lowered,
    `summary.attrs["levers"]` which of memplan's levers were on.
    `check=True` runs the program in `executorch.runtime` and compares with eager PyTorch (an
    AssertionError names the call and output that differ). `memplan plan` is this function.
    Pass the same ZooModel again to plan it with another solver without exporting again.
    """
    from memplan import solvers
    from memplan.experiments.zoo import runtime
    from memplan.experiments.zoo.lowering import (
        levers,
        library_warnings_silenced,
        lower_planned,
        stock_arenas,
    )

    check_choice("solver", solver, solvers.available())
    check_alignment(alignment)
    check_time_limit(time_limit_s)
    if isinstance(source, (nn.Module, Mapping)):
        model = from_module(source, example_inputs)
    else:
        model = load(source)
    model = with_lowering(model, partitioner, convert_linear, const_prop)
    methods = call_order(model)
    if method is not None:
        check_choice(f"method of {model.name}", method, methods)
        methods = [method]
    with library_warnings_silenced():
        lowered = lower_planned(
            model, solver, alignment, cat_fusion, time_limit_s, state_in_place=state_in_place
        )
        arenas = stock_arenas(model, alignment) if stock else {}
        verdict = None
        if check:
            runtime.check_outputs(model, lowered.program.buffer)
            verdict = True
    methods = [m for m in methods if m in lowered.planner_pass.results]
    rows = {r["method"]: r for r in lowered.rows()}
    summary = pd.DataFrame.from_records([rows[m] for m in methods])
    summary["stock_arena_bytes"] = pd.array([arenas.get(m) for m in methods], dtype="Int64")
    summary["saving_vs_stock"] = 1 - summary["arena_bytes"] / summary["stock_arena_bytes"].astype("float64")
    summary = summary[list(SUMMARY_COLUMNS)]
    summary.attrs["lowering"] = model.lowering
    summary.attrs["levers"] = levers(lowered.planner_pass)
    return PlannedModel(
        model,
        solver,
        lowered.program,
        lowered.planner_pass.results,
        methods,
        {m: arenas[m] for m in methods if m in arenas},
        summary,
        verdict,
    )
