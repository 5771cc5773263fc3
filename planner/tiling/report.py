"""What tiling did to one graph, in numbers a reader can check: the regions, their bands, the peak and
the MACs before and after (all counted from the graphs), or why nothing was tiled."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from memplan.planner.tiling.options import TilingOptions
from memplan.planner.tiling.semantics import Refusal


@dataclass(frozen=True)
class TiledRegion:
    """One region tiled: its first tensor (cut into bands), its last op (assembled by a cat), its ops
    in graph order, its band (or channel group) count, and the graph's estimated peak once it was tiled."""

    start: str
    end: str
    ops: tuple[str, ...]
    patches: int
    peak: int
    by_channels: bool = False  # cut into groups of channels (`channels`), not row bands

    def span(self) -> str:
        return f"{self.start} -> {self.end} ({len(self.ops)} ops)"

    def summary(self) -> str:
        return f"{self.span()} in {self.patches} {'channel groups' if self.by_channels else 'row bands'}"


@dataclass(frozen=True)
class TilingReport:
    """`tiled` False: `refusal` says why (None: the untiled peak already fits the budget).

    Peaks are live-bytes bounds of the graph before and after (planner.tiling.cost); MACs are counted
    on the untiled graph and on the tiled graph as exported.
    """

    options: TilingOptions
    base_peak: int
    base_macs: int
    tiled: bool = False
    refusal: Refusal | None = None
    regions: tuple[TiledRegion, ...] = ()  # in the order tiled: each where the peak was once the last was
    peak: int = 0  # the tiled graph's live-bytes peak (= base_peak when not tiled)
    macs: int = 0
    candidates: int = 0  # (region, band count) pairs scored
    regions_refused: Counter = field(default_factory=Counter)
    # Refused for the MAC limit: the smallest peak seen over it, and its extra MACs (a fraction).
    over_limit: tuple[int, float] | None = None
    # Float chains shared by a reduction and another reader, computed again for the reduction
    # (`shared_chains`): the tiling found is of the graph with those copies.
    recomputed_chains: int = 0

    @property
    def ops(self) -> tuple[str, ...]:
        """Every tiled region's ops."""
        return tuple(op for region in self.regions for op in region.ops)

    @property
    def patches(self) -> int:
        """Row bands over all tiled regions."""
        return sum(region.patches for region in self.regions)

    def region_text(self) -> str:
        """Each region as `start -> end (n ops)`, with its bands when there are several regions."""
        if len(self.regions) == 1:
            return self.regions[0].span()
        return self._each_region()

    def _each_region(self) -> str:
        return "; ".join(region.summary() for region in self.regions)

    @property
    def extra_macs(self) -> float:
        return (self.macs - self.base_macs) / self.base_macs if self.base_macs else 0.0

    @property
    def reduction(self) -> float:
        return self.base_peak / self.peak if self.peak else 1.0

    def summary(self) -> str:
        """One line; its peaks are the search's live-bytes estimates (`cost`), which the lowered
        program's own figures (the plan, the run table) may exceed where a partitioner keeps a float
        tensor the cost takes for the inside of an int8 kernel."""
        if not self.tiled:
            why = "the untiled peak fits the budget" if self.refusal is None else self.refusal.value
            nearest = ""
            if self.over_limit is not None:
                nearest = f" (it would reach {self.over_limit[0]:,} B at {100 * self.over_limit[1]:.1f} % extra MACs)"
            return f"not tiled ({why}); peak {self.base_peak:,} B{nearest}"
        copies = ""
        if self.recomputed_chains:
            copies = f"; {self.recomputed_chains} shared float chains computed again for their reductions"
        return (
            f"tiled {self._each_region()}{copies}: estimated peak {self.base_peak:,} -> {self.peak:,} B "
            f"({self.reduction:.2f}x), extra MACs {100 * self.extra_macs:.1f} %"
        )


def tiling_note(report: TilingReport | None) -> str:
    """What the planner's note says about tiling a method: the report's summary, or that the method
    was not tiled (`PlannerPass.tile` was not called on its exported program)."""
    if report is None:
        return "tiling: not applied (tile the exported program with PlannerPass.tile before to_edge)"
    return f"tiling: {report.summary()}"
