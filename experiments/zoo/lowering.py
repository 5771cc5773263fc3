"""Lower a zoo model with `PlannerPass` or with ExecuTorch's own planner, and the numbers of the result.

Shared by sweeps (one run is one lowering) and by the single-model commands.
"""

from __future__ import annotations

import contextlib
import time
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any


@contextlib.contextmanager
def library_warnings_silenced() -> Iterator[None]:
    """No Python warnings: torch and ExecuTorch give dozens per export, the same every time."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


def stock_arenas(model, alignment: int, memory_map: str = "") -> dict[str, int]:
    """Per method: the bytes ExecuTorch's own MemoryPlanningPass needs over all arenas."""
    from memplan.experiments.zoo import runtime

    program = stock_program(model, alignment, memory_map)
    return {m: sum(sizes) for m, sizes in runtime.stock_arena_bytes(program).items()}


def stock_program(model, alignment: int, memory_map: str = ""):
    """The program ExecuTorch's own MemoryPlanningPass lowers `model` to.

    With a memory map: its `banked_memory_planning_pass` (which raises BankPlacementError when
    the map cannot hold the program, and refuses share_mutable_buffers).
    """
    from executorch.exir.passes import MemoryPlanningPass

    from memplan.experiments.zoo import runtime

    if memory_map:
        from executorch.exir.banked_memory_planning import banked_memory_planning_pass

        from memplan.planner.memory.bank_maps import parse_memory_map

        config = {**model.memory_planning_config, "alignment": alignment}
        stock_pass = banked_memory_planning_pass(parse_memory_map(memory_map), **config)
    else:
        stock_pass = MemoryPlanningPass(**{**model.memory_planning_config, "alignment": alignment})
    return runtime.lower(model, memory_planning_pass=stock_pass)


# The row of a program of several methods as a whole (plan_model's summary, the sweep's table).
PROGRAM_ROW = "(program)"


@dataclass
class Lowered:
    """A model lowered with PlannerPass: the program, the pass (with its results), the time taken."""

    program: Any
    planner_pass: Any
    export_seconds: float

    @property
    def program_arena_bytes(self) -> int:
        """What the runtime allocates for the whole program: per arena the largest method, summed."""
        from memplan.experiments.zoo import runtime

        return runtime.program_arena_bytes(runtime.stock_arena_bytes(self.program))

    def rows(self) -> list[dict[str, Any]]:
        """One sweep row per method under the table's column names (sweep.table.COLUMNS), without the
        model/solver/settings columns."""
        from memplan.experiments.zoo import runtime

        emitted = runtime.stock_arena_bytes(self.program)  # non_const_buffer_sizes, whatever the planner
        rows = []
        for method, result in sorted(self.planner_pass.results.items()):
            fused, removed = _cat_numbers(getattr(result, "cat_report", None))
            state = getattr(result, "state_report", None)
            rows.append(
                {
                    "method": method,
                    "buffers": len(result.problem.buffers),
                    "lower_bound_bytes": result.lower_bound,
                    "arena_bytes": sum(emitted[method]),
                    "proven_optimal": bool(result.plan.proven_optimal),
                    "not_proven_because": result.not_proven_because,
                    "plan_solver": result.plan.solver,
                    "solve_seconds": result.plan.seconds,
                    "export_seconds": self.export_seconds,
                    "cats_fused": fused,
                    "copy_removed_bytes": removed,
                    "levers": levers(self.planner_pass),
                    "state_copies_removed": 0 if state is None else len(state.removed),
                    "state_copy_removed_bytes": 0 if state is None else state.copy_bytes_removed,
                    **_bank_columns(result),
                    **_tiling_columns(result),
                }
            )
        return rows


