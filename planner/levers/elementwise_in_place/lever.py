"""Elementwise in place as a lever: decided and carried out on the method's graph before it is extracted."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from executorch.exir.tensor import TensorSpec

from memplan.plan import Plan
from memplan.planner.graph.extract import Extraction
from memplan.planner.levers.elementwise_in_place.analysis import analyze
from memplan.planner.levers.elementwise_in_place.report import InPlaceReport
from memplan.planner.levers.elementwise_in_place.rewrite import rewrite
from memplan.planner.levers.lever import Decided, Phase, Site


@dataclass(frozen=True)
class ElementwiseInPlaceOptions:
    """`enabled`: let an elementwise instruction write its output over an input it reads last (off
    here; `PlannerPass(elementwise_in_place=None)` switches it on with tiling, until the other levers'
    tests are reviewed against programs whose values share storage this way)."""

    enabled: bool = False


@dataclass(frozen=True)
class ElementwiseInPlaceLever:
    """Outputs written over dying inputs of elementwise instructions (see the package docstring)."""

    name: ClassVar[str] = "elementwise in place"
    keyword: ClassVar[str] = "elementwise_in_place"
    options_type: ClassVar[type[ElementwiseInPlaceOptions]] = ElementwiseInPlaceOptions
    phase: ClassVar[Phase] = Phase.GRAPH
    nests: ClassVar[bool] = False
    options: ElementwiseInPlaceOptions

    def decide(self, site: Site, extraction: Extraction | None) -> Decided:
        decisions = analyze(site.graph_module, site.signature, outputs_planned=site.outputs_planned)
        return Decided(tuple(decisions), any(d.shared for d in decisions))

    def rewrite(self, site: Site, decided: Decided, spec_of: dict[str, TensorSpec]) -> int:
        return rewrite(site.graph_module, decided.decisions)

    def report(self, decided: Decided, plan: Plan | None, rewritten: int) -> InPlaceReport:
        return InPlaceReport(decided.decisions, rewritten)
