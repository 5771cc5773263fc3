"""Slice no-ops as a lever: decided on the extraction, the copies removed once the plan is written."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from executorch.exir.tensor import TensorSpec

from memplan.plan import Plan
from memplan.planner.graph.extract import Extraction
from memplan.planner.levers.lever import Decided, Phase, Site
from memplan.planner.levers.slice_noop.analysis import analyze_slices
from memplan.planner.levers.slice_noop.report import SliceReport
from memplan.planner.levers.slice_noop.rewrite import remove_noop_slices


@dataclass(frozen=True)
class SliceNoopOptions:
    """`enabled`: place a slice/select/split output that is a contiguous run of its input inside it
    (on by default, docs/slice_noop.md)."""

    enabled: bool = True


@dataclass(frozen=True)
class SliceNoopLever:
    """Slice, select and split outputs placed inside their input, their copies removed."""

    name: ClassVar[str] = "slice no-ops"
    keyword: ClassVar[str] = "slice_noop"
    options_type: ClassVar[type[SliceNoopOptions]] = SliceNoopOptions
    phase: ClassVar[Phase] = Phase.PROBLEM
    nests: ClassVar[bool] = True
    options: SliceNoopOptions

    def decide(self, site: Site, extraction: Extraction | None) -> Decided:
        assert extraction is not None, "slice no-ops decide on the extraction"
        noops = analyze_slices(site.graph_module, site.signature, extraction)
        removes = frozenset(noops.nodes_removed)
        return Decided(noops, bool(removes), noops.problem, removes)

    def rewrite(self, site: Site, decided: Decided, spec_of: dict[str, TensorSpec]) -> int:
        return remove_noop_slices(site.graph_module, decided.decisions, spec_of)

    def report(self, decided: Decided, plan: Plan | None, rewritten: int) -> SliceReport:
        return SliceReport(decided.decisions, rewritten)
