"""The levers stage: every lever the pass configured, run the same way (memplan.planner.levers.lever).

The levers and their keywords are registered in `levers.registry`. Graph
levers (reorder, state in place) decide and rewrite the method's graph before it is
extracted; problem levers (slice no-ops, then cat fusion: cats leave grouped
slices alone) each decide on the problem the previous one left and reshape
it, and rewrite the graph once the plan is in the specs, last decided first.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field

from executorch.exir.tensor import TensorSpec

from memplan.plan import Plan
from memplan.planner.graph.extract import Extraction
from memplan.planner.levers.lever import Decided, Lever, Phase, Site


def rewrite_before_extraction(
    levers: tuple[Lever, ...], site: Site, before_change: Callable[[], None]
) -> dict[str, object]:
    """Run the graph levers; `before_change` runs first when one of them is about to change the graph.
    Returns their reports by lever name."""
    reports: dict[str, object] = {}
    for lever in levers:
        if lever.phase is Phase.GRAPH:
            decided = lever.decide(site, None)
            if decided.changes:
                before_change()
            reports[lever.name] = lever.report(decided, None, lever.rewrite(site, decided, {}))
    return reports


@dataclass
class Reshaped:
    """The problem levers' decisions about one graph and the extraction they leave.

    `plan` is a lever's plan of that extraction (cat fusion plans to decide),
    None when the pass still has to plan it; `removed` the instructions their
    rewrites delete; `changes` whether any lever changes the program.
    """

    extraction: Extraction
    decided: list[tuple[Lever, Decided]] = field(default_factory=list)
    plan: Plan | None = None
    removed: frozenset[str] = frozenset()
    changes: bool = False


def reshape(levers: tuple[Lever, ...], site: Site, extraction: Extraction, shared_objects: bool) -> Reshaped:
    """Run the problem levers in order, each on the problem the previous one left."""
    done = Reshaped(extraction)
    for lever in levers:
        if lever.phase is not Phase.PROBLEM or (shared_objects and lever.nests):
            continue
        decided = lever.decide(dataclasses.replace(site, removed=done.removed), done.extraction)
        done.decided.append((lever, decided))
        if decided.problem is not None:
            done.extraction = dataclasses.replace(done.extraction, problem=decided.problem)
            done.plan = None
        done.plan = decided.plan if decided.plan is not None else done.plan
        done.removed |= decided.removes
        done.changes |= decided.changes
    return done


def rewrite_after_plan(
    reshaped: Reshaped, site: Site, spec_of: dict[str, TensorSpec], plan: Plan
) -> dict[str, object]:
    """Rewrite the graph as the problem levers decided, last decided first; their reports by name."""
    reports: dict[str, object] = {}
    for lever, decided in reversed(reshaped.decided):
        reports[lever.name] = lever.report(decided, plan, lever.rewrite(site, decided, spec_of))
    return reports


def switched_off(levers: tuple[Lever, ...]) -> list[str]:
    """The names of the levers the shared-objects form switches off."""
    return sorted(lever.name for lever in levers if lever.nests)
