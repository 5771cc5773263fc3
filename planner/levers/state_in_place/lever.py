"""State in place as a lever: write-backs decided and rewritten on the graph, before it is extracted."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

from executorch.exir.tensor import TensorSpec

from memplan.plan import Plan
from memplan.planner.graph.extract import Extraction
from memplan.planner.levers.lever import Decided, Phase, Site
from memplan.planner.levers.refusals import Refusal
from memplan.planner.levers.state_in_place.analysis import StateStatus, WriteBack, analyze
from memplan.planner.levers.state_in_place.report import StateReport
from memplan.planner.levers.state_in_place.rewrite import outputs_name_the_state, rewrite


@dataclass(frozen=True)
class StateInPlaceOptions:
    """`enabled`: let the op computing a mutable buffer's new value write it where the buffer lives."""

    enabled: bool = True


@dataclass(frozen=True)
class StateInPlaceLever:
    """The write-back `copy_` removed where legal, moved up where not (see the package docstring)."""

    name: ClassVar[str] = "state in place"
    keyword: ClassVar[str] = "state_in_place"
    options_type: ClassVar[type[StateInPlaceOptions]] = StateInPlaceOptions
    phase: ClassVar[Phase] = Phase.GRAPH
    nests: ClassVar[bool] = False
    options: StateInPlaceOptions

    def decide(self, site: Site, extraction: Extraction | None) -> Decided:
        decisions = analyze(site.graph_module, site.signature, state_planned=site.state_planned)
        moves = any(d.status is not StateStatus.KEPT for d in decisions)
        return Decided(tuple(decisions), moves or _names_outputs(site, decisions))

    def rewrite(self, site: Site, decided: Decided, spec_of: dict[str, TensorSpec]) -> int:
        """The graph module's code is stale until the pass recompiles it (after planning)."""
        decisions = list(decided.decisions)
        removed = rewrite(site.graph_module, decisions)
        if _names_outputs(site, decisions):
            outputs_name_the_state(site.graph_module, decisions)
        return removed

    def report(self, decided: Decided, plan: Plan | None, rewritten: int) -> StateReport:
        return StateReport(decided.decisions, rewritten)


def _names_outputs(site: Site, decisions: Sequence[WriteBack]) -> bool:
    """True if the output node's entries of some buffer's write-back become the state's spec
    (`outputs_name_the_state`): there is one, and graph outputs are planned."""
    return site.outputs_planned and any(Refusal.USER_INPUT_MUTATION not in d.reasons for d in decisions)
