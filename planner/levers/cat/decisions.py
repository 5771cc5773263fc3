"""What cat fusion decided: the status and refusal vocabulary and the per-cat records.

These are the types the rest of memplan (the pass, reports, sweeps) reads;
nothing here looks at a graph.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum

from memplan.problem import Problem


class CatStatus(str, Enum):
    FUSED = "fused"  # every input placed inside the output; the cat instruction is removed
    ALIASED = "aliased"  # inputs already back to back in a fused region; the output is placed over them
    PARTIAL = "partial"  # some inputs placed, the others copied into their slice (opt-in)
    REFUSED = "refused"  # the cat keeps its copy


WHOLLY_PLACED = frozenset({CatStatus.FUSED, CatStatus.ALIASED})
"""Statuses whose cat copies nothing: every input sits in the output, the instruction goes."""


class CatRefusal(str, Enum):
    """Why a cat (or one of its inputs) cannot be fused."""

    INNER_DIM = "inner_dim"  # concatenated over a dim with a leading dim > 1: inputs interleave
    DTYPE_MISMATCH = "dtype_mismatch"  # an input's dtype differs from the output's (cat promotes)
    NOT_CONTIGUOUS = "not_contiguous"  # a tensor not in the default dim order
    DYNAMIC_SHAPE = "dynamic_shape"  # the real size is only known at run time
    OUTPUT_NOT_PLANNED = "output_not_planned"  # e.g. a graph output with alloc_graph_output=False
    OUTPUT_PINNED = "output_pinned"  # output at a fixed offset, in a same-offset set, or storage-aliased
    OUTPUT_WRITTEN_IN_PLACE = "output_written_in_place"  # an in-place op would also change the inputs
    GRAPH_INPUT = "graph_input"  # filled by the caller, not by an op of this method
    CONSTANT = "constant"  # parameter, buffer read here, lifted constant: lives in the program
    MUTABLE_BUFFER = "mutable_buffer"  # state that must keep its own place across calls
    DELEGATE_OUTPUT = "delegate_output"  # a backend blob may not write only its own bytes
    CONTROL_FLOW_OUTPUT = "control_flow_output"  # written by a submodule planned on its own
    NOT_AN_OUT_OP = "not_an_out_op"  # not produced by an op writing into a planned out buffer
    VIEW_OF_OTHER_SIZE = "view_of_other_size"  # a view whose base has a different byte size
    INPUT_NOT_PLANNED = "input_not_planned"  # no planned buffer (unplanned graph output, dynamic)
    INPUT_WRITTEN_IN_PLACE = "input_written_in_place"  # a later in-place op would change the output
    INPUT_PINNED = "input_pinned"  # fixed offset, storage alias, or a member of another fused cat
    DUPLICATE_INPUT = "duplicate_input"  # the same bytes cannot sit at two offsets
    MISALIGNED = "misaligned"  # the input's offset inside the output breaks the alignment
    POOL_MISMATCH = "pool_mismatch"  # input and output were assigned different mem_ids
    ALIAS_NOT_NESTED = "alias_not_nested"  # the region over the inputs straddles another placed tensor
    ARENA_GREW = "arena_grew"  # fusing it made the arena larger (the region lives longer than its parts)
    TRAFFIC_GREW = "traffic_grew"  # under a memory map, the fused plan moved more bytes through slow banks
    STATE_READ_LATER = "state_read_later"  # a piece would overwrite a state before its old value's last read


# Input reasons a PARTIAL fusion works around by cloning that input into its slice. Not
# here: a misaligned slice, and inputs a plain copy would get wrong (a promoting cat, a
# non-default dim order, a dynamic size).
COPYABLE = frozenset(
    {
        CatRefusal.GRAPH_INPUT,
        CatRefusal.CONSTANT,
        CatRefusal.MUTABLE_BUFFER,
        CatRefusal.DELEGATE_OUTPUT,
        CatRefusal.CONTROL_FLOW_OUTPUT,
        CatRefusal.NOT_AN_OUT_OP,
        CatRefusal.VIEW_OF_OTHER_SIZE,
        CatRefusal.INPUT_NOT_PLANNED,
        CatRefusal.INPUT_WRITTEN_IN_PLACE,
        CatRefusal.INPUT_PINNED,
        CatRefusal.DUPLICATE_INPUT,
        CatRefusal.POOL_MISMATCH,
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
    reason: CatRefusal | None = None
    detail: str = ""


@dataclass(frozen=True)
class CatDecision:
    cat: str  # node name of the aten.cat.out call
    output: str  # buffer id of its output ("" if not planned)
    nbytes: int
    dim: int
    status: CatStatus
    reasons: tuple[CatRefusal, ...]
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
