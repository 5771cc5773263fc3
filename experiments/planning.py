"""`memplan.plan_model`: plan any program (a zoo name, a `.pt2`, `file.py:factory`, a module) with
`PlannerPass` next to the stock planner, for notebooks and scripts; `memplan plan` is this function.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
from torch import nn

from memplan.experiments.checks import check_alignment, check_choice, check_time_limit
from memplan.experiments.zoo import ZooModel
from memplan.experiments.zoo.lowering import PROGRAM_ROW, Lowered, levers
from memplan.experiments.zoo.programs import from_module, load, with_lowering
from memplan.solvers import DEFAULT_ALIGNMENT, DEFAULT_SOLVER, DEFAULT_TIME_LIMIT_S


@dataclass
class PlannedModel:
    """A model lowered to ExecuTorch with `PlannerPass`, next to the stock planner's arenas.

    `results[method]` has the problem, the plan, the cat report; `summary` is one row per method, and for
    a program of several methods a last row `PROGRAM_ROW`: what the runtime allocates for the whole
    program (per arena the largest method, summed), memplan's and stock's; `matches_eager` is set when
    the program was run and compared with eager PyTorch; `stock_program` is the stock-planned program
    (when `stock`).
    """

    model: ZooModel
    solver: str
    program: Any  # ExecutorchProgramManager
    results: dict[str, Any]
    methods: list[str]
    stock_arena_bytes: dict[str, int] = field(default_factory=dict)
    summary: pd.DataFrame = field(default_factory=pd.DataFrame)
    matches_eager: bool | None = None
    stock_program: Any = None  # ExecutorchProgramManager planned by ExecuTorch's own pass

    @property
    def buffer(self) -> bytes:
        """The `.pte` bytes."""
        return self.program.buffer

    def save(self, path: str | Path) -> Path:
        """Write the planned `.pte` to `path`."""
        path = Path(path)
        path.write_bytes(self.buffer)
        return path

    def report_data(self) -> Any:
        """The report's data (memplan.viz.report.ProgramReport): each method's plan next to the stock one."""
        from memplan.experiments.zoo.lowering import levers_on
        from memplan.viz.report import from_lowered

        levers = levers_on(self.summary.attrs.get("levers", ""))
        return from_lowered(
            self.model.name, self.results, self.program, self.stock_program, self.methods, levers, self.solver
        )

    def report(self, path: str | Path, budget: str | None = None) -> Path:
        """Write the interactive HTML report (memplan.viz.report) to `path`; `budget` as
        "sram:256KiB,dram:8MiB" adds a verdict per bank. Opens offline: plotly's JavaScript is inlined."""
        from memplan.viz.report import parse_budget, write

        return write(self.report_data(), path, parse_budget(budget) if budget else None)

    def model_explorer(self, path: str | Path) -> list[Path]:
        """Write Model Explorer node data for the program (memplan.viz.model_explorer: `path` the live
        bytes, the other overlays beside it) and the program itself as `path` with .pte; returns the
        node data files. Needs the explorer extra (pip install 'memplan[explorer]')."""
        from memplan.viz.model_explorer import require_explorer, write_overlays

        require_explorer()
        path = Path(path)
        self.save(path.with_suffix(".pte"))
        return write_overlays(self.report_data(), path)

    def _repr_html_(self) -> str:
        """In Jupyter: the per-method table and a small live-bytes chart per method (inline SVG)."""
        from memplan.viz.report.notebook import program_html

        heading = f"{self.model.name}, solver {self.solver}"
        return program_html(self.report_data(), heading, self.summary.to_html(index=False, na_rep=""))

    def __repr__(self) -> str:
        by_method = self.summary.set_index("method")["arena_bytes"]
        arenas = ", ".join(f"{m}: {by_method[m]:,} B" for m in self.methods)
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
    "not_proven_because",
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
    slice_noop: bool | None = None,
    reorder: bool | None = None,
    elementwise_in_place: bool | None = None,
    stock: bool = True,
    check: bool = False,
    partitioner: str | None = None,
    convert_linear: bool | None = None,
    const_prop: bool | None = None,
    progress: Callable[[str], None] | None = None,
    tiling: Any = None,
    memory_map: str = "",
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
    `slice_noop`, `reorder` and `elementwise_in_place` None keep `PlannerPass`'s defaults. `progress`, if given, is called with a line before
    each long step (export and planning, the stock lowering, the check).
    Pass the same ZooModel again to plan it with another solver without exporting again.
    `tiling` (True or a `TilingOptions`) tiles each method's high-resolution CNN region before
    lowering (memplan.planner.tiling; `results[method].tiling` is the report); `check` then compares
    the tiled program with the untiled eager model, and the stock arena is the untiled program's.
    `memory_map` ("sram:64KiB,dram:16MiB", planner.memory.bank_maps.parse_memory_map) plans across its
    banks with `PlannerPass(memory_map=...)`, the stock side with ExecuTorch's banked pass (left out,
    `stock_program` None, when that pass cannot place the program); a map memplan cannot fit either
    raises `BankCapacityError` naming the bank and the bytes missing.
    """
    from memplan import solvers
    from memplan.experiments.zoo import runtime
    from memplan.experiments.zoo.lowering import library_warnings_silenced, lower_planned

    check_choice("solver", solver, solvers.available())
    check_alignment(alignment)
    check_time_limit(time_limit_s)
    model = with_lowering(_loaded(source, example_inputs), partitioner, convert_linear, const_prop)
    methods = call_order(model)
    if method is not None:
        check_choice(f"method of {model.name}", method, methods)
        methods = [method]
    say = progress or (lambda line: None)
    with library_warnings_silenced():
        say(f"{model.name}: exporting and planning with {solver} (time limit {time_limit_s:g} s per method)")
        lowered = lower_planned(
            model,
            solver,
            alignment,
            cat_fusion,
            time_limit_s,
            state_in_place=state_in_place,
            slice_noop=slice_noop,
            reorder=reorder,
            elementwise_in_place=elementwise_in_place,
            tiling=tiling,
            memory_map=memory_map,
        )
        if stock:
            say(f"{model.name}: lowering with ExecuTorch's own planner")
        stock_program = _stock(model, alignment, memory_map) if stock else None
        verdict = None
        if check:
            say(f"{model.name}: running the program against eager PyTorch")
            runtime.check_outputs(model, lowered.program.buffer)
            verdict = True
    return _planned_model(
        model, solver, lowered, methods, stock_program, verdict, whole_program=method is None
    )


def _planned_model(
    model: ZooModel,
    solver: str,
    lowered: Lowered,
    methods: list[str],
    stock_program: Any,
    verdict: bool | None,
    whole_program: bool,
) -> PlannedModel:
    """`plan_model`'s answer: the lowered program, its results and the summary table against stock
    (with how it was lowered and which levers were on in `summary.attrs`), for the `methods` planned."""
    methods = [m for m in methods if m in lowered.planner_pass.results]
    summary = _summary(lowered, methods, stock_program, whole_program=whole_program)
    summary.attrs["lowering"] = model.lowering
    summary.attrs["levers"] = levers(lowered.planner_pass)
    arenas = dict(zip(summary["method"], summary["stock_arena_bytes"]))
    stock_bytes = {m: int(arenas[m]) for m in methods if not pd.isna(arenas[m])}
    results = lowered.planner_pass.results
    return PlannedModel(
        model, solver, lowered.program, results, methods, stock_bytes, summary, verdict, stock_program
    )


def _stock(model: ZooModel, alignment: int, memory_map: str) -> Any:
    """The program ExecuTorch's own pass lowers `model` to; None when its banked pass cannot place it."""
    from executorch.exir.banked_memory_planning import BankPlacementError

    from memplan.experiments.zoo.lowering import stock_program

    try:
        return stock_program(model, alignment, memory_map)
    except BankPlacementError:
        return None


