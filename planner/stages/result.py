"""What the pass did for one method: `PlannerPass.results[method]`."""

from __future__ import annotations

import html
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from typing import TypeVar

from executorch.exir.tensor import TensorSpec

from memplan.peak_bound import lower_bound
from memplan.plan import Plan
from memplan.planner.levers.cat.report import CatReport
from memplan.planner.levers.elementwise_in_place.report import InPlaceReport
from memplan.planner.levers.reorder.report import ReorderReport
from memplan.planner.levers.slice_noop.decisions import SliceNoops
from memplan.planner.levers.slice_noop.report import SliceReport
from memplan.planner.levers.state_in_place.report import StateReport
from memplan.planner.memory.devices import DeviceArenas
from memplan.planner.tiling.report import TilingReport, tiling_note
from memplan.problem import Problem

_Report = TypeVar("_Report")
UNKNOWN_BOUND = "the emitted program's lower bound is unknown"  # how `not_proven_because` says it


NOT_TILED_HERE = (
    "tiling: not applied; planned untiled. The memory planning pass runs inside to_executorch, after"
    " lowering, where it can only remove instructions (cat fusion, slice no-ops), not add the bands' ops"
    " (under a delegate the convolutions are inside its blobs): tile the exported program before to_edge"
    " with PlannerPass.tile(ep, method), or run the export under `memplan run --tiling`"
)
"""The note of a method planned with tiling on but handed over untiled: what the pass did and did not."""


