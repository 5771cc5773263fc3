"""What slice no-ops decided: the per-op records and the problem that makes them real.

The mirror of cat fusion (planner.levers.cat): a slice, select or split output that
is one contiguous run of its input's bytes is placed inside the input and the
copy disappears. Nothing here looks at a graph.
"""

from __future__ import annotations

from dataclasses import dataclass

from memplan.planner.levers.refusals import Refusal
from memplan.problem import Problem


@dataclass(frozen=True)
class SliceDecision:
    """One output of a slice/select/split op: placed inside its input (no-op) or refused, and why."""

    node: str  # the op's node name
    op: str  # "slice", "select" or "split"
    output: str  # buffer id of the output ("" if not planned)
    input: str  # buffer id holding the input's bytes ("" if none)
    offset: int  # byte offset of the output inside the input
    nbytes: int
    removed: bool
    reasons: tuple[Refusal, ...] = ()
    detail: str = ""


@dataclass
class SliceNoops:
    """Every decision plus the problem that makes the no-ops real (outputs as members of their inputs,
    each input's lifetime widened to its members'); `problem_without` is the problem given."""

    decisions: list[SliceDecision]
    problem: Problem
    problem_without: Problem

    @property
    def removed(self) -> list[SliceDecision]:
        return [d for d in self.decisions if d.removed]

    @property
    def nodes_removed(self) -> list[str]:
        """Ops every output of which is a no-op: their instruction goes."""
        by_node: dict[str, list[bool]] = {}
        for d in self.decisions:
            by_node.setdefault(d.node, []).append(d.removed)
        return [node for node, done in by_node.items() if all(done)]

    @property
    def copy_bytes_removed(self) -> int:
        gone = set(self.nodes_removed)
        return sum(d.nbytes for d in self.decisions if d.node in gone)