def lower_planned(
    model,
    solver: str,
    alignment: int,
    cat_fusion: bool,
    time_limit_s: float,
    reproducible: bool = False,
    state_in_place: bool = True,
    memory_map: str = "",
    slice_noop: bool | None = None,
    reorder: bool | None = None,
    tiling: Any = None,
    elementwise_in_place: bool | None = None,
) -> Lowered:
    """Lower `model` to ExecuTorch with PlannerPass(solver, settings), across `memory_map`'s banks if given
    (`slice_noop`, `reorder`, `elementwise_in_place` None: the pass's default). With `tiling` (True or a TilingOptions) every method is
    tiled before `to_edge` (zoo.tiled)."""
    from memplan import PlannerPass
    from memplan.experiments.zoo import runtime
    from memplan.planner.memory.bank_maps import parse_memory_map

    given = {"slice_noop": slice_noop, "reorder": reorder, "elementwise_in_place": elementwise_in_place}
    options: dict[str, Any] = {name: value for name, value in given.items() if value is not None}
    planner_pass = PlannerPass(
        solver=solver,
        time_limit_s=time_limit_s,
        alignment=alignment,
        cat_fusion=cat_fusion,
        memory_map=parse_memory_map(memory_map) if memory_map else None,
        solver_options={"reproducible": True} if reproducible else None,
        state_in_place=state_in_place,
        **options,
        tiling=tiling,
    )
    began = time.perf_counter()
    if planner_pass.tiling is not None:
        from memplan.experiments.zoo.tiled import tiled_model

        model = tiled_model(model, planner_pass)
    program = runtime.lower(model, memory_planning_pass=planner_pass)
    return Lowered(program, planner_pass, time.perf_counter() - began)


LEVER_NAMES = (
    "cat fusion",
    "state in place",
    "slice no-ops",
    "reorder",
    "elementwise in place",
    "banks",
    "tiling",
)


def levers(planner_pass: Any) -> str:
    """Which of memplan's levers the pass had on, e.g. "cat fusion + state in place + slice no-ops" ("none": the
    solver alone, so `greedy` is ExecuTorch's algorithm on the program it was given)."""
    switched_on = {lever.name for lever in planner_pass.levers}
    flags = (
        "cat fusion" in switched_on,
        "state in place" in switched_on,
        "slice no-ops" in switched_on,
        "reorder" in switched_on,
        "elementwise in place" in switched_on,
        planner_pass.algorithm.memory_map is not None,
        getattr(planner_pass, "tiling", None) is not None,
    )
    return " + ".join(name for name, flag in zip(LEVER_NAMES, flags) if flag) or "none"


def levers_on(text: str) -> dict[str, bool]:
    """`levers`' text back as each lever of LEVER_NAMES -> whether it was on."""
    on = set(text.split(" + "))
    return {name: name in on for name in LEVER_NAMES}


def _tiling_columns(result: Any) -> dict[str, Any]:
    """With tiling on: the region tiled, its bands and extra MACs (a fraction), the search's peak
    bounds before and after (empty when the method was not tiled with tiling on, or tiling was off)."""
    report = getattr(result, "tiling", None)
    if report is None:
        return {}
    if not report.tiled:
        return {"tiled_region": report.summary(), "tiling_bands": 0, "tiling_extra_macs": 0.0}
    return {
        "tiled_region": report.region_text(),
        "tiling_bands": report.patches,
        "tiling_extra_macs": report.extra_macs,
        "tiling_peak_bound_before": report.base_peak,
        "tiling_peak_bound_after": report.peak,
    }


def _bank_columns(result: Any) -> dict[str, Any]:
    """Per declared bank: `<bank>_bytes`, `<bank>_peak`, `<bank>_traffic_share` (empty without banks).

    The share is of the traffic the emitted program moves (the pass's `result.traffic`: every
    instruction's tensor arguments at their bytes, by arena).
    """
    from memplan.bank_placement import bank_report

    if not result.problem.banks:
        return {}
    rows = bank_report(result.problem, result.plan)
    total = sum(result.traffic.values()) or 1
    columns: dict[str, Any] = {}
    for row in rows:
        if result.problem.bank(row.pool) is None:
            continue
        columns[f"{row.name}_bytes"] = row.bytes
        columns[f"{row.name}_peak"] = row.peak
        columns[f"{row.name}_traffic_share"] = result.traffic.get(row.pool, 0) / total
    return columns


def _cat_numbers(report: Any) -> tuple[int, int]:
    """(cats whose copy was removed, copy bytes removed per inference); zero when fusion was off."""
    if report is None:
        return 0, 0
    from memplan.planner.levers.cat.decisions import CatStatus

    fused = sum(d.status is not CatStatus.REFUSED for d in report.decisions)
    return fused, int(report.copy_bytes_removed)
