"""What "better" means between two valid plans of one graph.

Under a memory map, less traffic cost as the emitted program counts it
(planner.memory.instruction_traffic: every instruction's tensor arguments at
their bytes, by bank); then fewer bytes. memplan's plans are counted without
the instructions their levers delete (fused cats, no-op slices); a reference
plan keeps every instruction (`removed` empty).

A lever that deletes instructions lowers the traffic of the banks they
touched, so a plan can cost no more than the reference's and still serve a
smaller share of the program's traffic from the fast banks (no-op slices of
fast-bank tensors: the same slow bytes, fewer fast ones). `per_byte` is
what the share says: traffic cost per byte moved (with two banks, the slow
bank's share).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction

import torch

from memplan.bank_placement import traffic, traffic_cost
from memplan.plan import Plan
from memplan.planner.graph.extract import Extraction
from memplan.planner.memory.instruction_traffic import argument_bytes
from memplan.problem import Problem


@dataclass
class Costs:
    """The costs of plans of one graph; the bytes each buffer moves are read off the graph once per
    set of deleted instructions."""

    plain: Extraction  # the extraction before any lever reshaped it
    nodes: list[torch.fx.Node]
    _moved: dict[frozenset[str], dict[str, int]] = field(default_factory=dict)

    def moved(self, removed: frozenset[str]) -> dict[str, int]:
        """Per buffer id: the bytes the emitted instructions (all but `removed`) move through it."""
        if removed not in self._moved:
            kept = [n for n in self.nodes if n.name not in removed]
            self._moved[removed] = argument_bytes(self.plain.spec_of, kept)
        return self._moved[removed]

    def traffic(self, problem: Problem, plan: Plan, removed: frozenset[str]) -> dict[int, int]:
        """Bytes per arena of every instruction's tensor arguments in the program this plan emits."""
        return traffic(problem, plan.pools, self.moved(removed))

    def of(self, problem: Problem, plan: Plan, removed: frozenset[str]) -> tuple[float, int]:
        """(bank traffic cost, bytes): smaller is better."""
        if not problem.banks:
            return 0.0, plan.arena_size
        return traffic_cost(problem, plan.pools, self.moved(removed)), plan.arena_size

    def per_byte(self, problem: Problem, plan: Plan, removed: frozenset[str]) -> Fraction:
        """Traffic cost per byte the emitted program moves (0 without banks or traffic); exact."""
        total = sum(self.traffic(problem, plan, removed).values())
        if not problem.banks or not total:
            return Fraction(0)
        return Fraction(traffic_cost(problem, plan.pools, self.moved(removed))) / total


def shown(cost: tuple[float, int]) -> str:
    """A cost as the pass's notes say it."""
    traffic_cost, size = cost
    return f"{size:,} B" + (f", bank traffic cost {traffic_cost:,.0f}" if traffic_cost else "")