@dataclass
class MethodResult:
    """What the pass did for one method (or control-flow submodule).

    `buffer_sizes` is the `non_const_buffer_sizes` written into the program;
    `stock_sizes` is the `non_const_buffer_sizes` of the program ExecuTorch's
    own `MemoryPlanningPass` (under a memory map: its BankedGreedy; [] when
    that raises BankPlacementError) builds from the same edge program, for
    comparison: the write-backs as ExecuTorch emits them (the problem is taken
    before `state_in_place` rewrites them), and the shared-state arena when
    state is shared across methods (ExecuTorch's `share_mutable_buffers` lays
    it out the same way). Without a memory map it is computed on first use by
    memplan's byte-exact replica of that greedy (solvers.heuristics.greedy), so the pass
    does not pay for the solve. In a method with control flow, the bytes
    reserved for its submodules are memplan's. `reports` holds each lever's
    report under its name (memplan.planner.levers).
    """

    problem: Problem
    plan: Plan
    buffer_sizes: list[int]
    stock: Callable[[], list[int]] = field(repr=False)  # computes `stock_sizes`
    submodules: dict[str, MethodResult] = field(default_factory=dict)
    reports: dict[str, object] = field(default_factory=dict)  # lever name -> its report
    specs: dict[str, TensorSpec] = field(default_factory=dict)  # buffer id -> its TensorSpec
    padding: int = 0  # bytes added on top of every arena with tensors (XNNPACK)
    algorithm: str = (
        ""  # the algorithm given to the pass (memplan.planner.algorithms.translate.algorithm_name)
    )
    note: str = ""  # how it was honoured: translated (and whose plan was kept) or run as given
    arenas: DeviceArenas = field(default_factory=DeviceArenas)  # the device of each non-host arena
    # Bytes per arena of every instruction's tensor arguments, as the emitted program counts them
    # (planner.memory.instruction_traffic): what a memory map's fast banks serve.
    traffic: dict[int, int] = field(default_factory=dict)
    # The emitted program's lower bound for this method, when a proof was re-checked on it
    # (planner.stages.proof_check); a proof it does not bear out is withdrawn from `plan`. Like the
    # plan's arena it counts tensors only: `buffer_sizes` adds `padding` (XNNPACK's 64 B, stock too).
    emitted_lower_bound: int | None = None
    # The graph's node names in order when the method was planned: `steps[i]` is the node at step i of
    # `problem`'s lifetimes (ExecuTorch's node index), so a step can be traced to the instruction the
    # emitted program runs for that node (viz.report.instructions) after the levers removed nodes.
    steps: tuple[str, ...] = ()
    # Why that bound could not be derived, in one line ("" when it was, or was not looked for).
    emitted_bound_unknown: str = ""

    @cached_property
    def stock_sizes(self) -> list[int]:
        return self.stock()

    @property
    def lower_bound(self) -> int:
        """The lower bound a table shows beside the arena: the emitted program's when it was derived
        (the program the user builds), else that of the problem the pass solved."""
        if self.emitted_lower_bound is not None:
            return self.emitted_lower_bound
        return lower_bound(self.problem)

    @property
    def not_proven_because(self) -> str:
        """Why the plan is not proven optimal, in one line ("" when it is): a table's column."""
        if self.plan.proven_optimal:
            return ""
        if self.emitted_bound_unknown:
            why = f"{UNKNOWN_BOUND}: {self.emitted_bound_unknown}"
        else:
            why = self.plan.status or self.plan.outcome.value
        return " ".join(why.split())  # one line, whatever an exception's message held

    @property
    def cat_report(self) -> CatReport | None:
        """Set when cat fusion is on (memplan.planner.levers.cat)."""
        return self._report("cat fusion", CatReport)

    @property
    def state_report(self) -> StateReport | None:
        """Set when state_in_place is on (memplan.planner.levers.state_in_place)."""
        return self._report("state in place", StateReport)

    @property
    def slice_report(self) -> SliceReport | None:
        """Set when slice_noop is on (memplan.planner.levers.slice_noop)."""
        return self._report("slice no-ops", SliceReport)

    @property
    def reorder_report(self) -> ReorderReport | None:
        """Set when reorder is on (memplan.planner.levers.reorder)."""
        return self._report("reorder", ReorderReport)

    @property
    def in_place_report(self) -> InPlaceReport | None:
        """Set when elementwise_in_place is on (memplan.planner.levers.elementwise_in_place)."""
        return self._report("elementwise in place", InPlaceReport)

    @property
    def slice_noops(self) -> SliceNoops | None:
        """The slice no-ops' decisions and problem, when slice_noop is on."""
        report = self.slice_report
        return report.noops if report is not None else None

    @property
    def tiling(self) -> TilingReport | None:
        """Set when tiling is on and `PlannerPass.tile` tiled the method (memplan.planner.tiling)."""
        return self._report("tiling", TilingReport)

    def _repr_html_(self) -> str:
        """In Jupyter: the arena against the stock plan's and the bound, what the levers did, and the
        bytes live at each step of the problem (inline SVG, memplan.html) with the peak marked."""
        from memplan.html import Series, step_chart, table
        from memplan.peak_bound import lower_bound
        from memplan.timeline import peak, profile

        problem = self.problem
        spans = [(b.start, b.end, b.size) for b in problem.buffers if problem.parent_of(b.id) is None]
        most, at = peak(spans)
        numbers = table(
            ["buffers", "arena (B)", "stock arena (B)", "lower bound (B)", "proven optimal", "solver"],
            [
                [
                    len(problem.buffers),
                    sum(self.buffer_sizes),
                    sum(self.stock_sizes) if self.stock_sizes else None,
                    lower_bound(problem),
                    self.plan.proven_optimal,
                    self.plan.solver,
                ]
            ],
        )
        said = [r.summary() for r in self.reports.values() if hasattr(r, "summary")] + [self.note]
        words = "".join(f"<div style='font-size:11px'>{html.escape(w)}</div>" for w in said if w)
        chart = step_chart(
            f"live bytes, peak {most:,} B at step {at}",
            [Series("live bytes", "#222", *profile(spans))],
            [(at, most)],
        )
        return f"<div class='memplan'>{numbers}{words}{chart}</div>"

    def attach_tiling(self, report: TilingReport | None, failure: str | None = None) -> None:
        """With tiling on: keep the method's tiling report (None: `PlannerPass.tile` did not tile it)
        and say in the note what tiling did, or why the method was lowered untiled (`failure`)."""
        if report is not None:
            self.reports["tiling"] = report
        if failure is not None:
            why = f"tiling: {failure}"
        else:
            why = tiling_note(report) if report is not None else NOT_TILED_HERE
        self.note = f"{self.note}; {why}" if self.note else why

    def _report(self, name: str, kind: type[_Report]) -> _Report | None:
        report = self.reports.get(name)
        return report if isinstance(report, kind) else None
