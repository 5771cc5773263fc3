"""Reorder as a lever: decided and carried out on the method's graph before it is extracted."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

import torch
from executorch.exir.tensor import TensorSpec

from memplan.peak_bound import lower_bound
from memplan.plan import Plan
from memplan.planner.graph.extract import Extraction, control_flow_submodules
from memplan.planner.levers.lever import Decided, Phase, Site
from memplan.planner.levers.reorder.exported import exported_order
from memplan.planner.levers.reorder.legality import is_instruction, mutated_inputs
from memplan.planner.levers.reorder.report import ReorderReport
from memplan.planner.levers.reorder.sink import RULES, sunk


@dataclass(frozen=True)
class ReorderOptions:
    """`enabled`: give the graph a memory-aware order (off here; `PlannerPass(reorder=None)` switches it
    on with tiling, until the other levers' tests are reviewed against reordered programs)."""

    enabled: bool = False


@dataclass(frozen=True)
class Reordering:
    """The report, and the order the rewrite gives the graph (its nodes, all of them)."""

    report: ReorderReport
    order: tuple[torch.fx.Node, ...] = ()


@dataclass(frozen=True)
class ReorderLever:
    """Instructions sunk to their first user, kept when the lower bound does not grow (package docstring)."""

    name: ClassVar[str] = "reorder"
    keyword: ClassVar[str] = "reorder"
    options_type: ClassVar[type[ReorderOptions]] = ReorderOptions
    phase: ClassVar[Phase] = Phase.GRAPH
    nests: ClassVar[bool] = False
    options: ReorderOptions

    def decide(self, site: Site, extraction: Extraction | None) -> Decided:
        """The sunk orders (under each of `RULES`) and the exported order (`exported`, alone and then
        sunk) tried on the graph and measured; the one with the lowest bound (the first on a tie) kept if that bound is not above the current order's. The graph is
        left as it was."""
        graph_module = site.graph_module
        if site.extract is None or site.signature is None or control_flow_submodules(graph_module):
            return _kept(0, 0, "a graph with control flow (or no signature) keeps its order")
        before = site.extract()
        bound = lower_bound(before.problem)
        planned = {id(spec) for spec in before.spec_of.values()}
        nodes = list(graph_module.graph.nodes)
        mutated = mutated_inputs(graph_module, site.signature)
        tried = []
        seen: set[tuple[torch.fx.Node, ...]] = set()
        for looser, (order, moved) in enumerate(_candidates(nodes, planned, mutated)):
            if moved and tuple(order) not in seen:  # each extraction of a large graph costs seconds
                seen.add(tuple(order))
                arrange(graph_module.graph, order)
                tried.append((lower_bound(site.extract().problem), looser, order, moved))
                arrange(graph_module.graph, nodes)
        if not tried:
            return _kept(bound, bound, "no instruction can run closer to its first user")
        after, _, order, moved = min(tried, key=lambda t: (t[0], t[1]))
        if after > bound:
            return _kept(bound, after, f"the lower bound would grow {bound:,} -> {after:,} B")
        return Decided(Reordering(ReorderReport(tuple(moved), bound, after, True), tuple(order)), True)

    def rewrite(self, site: Site, decided: Decided, spec_of: dict[str, TensorSpec]) -> int:
        """The graph in the decided order; the instructions moved."""
        reordering: Reordering = decided.decisions
        if not decided.changes:
            return 0
        arrange(site.graph_module.graph, reordering.order)
        return reordering.report.instructions_moved

    def report(self, decided: Decided, plan: Plan | None, rewritten: int) -> ReorderReport:
        return decided.decisions.report


def _candidates(
    nodes: list[torch.fx.Node], planned: set[int], mutated: set[torch.fx.Node]
) -> list[tuple[list[torch.fx.Node], list[str]]]:
    """Each order to try and the instructions it moves, strictest first."""
    orders = [sunk(nodes, planned, mutated, rule) for rule in RULES]
    exported = exported_order(nodes, mutated)
    if exported is not None:
        orders.append((exported, _moved(nodes, exported)))
        then_sunk, _ = sunk(exported, planned, mutated, RULES[0])
        orders.append((then_sunk, _moved(nodes, then_sunk)))
    return orders


def _moved(before: Sequence[torch.fx.Node], after: Sequence[torch.fx.Node]) -> list[str]:
    """The instructions that run at another place among the instructions in `after` than in `before`."""
    was = [n for n in before if is_instruction(n)]
    now = [n for n in after if is_instruction(n)]
    return [n.name for n, m in zip(now, was, strict=True) if n is not m]


def arrange(graph: torch.fx.Graph, order: Sequence[torch.fx.Node]) -> None:
    """`graph`'s nodes put in `order` (every node of it); fx's lint checks each is defined before use."""
    for earlier, later in zip(order, order[1:]):
        if earlier.next is not later:
            earlier.append(later)
    graph.lint()


def _kept(before: int, after: int, why: str) -> Decided:
    return Decided(Reordering(ReorderReport((), before, after, False, why)), False)
