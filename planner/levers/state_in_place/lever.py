"""State in place as a lever: write-backs decided and rewritten on the graph, before it is extracted."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from executorch.exir.tensor import TensorSpec

from memplan.plan import Plan
from memplan.planner.graph.extract import Extraction
from memplan.planner.levers.lever import Decided, Phase, Site
from memplan.planner.levers.state_in_place.analysis import StateStatus, analyze
from memplan.planner.levers.state_in_place.report import StateReport
from memplan.planner.levers.state_in_place.rewrite import rewrite


@dataclass(frozen=True)
class StateInPlaceOptions:
    """`enabled`: let the op computing a mutable buffer's new value write it where the buffer lives."""

    enabled: bool = True


@dataclass(frozen=True)
class StateInPlaceLever:
    """The write-back `copy_` removed where legal, moved up where not (see the package docstring)."""

    name: ClassVar[str] = "state in place"
    phase: ClassVar[Phase] = Phase.GRAPH
    nests: ClassVar[bool] = False
    options: StateInPlaceOptions

    def decide(self, site: Site, extraction: Extraction | None) -> Decided:
        decisions = analyze(site.graph_module, site.signature, state_planned=site.state_planned)
        return Decided(tuple(decisions), any(d.status is not StateStatus.KEPT for d in decisions))

    def rewrite(self, site: Site, decided: Decided, spec_of: dict[str, TensorSpec]) -> int:
        """The graph module's code is stale until the pass recompiles it (after planning)."""
        return rewrite(site.graph_module, list(decided.decisions))

    def report(self, decided: Decided, plan: Plan | None, rewritten: int) -> StateReport:
        return StateReport(decided.decisions, rewritten)