def _loaded(source: Any, example_inputs: tuple | None) -> ZooModel:
    """The program `source` names or holds (a module or dict of methods with their inputs)."""
    if isinstance(source, (nn.Module, Mapping)):
        return from_module(source, example_inputs)
    return load(source)


def _summary(lowered: Any, methods: list[str], stock_program: Any, whole_program: bool) -> pd.DataFrame:
    """One row per method (SUMMARY_COLUMNS), and the program row when the program has several methods."""
    from memplan.experiments.zoo import runtime

    stock = {} if stock_program is None else runtime.stock_arena_bytes(stock_program)
    rows = {r["method"]: r for r in lowered.rows()}
    records = [{**rows[m], "stock_arena_bytes": sum(stock[m]) if m in stock else None} for m in methods]
    if whole_program and len(rows) > 1:
        records.append(
            {
                "method": PROGRAM_ROW,
                "buffers": sum(r["buffers"] for r in rows.values()),
                "arena_bytes": lowered.program_arena_bytes,
                "stock_arena_bytes": runtime.program_arena_bytes(stock) if stock else None,
            }
        )
    summary = pd.DataFrame.from_records(records, columns=list(SUMMARY_COLUMNS))
    for column in ("buffers", "lower_bound_bytes", "arena_bytes", "stock_arena_bytes", "cats_fused"):
        summary[column] = pd.array(summary[column], dtype="Int64")
    summary["state_copies_removed"] = pd.array(summary["state_copies_removed"], dtype="Int64")
    summary["proven_optimal"] = pd.array(summary["proven_optimal"], dtype="boolean")
    summary["not_proven_because"] = summary["not_proven_because"].astype("string")
    summary["saving_vs_stock"] = 1 - summary["arena_bytes"].astype("float64") / summary[
        "stock_arena_bytes"
    ].astype("float64")
    return summary
