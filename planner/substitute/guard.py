"""One memory-planning pass of a flow's config, planned by memplan method by method, stock where it must.

`to_executorch` calls `run(graph_module, graph_signature)` once per method and `run_multimethod()` once
at the end; the guard hands each method to memplan's `PlannerPass` (built from the stock pass's own
arguments, substitute.swap) unless the method is one the stock pass must plan. A memplan failure is
raised as `MethodFailed` naming the method, for the substitution to plan it again with the stock pass.
"""

from __future__ import annotations

import copy
import time
from dataclasses import dataclass
from typing import Any

import torch
from executorch.exir.passes.memory_planning_pass import MemoryPlanningPass
from torch.export.exported_program import ExportGraphSignature

from memplan.planner.compat import export_context
from memplan.planner.pass_ import PlannerPass
from memplan.planner.substitute.swap import as_planner


class MethodFailed(Exception):
    """memplan could not plan `method` (None: the program's cross-method step); `reason` says why."""

    def __init__(self, method: str | None, reason: str) -> None:
        super().__init__(f"{method or 'the program'}: {reason}")
        self.method = method
        self.reason = reason


@dataclass
class Planned:
    """Who planned one method and how long it took."""

    planner: str  # "memplan" or "stock"
    seconds: float
    note: str = ""


def fresh(stock: object) -> object:
    """A copy of a stock pass with nothing planned yet: a pass carries state from one export to the next
    (its shared-state registry), and each attempt must start clean."""
    if not isinstance(stock, MemoryPlanningPass):
        return stock
    twin = copy.copy(stock)
    twin.state = type(stock.state)()
    return twin


class GuardedPass:
    """`stock` planned by memplan (`options` are PlannerPass's own), except the methods in `stock_methods`.

    Passes anything ExecuTorch sets on its pass (`enable_non_cpu_memory_planning`) on to both.
    """

    def __init__(self, stock: object, options: dict[str, Any], stock_methods: dict[str, str]) -> None:
        self.stock = fresh(stock)
        swapped = as_planner(stock, options)
        self.planner: PlannerPass | None = swapped if isinstance(swapped, PlannerPass) else None
        self.refused = swapped if isinstance(swapped, str) else ""
        self.stock_methods = stock_methods  # method -> why the stock pass plans it
        self.planned: dict[str, Planned] = {}

    @property
    def shares_state(self) -> bool:
        """True when the methods of this pass keep their state in one shared arena: a fallback then
        takes every method, since stock and memplan lay shared state out differently."""
        return bool(getattr(self.stock, "share_mutable_buffers", False)) or (
            self.planner is not None and self.planner.share_mutable_buffers is not False
        )

    @property
    def enable_non_cpu_memory_planning(self) -> bool:
        return bool(getattr(self.stock, "enable_non_cpu_memory_planning", False))

    @enable_non_cpu_memory_planning.setter
    def enable_non_cpu_memory_planning(self, value: bool) -> None:
        for target in (self.stock, self.planner):
            if target is not None and hasattr(target, "enable_non_cpu_memory_planning"):
                target.enable_non_cpu_memory_planning = value

    def run(
        self, graph_module: torch.fx.GraphModule, graph_signature: ExportGraphSignature | None = None
    ) -> Any:
        context = export_context()
        method = context.method if context else "forward"
        start = time.perf_counter()
        if self.planner is None or method in self.stock_methods:
            result = _run_stock(self.stock, graph_module, graph_signature)
            note = self.refused or self.stock_methods.get(method, "")
            self.planned[method] = Planned("stock", time.perf_counter() - start, note)
            return result
        try:
            result = self.planner.run(graph_module, graph_signature)
        except Exception as e:  # any failure of memplan's: this method goes back to the stock pass
            raise MethodFailed(method, _why(e)) from e
        self.planned[method] = Planned("memplan", time.perf_counter() - start)
        return result

    def run_multimethod(self) -> None:
        planners = {p.planner for p in self.planned.values()}
        if "memplan" in planners and self.planner is not None:
            try:
                self.planner.run_multimethod()
            except Exception as e:
                raise MethodFailed(None, _why(e)) from e
        if "stock" in planners and hasattr(self.stock, "run_multimethod"):
            self.stock.run_multimethod()


def _run_stock(stock: Any, graph_module: torch.fx.GraphModule, signature: ExportGraphSignature | None) -> Any:
    """The stock pass as `to_executorch` runs it."""
    if hasattr(stock, "run"):
        return stock.run(graph_module, signature)
    return stock(graph_module)


def _why(error: BaseException) -> str:
    """One line naming the failure."""
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0]}" if text else type(error).__name__
