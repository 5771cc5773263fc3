"""What cat fusion decided: the status and refusal vocabulary and the per-cat records.

These are the types the rest of memplan (the pass, reports, sweeps) reads;
nothing here looks at a graph.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum

from memplan.planner.levers.refusals import Refusal
from memplan.problem import Problem


class CatStatus(str, Enum):
    FUSED = "fused"  # every input placed inside the output; the cat instruction is removed
    ALIASED = "aliased"  # inputs already back to back in a fused region; the output is placed over them
    PARTIAL = "partial"  # some inputs placed, the others copied into their slice (opt-in)
    REFUSED = "refused"  # the cat keeps its copy


WHOLLY_PLACED = frozenset({CatStatus.FUSED, CatStatus.ALIASED})
"""Statuses whose cat copies nothing: every input sits in the output, the instruction goes."""


# Input reasons a PARTIAL fusion works around by cloning that input into its slice. Not
# here: a misaligned slice, and inputs a plain copy would get wrong (a promoting cat, a
# non-default dim order, a dynamic size).
COPYABLE = frozenset(
    {
        Refusal.GRAPH_INPUT,
        Refusal.CONSTANT,
        Refusal.MUTABLE_BUFFER,
        Refusal.DELEGATE_OUTPUT,
        Refusal.CONTROL_FLOW_OUTPUT,
        Refusal.NOT_AN_OUT_OP,
        Refusal.VIEW_OF_OTHER_SIZE,
        Refusal.INPUT_NOT_PLANNED,
        Refusal.INPUT_WRITTEN_IN_PLACE,
        Refusal.INPUT_PINNED,
        Refusal.DUPLICATE_INPUT,
        Refusal.POOL_MISMATCH,
    }
)


@dataclass(frozen=True)
class CatInput:
    """One argument of a cat: where its bytes go inside the output and what became of it.

    `placement` is "member" (its buffer moved into the output), "copy"
    (cloned into its slice), "placed" (already inside the region an ALIASED
    cat sits on), "empty" (zero bytes) or "" (the cat kept its copy).
    """

    node: str
    buffer: str  # buffer id holding its bytes, "" if it has none
    offset: int
    nbytes: int
    placement: str = ""
    reason: Refusal | None = None
    detail: str = ""


@dataclass(frozen=True)
class CatDecision:
    cat: str  # node name of the aten.cat.out call
    output: str  # buffer id of its output ("" if not planned)
    nbytes: int
    dim: int
    status: CatStatus
    reasons: tuple[Refusal, ...]
    detail: str
    inputs: tuple[CatInput, ...]

    @property
    def copy_bytes_removed(self) -> int:
        """Bytes the cat no longer copies per inference."""
        if self.status in WHOLLY_PLACED:
            return sum(i.nbytes for i in self.inputs)
        if self.status is CatStatus.PARTIAL:
            return sum(i.nbytes for i in self.inputs if i.placement == "member")
        return 0


@dataclass(frozen=True)
class CopySlot:
    """A PARTIAL cat's input cloned into `region` at byte `offset`, before node `before`."""

    source: str  # node name of the value to copy
    region: str  # buffer id of the root region
    offset: int  # absolute byte offset inside the root
    before: str  # node name the clone must precede (the earliest cat reading the slot)
    enclosing: str  # buffer id of the smallest placed tensor holding the slot
    enclosing_offset: int


@dataclass
class CatFusion:
    """Every cat's decision plus the grouped problem that makes the fusions real.

    `problem` is the extraction's problem with one group per fused/aliased
    output (members at their byte offsets) and each parent's lifetime widened
    to cover its members; `problem_without` is the extraction's own problem.
    """

    decisions: list[CatDecision]
    problem: Problem
    problem_without: Problem
    parent_of: dict[str, tuple[str, int]]  # buffer id -> (enclosing buffer id, byte offset)
    copies: list[CopySlot] = field(default_factory=list)
    relax_alignment: bool = False

    @property
    def removed(self) -> list[CatDecision]:
        return [d for d in self.decisions if d.status is not CatStatus.REFUSED]

    @property
    def instructions_removed(self) -> frozenset[str]:
        """The cats that emit no instruction (a PARTIAL cat's becomes clones of the inputs that stay)."""
        return frozenset(d.cat for d in self.decisions if d.status in WHOLLY_PLACED)
