"""What a substitution did to each program built under it: per method, stock's bytes against memplan's.

Bytes are `sum(non_const_buffer_sizes)` of a method: memplan's are read off the emitted program; the
stock figure is that of the program ExecuTorch's own pass builds from the same graph (the pass's
byte-exact replica of its greedy, `MethodResult.stock_sizes`, or the stock program itself when it was
built, `substituted(build_stock=True)`). A method the stock pass planned says why (`note`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class MethodRow:
    """One method of a program: who planned it, the bytes per arena both ways, and what memplan did."""

    method: str
    planner: str  # "memplan" or "stock"
    stock_sizes: list[int]
    sizes: list[int]  # the emitted program's non_const_buffer_sizes
    proven: bool | None = None  # memplan's plan proven optimal (None: the stock pass planned it)
    levers: str = ""
    seconds: float = 0.0  # planning time of the pass that planned it
    note: str = ""  # why the stock pass planned it, or how memplan honoured the given algorithm
    result: Any = field(default=None, repr=False)  # memplan's MethodResult
    tiling: Any = None  # with tiling on: the method's TilingReport, or why it was lowered untiled
    tiling_input_differs: bool = False  # the search assumed the other owner of the graph's input
    tiling_searched_again: bool = False  # ... and was run again once the script's pass said it

    def tiling_columns(self) -> dict[str, Any]:
        """The run table's tiling columns: the region, its bands, the extra MACs (a fraction)."""
        report = self.tiling
        if report is None or isinstance(report, str) or not report.tiled:
            why = report if isinstance(report, str) or report is None else report.summary()
            return {"region": why or "not tiled", "bands": 0, "extra_macs": 0.0}
        region = report.region_text()
        held = "in the arena" if report.options.input_in_arena else "by the caller"
        if self.tiling_searched_again:
            region += (
                f"; searched again and lowered again once the script's pass said the input is held {held}"
            )
        elif self.tiling_input_differs:
            region += (
                f"; searched with the input held {held}, which this script's pass does not do:"
                f" --tiling-input {'caller' if report.options.input_in_arena else 'arena'} searches as it plans"
            )
        return {"region": region, "bands": report.patches, "extra_macs": report.extra_macs}

    @property
    def stock_bytes(self) -> int:
        return sum(self.stock_sizes)

    @property
    def memplan_bytes(self) -> int:
        return sum(self.sizes)

    @property
    def saving(self) -> float | None:
        """The fraction of stock's bytes memplan saves (0.25 = a quarter smaller)."""
        return None if not self.stock_bytes else 1 - self.memplan_bytes / self.stock_bytes

    @property
    def not_proven_because(self) -> str:
        """Why memplan's plan is not proven optimal, in one line ("" when it is, or stock planned it)."""
        return "" if self.result is None else self.result.not_proven_because


@dataclass
class ProgramResult:
    """One `to_executorch` call under the substitution: its methods and the programs built."""

    index: int  # 1 for the first program built under the substitution
    methods: list[MethodRow]
    seconds: float = 0.0  # the whole `to_executorch` call
    program: Any = field(default=None, repr=False)  # the ExecutorchProgramManager returned
    stock_program: Any = field(default=None, repr=False)  # the stock build (`build_stock=True`)
    attempts: int = 1  # to_executorch runs it took (more after a fallback)

    @property
    def name(self) -> str:
        return f"program {self.index} ({', '.join(m.method for m in self.methods)})"

    def method(self, name: str) -> MethodRow:
        for row in self.methods:
            if row.method == name:
                return row
        raise KeyError(f"{self.name} has no method {name!r}")

    @property
    def tiled(self) -> bool:
        """True when tiling was on for this program (its rows then have the tiling columns)."""
        return any(m.tiling is not None for m in self.methods)

    @property
    def fell_back(self) -> list[MethodRow]:
        return [m for m in self.methods if m.planner != "memplan"]

    def program_sizes(self, stock: bool) -> list[int]:
        """Per arena, the most any method needs: what a runtime giving the methods one set of arenas
        allocates."""
        lists = [row.stock_sizes if stock else row.sizes for row in self.methods]
        width = max((len(sizes) for sizes in lists), default=0)
        return [max(sizes[i] if i < len(sizes) else 0 for sizes in lists) for i in range(width)]

    def rows(self) -> list[dict[str, Any]]:
        """The table: one row per method, and a `(program)` row when there are several."""
        table = [
            {
                "method": m.method,
                "stock_bytes": m.stock_bytes,
                "memplan_bytes": m.memplan_bytes,
                "saving": m.saving,
                "proven": m.proven,
                "levers": m.levers,
                "planning_seconds": m.seconds,
                "planned_by": m.planner if not m.note else f"{m.planner}: {m.note}",
                "not_proven_because": m.not_proven_because,
                **(m.tiling_columns() if self.tiled else {}),
            }
            for m in self.methods
        ]
        if len(self.methods) > 1:
            stock, mine = sum(self.program_sizes(True)), sum(self.program_sizes(False))
            table.append(
                {
                    "method": "(program)",
                    "stock_bytes": stock,
                    "memplan_bytes": mine,
                    "saving": None if not stock else 1 - mine / stock,
                    "proven": None,
                    "levers": "",
                    "planning_seconds": sum(m.seconds for m in self.methods),
                    "planned_by": "per arena: the largest method's, summed",
                }
            )
        return table


def levers_applied(result: Any) -> str:
    """memplan's levers that changed a method, from its `MethodResult`: instructions each removed (or moved)."""
    done = []
    if result.cat_report is not None and result.cat_report.instructions_removed:
        done.append(f"cat fusion ({result.cat_report.instructions_removed} removed)")
    if result.state_report is not None and result.state_report.instructions_removed:
        done.append(f"state in place ({result.state_report.instructions_removed} copies removed)")
    if result.slice_noops is not None and result.slice_noops.nodes_removed:
        done.append(f"slice no-ops ({len(result.slice_noops.nodes_removed)} removed)")
    reorder = result.reorder_report
    if reorder is not None and reorder.instructions_moved:
        bound = f"lower bound {reorder.bound_before:,} -> {reorder.bound_after:,} B"
        done.append(f"reorder ({reorder.instructions_moved} moved, {bound})")
    in_place = result.in_place_report
    if in_place is not None and in_place.shared:
        done.append(f"elementwise in place ({len(in_place.shared)} outputs over their inputs)")
    return ", ".join(done)
