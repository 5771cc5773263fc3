"""Cat fusion: let producers write straight into their slice of a `torch.cat` output.

`aten.cat.out` copies every input into a fresh buffer. When the inputs sit
back to back inside the output's bytes, in the right order, the copy is a
no-op and the instruction can go. This module decides, on the graph module
memory planning receives (after `ToOutVarPass`), which cats can lose their
copy soundly, and turns each decision into planning constraints:

* FUSED: every input's buffer becomes a member of the output's
  `ContiguousGroup` at its prefix-sum byte offset. A cat whose input is itself
  a fused cat's output nests (the inner output is a member of the outer one).
* ALIASED: the inputs already sit back to back inside one fused region (the
  DenseNet pattern: `cat(x, f1)` is a prefix of `cat(x, f1, f2)`), so the
  output is placed over them.
* PARTIAL (opt-in): the inputs that can move become members; the rest are
  copied into their slice by a stock `clone.out` where the cat stood.

Every other cat is REFUSED with `CatRefusal` reasons. Nothing here touches the
graph; `planner.cat_rewrite` removes the instructions once a plan exists.
"""

from __future__ import annotations

import dataclasses
import math
import operator
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

import torch
from executorch.exir import memory
from executorch.exir.delegate import executorch_call_delegate
from executorch.exir.memory_planning import get_node_tensor_specs
from executorch.exir.operator.convert import get_out_args_from_opoverload, unwrap_op_overload
from executorch.exir.schema import TensorShapeDynamism
from executorch.exir.tensor import TensorSpec, num_bytes_from_shape_and_dtype
from torch.export.exported_program import ExportGraphSignature
from torch.utils._pytree import tree_flatten

from memplan.planner.et.compat import is_inplace_node, is_out_var_node
from memplan.planner.et.extract import Extraction
from memplan.planner.problem import ContiguousGroup, Problem

_CONTROL_FLOW = (
    torch.ops.higher_order.cond,
    torch.ops.higher_order.map_impl,
    torch.ops.higher_order.while_loop,
    torch.ops.higher_order.scan,
)


class CatStatus(str, Enum):
    FUSED = "fused"  # every input placed inside the output; the cat instruction is removed
    ALIASED = "aliased"  # inputs already back to back in a fused region; the output is placed over them
    PARTIAL = "partial"  # some inputs placed, the others copied into their slice (opt-in)
    REFUSED = "refused"  # the cat keeps its copy


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


# Input reasons a PARTIAL fusion works around by cloning that input into its slice. Not
# here: a misaligned slice, and inputs a plain copy would get wrong (a promoting cat, a
# non-default dim order, a dynamic size).
_COPYABLE = frozenset(
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
        if self.status in (CatStatus.FUSED, CatStatus.ALIASED):
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


# -- analysis ---------------------------------------------------------------------


@dataclass
class _Input:
    node: torch.fx.Node
    storage: torch.fx.Node  # the node whose spec owns the bytes (views resolved)
    spec: TensorSpec  # the storage spec
    bid: str
    offset: int
    nbytes: int
    reason: CatRefusal | None
    detail: str
    stable: bool  # nothing writes its bytes in place


@dataclass
class _Cat:
    node: torch.fx.Node
    index: int
    spec: TensorSpec
    bid: str
    dim: int
    nbytes: int
    reasons: list[tuple[CatRefusal, str]]
    inputs: list[_Input]


@dataclass
class _Interval:
    """A placed tensor's bytes inside a root region: [lo, lo + size).

    At equal bytes, lower `rank` encloses higher (cat outputs 0, inputs 1,
    clone targets 2), then lower `depth` (fused nesting level) encloses higher.
    """

    lo: int
    size: int
    rank: int
    depth: int
    key: str  # buffer id, or "copy:<n>" for a clone target


def is_cat(node: torch.fx.Node) -> bool:
    """True for an `aten.cat.out` call (what `torch.cat` is after ToOutVarPass)."""
    if node.op != "call_function":
        return False
    try:
        return unwrap_op_overload(node.target) == torch.ops.aten.cat.out
    except TypeError:
        return False


def analyze(
    graph_module: torch.fx.GraphModule,
    graph_signature: ExportGraphSignature | None,
    extraction: Extraction,
    *,
    relax_alignment: bool = False,
    partial: bool = False,
    blocked: Iterable[str] = (),
) -> CatFusion:
    """Decide every cat of the graph and build the grouped problem.

    `relax_alignment` lets inputs sit at any offset that is a multiple of
    their element size (instead of the pass alignment); `partial` allows
    PARTIAL cats. Cats named in `blocked` are refused with ARENA_GREW if
    they could otherwise go (see planner.cat_plan).
    """
    return _Analyzer(
        graph_module, graph_signature, extraction, relax_alignment, partial, frozenset(blocked)
    ).run()


class _Analyzer:
    def __init__(
        self,
        gm: torch.fx.GraphModule,
        signature: ExportGraphSignature | None,
        extraction: Extraction,
        relax_alignment: bool,
        partial: bool,
        blocked: frozenset[str],
    ) -> None:
        self.gm = gm
        self.blocked = blocked
        self.signature = signature
        self.extraction = extraction
        self.problem = extraction.problem
        self.relax_alignment = relax_alignment
        self.allow_partial = partial
        self.nodes = list(gm.graph.nodes)
        self.index = {n: i for i, n in enumerate(self.nodes)}
        self.by_name = {n.name: n for n in self.nodes}
        self.bid_of = {id(spec): bid for bid, spec in extraction.spec_of.items()}
        self.written = _written_in_place(self.nodes)
        self.group_parents = {g.parent for g in self.problem.groups}
        self.same_offset = {b for s in self.problem.same_offsets for b in s.buffers}
        # Decisions under construction.
        self.status: dict[str, CatStatus] = {}
        self.placement: dict[tuple[str, int], str] = {}  # (cat, input position) -> placement
        self.input_reason: dict[tuple[str, int], tuple[CatRefusal, str]] = {}
        self.member_of: dict[
            str, tuple[str, int]
        ] = {}  # buffer -> (cat output buffer, offset) from FUSED/PARTIAL
        self.copies: list[tuple[_Cat, _Input]] = []

    # -- driver -------------------------------------------------------------------
    def run(self) -> CatFusion:
        cats = [self._inspect(node) for node in self.nodes if is_cat(node)]
        by_priority = sorted(cats, key=lambda c: (-c.nbytes, c.index))
        for cat in by_priority:
            self._try_fuse(cat)
        roots = self._roots()
        intervals = self._intervals(roots)
        for cat in cats:
            if self.status.get(cat.node.name) is None:
                self._try_alias(cat, roots, intervals)
        for cat in cats:
            self.status.setdefault(cat.node.name, CatStatus.REFUSED)
        parent_of = _laminar_parents(intervals)
        copy_slots = self._copy_slots(cats, roots, intervals, parent_of)
        problem = self._grouped_problem(parent_of, self._copy_source_ends(copy_slots))
        return CatFusion(
            decisions=[self._decision(cat) for cat in cats],
            problem=problem,
            problem_without=self.problem,
            parent_of={k: v for k, v in parent_of.items() if not k.startswith("copy:")},
            copies=copy_slots,
            relax_alignment=self.relax_alignment,
        )

    # -- per-cat facts that do not depend on other decisions -------------------------------
    def _inspect(self, node: torch.fx.Node) -> _Cat:
        spec = node.meta["spec"]
        ndim = len(spec.shape)
        dim = node.args[1] if len(node.args) > 1 else node.kwargs.get("dim", 0)
        dim = dim + ndim if dim < 0 else dim
        reasons: list[tuple[CatRefusal, str]] = []
        bid = self.bid_of.get(id(spec), "")
        if any(s != 1 for s in spec.shape[:dim]):
            reasons.append((CatRefusal.INNER_DIM, f"dim {dim} of shape {list(spec.shape)}"))
        if spec.shape_dynamism != TensorShapeDynamism.STATIC:
            reasons.append((CatRefusal.DYNAMIC_SHAPE, "output shape is dynamic"))
        if not _default_dim_order(spec):
            reasons.append((CatRefusal.NOT_CONTIGUOUS, f"output dim order {tuple(spec.dim_order)}"))
        if not bid:
            reasons.append((CatRefusal.OUTPUT_NOT_PLANNED, "the output has no planned buffer"))
        else:
            why = self._pinned(bid, spec)
            if why:
                reasons.append((CatRefusal.OUTPUT_PINNED, why))
        if id(spec) in self.written:
            reasons.append(
                (CatRefusal.OUTPUT_WRITTEN_IN_PLACE, f"{self.written[id(spec)]} writes the output in place")
            )

        inputs: list[_Input] = []
        offset = 0
        seen: dict[int, str] = {}
        for arg in node.args[0]:
            inp = self._inspect_input(arg, offset, spec, seen)
            inputs.append(inp)
            offset += inp.nbytes
        nbytes = num_bytes_from_shape_and_dtype(torch.Size(spec.shape), spec.dtype)
        return _Cat(node, self.index[node], spec, bid, dim, nbytes, reasons, inputs)

    def _inspect_input(
        self, arg: torch.fx.Node, offset: int, out: TensorSpec, seen: dict[int, str]
    ) -> _Input:
        spec = arg.meta["spec"]
        nbytes = num_bytes_from_shape_and_dtype(torch.Size(spec.shape), spec.dtype)
        storage = _view_base(arg)
        sspec = storage.meta["spec"]
        bid = self.bid_of.get(id(sspec), "")

        stable = id(sspec) not in self.written

        def result(reason: CatRefusal | None, detail: str = "") -> _Input:
            keeps_value = stable and reason is not CatRefusal.MUTABLE_BUFFER
            return _Input(arg, storage, sspec, bid, offset, nbytes, reason, detail, keeps_value)

        if nbytes == 0:
            return result(None, "empty")
        if spec.dtype != out.dtype:
            return result(CatRefusal.DTYPE_MISMATCH, f"{spec.dtype} into {out.dtype}")
        if (
            spec.shape_dynamism != TensorShapeDynamism.STATIC
            or sspec.shape_dynamism != TensorShapeDynamism.STATIC
        ):
            return result(CatRefusal.DYNAMIC_SHAPE, "dynamic shape")
        if not _default_dim_order(spec) or not _default_dim_order(sspec):
            return result(CatRefusal.NOT_CONTIGUOUS, f"dim order {tuple(spec.dim_order)}")
        producer = self._producer_refusal(storage)
        if producer:
            return result(*producer)
        if (
            storage is not arg
            and num_bytes_from_shape_and_dtype(torch.Size(sspec.shape), sspec.dtype) != nbytes
        ):
            return result(CatRefusal.VIEW_OF_OTHER_SIZE, f"view of {storage.name}")
        if id(sspec) in self.written:
            return result(CatRefusal.INPUT_WRITTEN_IN_PLACE, f"{self.written[id(sspec)]} writes it in place")
        if not bid:
            return result(CatRefusal.INPUT_NOT_PLANNED, "no planned buffer (unplanned graph output?)")
        if id(sspec) in seen:
            return result(CatRefusal.DUPLICATE_INPUT, f"same bytes as input {seen[id(sspec)]}")
        seen[id(sspec)] = arg.name
        why = self._pinned(bid, sspec)
        if why:
            return result(CatRefusal.INPUT_PINNED, why)
        member = self.problem.buffer(bid)
        out_bid = self.bid_of.get(id(out))
        out_pool = self.problem.buffer(out_bid).pool if out_bid is not None else member.pool
        if member.pool != out_pool:
            return result(CatRefusal.POOL_MISMATCH, f"mem_id {member.pool} vs the output's {out_pool}")
        need = _elem_size(spec) if self.relax_alignment else member.alignment
        if offset % need:
            return result(CatRefusal.MISALIGNED, f"offset {offset} is not a multiple of {need}")
        return result(None)

    def _producer_refusal(self, node: torch.fx.Node) -> tuple[CatRefusal, str] | None:
        """Why the op producing `node`'s bytes does not write them into a movable planned buffer."""
        if node.op == "get_attr":
            return CatRefusal.CONSTANT, f"{node.name} is a constant attribute"
        if node.op == "placeholder":
            sig = self.signature
            if sig is not None and node.target in sig.inputs_to_buffers:
                fqn = sig.inputs_to_buffers[node.target]
                if fqn in sig.buffers_to_mutate.values():
                    return CatRefusal.MUTABLE_BUFFER, f"mutable buffer {fqn}"
                return CatRefusal.CONSTANT, f"buffer {fqn}"
            constants = (
                (sig.inputs_to_parameters, sig.inputs_to_lifted_tensor_constants) if sig is not None else ()
            )
            if any(node.target in table for table in constants) or node.meta["spec"].const:
                return CatRefusal.CONSTANT, f"{node.name} is a parameter/constant"
            return CatRefusal.GRAPH_INPUT, f"{node.name} is a graph input"
        if node.op != "call_function":
            return CatRefusal.NOT_AN_OUT_OP, f"{node.name} is a {node.op} node"
        if node.target is operator.getitem:
            source = node.args[0]
            if source.target is executorch_call_delegate:
                return CatRefusal.DELEGATE_OUTPUT, f"{node.name} comes from delegate {source.name}"
            if source.target in _CONTROL_FLOW:
                return CatRefusal.CONTROL_FLOW_OUTPUT, f"{node.name} comes from {source.name}"
            if is_out_var_node(source) and not is_inplace_node(source):
                return None
            return CatRefusal.NOT_AN_OUT_OP, f"{node.name} comes from {source.name}"
        if node.target is executorch_call_delegate:
            return CatRefusal.DELEGATE_OUTPUT, f"{node.name} is a delegate call"
        if node.target in _CONTROL_FLOW:
            return CatRefusal.CONTROL_FLOW_OUTPUT, f"{node.name} is a control-flow op"
        if is_inplace_node(node):
            return CatRefusal.INPUT_WRITTEN_IN_PLACE, f"{node.name} is an in-place op's result"
        if is_out_var_node(node):
            return None
        return CatRefusal.NOT_AN_OUT_OP, f"{node.name} ({node.target}) does not write an out buffer"

    def _pinned(self, bid: str, spec: TensorSpec) -> str:
        """Why this buffer cannot be moved into (or made) a region, or ""."""
        buf = self.problem.buffer(bid)
        if buf.offset is not None:
            return f"{bid} has a fixed offset {buf.offset}"
        if spec.storage_base is not None or self.problem.parent_of(bid) is not None:
            return f"{bid} lives inside another tensor's storage"
        if bid in self.group_parents:
            return f"other tensors live inside {bid}'s storage"
        if bid in self.same_offset:
            return f"{bid} must share its offset with other buffers"
        return ""

    # -- phase 1: fuse, biggest copies first ------------------------------------------------
    def _try_fuse(self, cat: _Cat) -> None:
        if cat.reasons:
            return
        ok: list[_Input] = []
        bad: list[tuple[int, _Input, tuple[CatRefusal, str]]] = []
        for pos, inp in enumerate(cat.inputs):
            if inp.detail == "empty":
                continue
            why = (inp.reason, inp.detail) if inp.reason else None
            if why is None and inp.bid in self.member_of:
                why = (
                    CatRefusal.INPUT_PINNED,
                    f"{inp.bid} already sits in the output of {self.member_of[inp.bid][0]}",
                )
            if why is None:
                ok.append(inp)
            else:
                bad.append((pos, inp, why))
        for pos, _, why in bad:
            self.input_reason[(cat.node.name, pos)] = why
        if not ok:
            return
        if bad and self.allow_partial:
            # A clone target is a tensor too: its slice must be aligned like a member's.
            out_align = self.problem.buffer(cat.bid).alignment
            for n, (pos, inp, why) in enumerate(bad):
                need = _elem_size(inp.spec) if self.relax_alignment else out_align
                if why[0] in _COPYABLE and inp.offset % need:
                    bad[n] = (
                        pos,
                        inp,
                        (CatRefusal.MISALIGNED, f"offset {inp.offset} is not a multiple of {need}"),
                    )
                    self.input_reason[(cat.node.name, pos)] = bad[n][2]
        if bad and not (self.allow_partial and all(why[0] in _COPYABLE for _, _, why in bad)):
            return
        if self._blocked(cat):
            return
        self.status[cat.node.name] = CatStatus.PARTIAL if bad else CatStatus.FUSED
        placed = {id(inp) for inp in ok}
        for pos, inp in enumerate(cat.inputs):
            if id(inp) in placed:
                self.member_of[inp.bid] = (cat.bid, inp.offset)
                self.placement[(cat.node.name, pos)] = "member"
        for pos, inp, _ in bad:
            self.placement[(cat.node.name, pos)] = "copy"
            self.copies.append((cat, inp))

    def _blocked(self, cat: _Cat) -> bool:
        """True (and the cat refused with ARENA_GREW) if the cat could go but fusing it grew the arena."""
        if cat.node.name not in self.blocked:
            return False
        cat.reasons.append((CatRefusal.ARENA_GREW, "removable, but fusing it made the arena larger"))
        return True

    def _roots(self) -> dict[str, tuple[str, int]]:
        """Buffer -> (root region, absolute offset) for every output and member placed so far."""
        placed = set(self.member_of) | {parent for parent, _ in self.member_of.values()}
        roots = {}
        for bid in placed:
            node, rel = bid, 0
            while node in self.member_of:
                node, step = self.member_of[node]
                rel += step
            roots[bid] = (node, rel)
        return roots

    def _intervals(self, roots: dict[str, tuple[str, int]]) -> dict[str, list[_Interval]]:
        """Per root region, the byte ranges of everything placed in it (copies included)."""
        cat_index = {
            self.bid_of[id(n.meta["spec"])]: self.index[n]
            for n in self.nodes
            if is_cat(n) and id(n.meta["spec"]) in self.bid_of
        }
        intervals: dict[str, list[_Interval]] = defaultdict(list)
        for bid, (root, rel) in roots.items():
            depth, node = 0, bid
            while node in self.member_of:
                node, depth = self.member_of[node][0], depth + 1
            rank = 0 if bid in cat_index else 1
            intervals[root].append(_Interval(rel, self._nbytes(bid), rank, depth, bid))
        for n, (cat, inp) in enumerate(self.copies):
            root, rel = roots[cat.bid]
            intervals[root].append(_Interval(rel + inp.offset, inp.nbytes, 2, 0, f"copy:{n}"))
        return intervals

    def _nbytes(self, bid: str) -> int:
        spec = self.extraction.spec_of[bid]
        return num_bytes_from_shape_and_dtype(torch.Size(spec.shape), spec.dtype)

    # -- phase 2: cats whose inputs already sit back to back ---------------------------------------
    def _try_alias(
        self, cat: _Cat, roots: dict[str, tuple[str, int]], intervals: dict[str, list[_Interval]]
    ) -> None:
        if cat.reasons or cat.bid in roots:
            return
        inputs = [inp for inp in cat.inputs if inp.detail != "empty"]
        if not inputs:
            return
        where = self._value_locations(roots)
        first = inputs[0]
        crossing = False
        for root, lo in where.get(_value_key(first), []):
            start = lo - first.offset
            if not all((root, start + inp.offset) in where.get(_value_key(inp), []) for inp in inputs):
                continue
            out = self.problem.buffer(cat.bid)
            if out.pool != self.problem.buffer(root).pool:
                continue
            if start % out.alignment and not self.relax_alignment:
                continue
            if not _nests(intervals[root], start, cat.nbytes):
                crossing = True
                continue
            if self._blocked(cat):
                return
            intervals[root].append(_Interval(start, cat.nbytes, 0, 0, cat.bid))
            roots[cat.bid] = (root, start)
            self.status[cat.node.name] = CatStatus.ALIASED
            for pos, inp in enumerate(cat.inputs):
                self.placement[(cat.node.name, pos)] = "empty" if inp.detail == "empty" else "placed"
            return
        if crossing:
            cat.reasons.append(
                (
                    CatRefusal.ALIAS_NOT_NESTED,
                    "its inputs sit back to back, but that range straddles a placed tensor",
                )
            )

    def _value_locations(self, roots: dict[str, tuple[str, int]]) -> dict[Any, list[tuple[str, int]]]:
        """Value -> every (root, absolute offset) holding its bytes: its own buffer or a clone.

        A clone of a value that something writes in place is left out: moving
        the clone earlier (to the ALIASED cat) could capture an older value.
        """
        where: dict[Any, list[tuple[str, int]]] = defaultdict(list)
        for bid, loc in roots.items():
            where[("buffer", bid)].append(loc)
        for cat, inp in self.copies:
            if inp.stable:
                root, rel = roots[cat.bid]
                where[_value_key(inp)].append((root, rel + inp.offset))
        return where

    # -- results ---------------------------------------------------------------------
    def _copy_slots(
        self,
        cats: list[_Cat],
        roots: dict[str, tuple[str, int]],
        intervals: dict[str, list[_Interval]],
        parent_of: dict[str, tuple[str, int]],
    ) -> list[CopySlot]:
        """Where each clone goes: before the earliest cat reading its slot (its own, or an ALIASED one)."""
        slots = []
        for n, (cat, inp) in enumerate(self.copies):
            root, rel = roots[cat.bid]
            lo = rel + inp.offset
            first = cat.index
            for other in cats:
                if self.status[other.node.name] is CatStatus.ALIASED and roots[other.bid][0] == root:
                    o_lo = roots[other.bid][1]
                    if o_lo <= lo and lo + inp.nbytes <= o_lo + other.nbytes:
                        first = min(first, other.index)
            enclosing, enc_off = parent_of[f"copy:{n}"]
            slots.append(CopySlot(inp.node.name, root, lo, self.nodes[first].name, enclosing, enc_off))
        return slots

    def _copy_source_ends(self, copies: list[CopySlot]) -> dict[str, int]:
        """New (half-open) lifetime ends of buffers whose cat readers are now clones.

        A removed cat no longer reads its inputs, so an input that PARTIAL
        fusion copies is needed only until its last clone or other reader,
        not until the last cat it fed. Tensors written in place and mutable
        state keep their lifetimes.
        """
        removed = {name for name, st in self.status.items() if st is not CatStatus.REFUSED}
        ends: dict[int, int] = {}
        for slot, (_, inp) in zip(copies, self.copies):
            if inp.bid and inp.stable:
                ends[id(inp.spec)] = max(ends.get(id(inp.spec), -1), self.index[self._node(slot.before)])
        for node in self.nodes:
            if node.name in removed:
                continue
            for ref in _referenced_nodes(node):
                for spec in get_node_tensor_specs(ref):
                    if id(spec) in ends:
                        ends[id(spec)] = max(ends[id(spec)], self.index[node])
        return {self.bid_of[sid]: end + 1 for sid, end in ends.items()}

    def _node(self, name: str) -> torch.fx.Node:
        return self.by_name[name]

    def _grouped_problem(self, parent_of: dict[str, tuple[str, int]], shrink: dict[str, int]) -> Problem:
        """The extraction's problem plus one group per placed output.

        Member sizes are clipped to their parent top-down (padding past the
        parent's end holds nothing), parent lifetimes widened bottom-up.

        `shrink` gives buffers whose lifetime now ends earlier (copy sources).
        """
        buffers = {b.id: b for b in self.problem.buffers}
        for bid, end in shrink.items():
            if end < buffers[bid].end:
                buffers[bid] = dataclasses.replace(buffers[bid], end=max(end, buffers[bid].start + 1))
        children: dict[str, list[tuple[str, int]]] = defaultdict(list)
        for child, (parent, rel) in parent_of.items():
            if not child.startswith("copy:"):
                children[parent].append((child, rel))

        def depth(bid: str) -> int:
            d = 0
            while bid in parent_of:
                bid = parent_of[bid][0]
                d += 1
            return d

        def absolute(bid: str) -> int:
            rel = 0
            while bid in parent_of:
                bid, step = parent_of[bid]
                rel += step
            return rel

        placed = sorted((c for c in parent_of if not c.startswith("copy:")), key=depth)
        for child in placed:  # outer first: a member's padding may not reach past its parent's
            parent, rel = parent_of[child]
            member, outer = buffers[child], buffers[parent]
            changes: dict[str, int] = {"size": min(member.size, outer.size - rel)}
            if rel % member.alignment or absolute(child) % member.alignment:
                changes["alignment"] = math.gcd(member.alignment, rel, absolute(child))
            buffers[child] = dataclasses.replace(member, **changes)
        for child in reversed(placed):  # inner first: each parent lives while any member does
            parent, _ = parent_of[child]
            member, outer = buffers[child], buffers[parent]
            start, end = min(outer.start, member.start), max(outer.end, member.end)
            buffers[parent] = dataclasses.replace(outer, start=start, end=end)
        groups = list(self.problem.groups) + [
            ContiguousGroup(parent, tuple(sorted(members, key=lambda m: (m[1], m[0]))))
            for parent, members in children.items()
        ]
        order = [b.id for b in self.problem.buffers]
        return dataclasses.replace(
            self.problem, buffers=tuple(buffers[b] for b in order), groups=tuple(groups)
        )

    def _decision(self, cat: _Cat) -> CatDecision:
        name = cat.node.name
        status = self.status[name]
        inputs = []
        for pos, inp in enumerate(cat.inputs):
            reason, detail = self.input_reason.get((name, pos), (inp.reason, inp.detail))
            placement = self.placement.get((name, pos), "empty" if inp.detail == "empty" else "")
            if status in (CatStatus.FUSED, CatStatus.ALIASED) or placement == "member":
                reason, detail = None, ""
            inputs.append(CatInput(inp.node.name, inp.bid, inp.offset, inp.nbytes, placement, reason, detail))
        reasons = [] if status in (CatStatus.FUSED, CatStatus.ALIASED) else [r for r, _ in cat.reasons]
        reasons = tuple(dict.fromkeys(reasons + [i.reason for i in inputs if i.reason is not None]))
        details = [] if status in (CatStatus.FUSED, CatStatus.ALIASED) else [d for _, d in cat.reasons]
        details += [f"{i.node}: {i.detail}" for i in inputs if i.reason is not None]
        return CatDecision(
            name, cat.bid, cat.nbytes, cat.dim, status, reasons, "; ".join(details), tuple(inputs)
        )


# -- helpers ---------------------------------------------------------------------


def _value_key(inp: _Input) -> Any:
    return ("buffer", inp.bid) if inp.bid else ("node", inp.storage.name)


def _view_base(node: torch.fx.Node) -> torch.fx.Node:
    """The node owning a memory.view chain's bytes."""
    while node.op == "call_function" and node.target is memory.view:
        node = node.args[0]
    return node


def _default_dim_order(spec: TensorSpec) -> bool:
    return tuple(int(d) for d in spec.dim_order) == tuple(range(len(spec.shape)))


def _elem_size(spec: TensorSpec) -> int:
    return torch._utils._element_size(spec.dtype)


def _written_in_place(nodes: Iterable[torch.fx.Node]) -> dict[int, str]:
    """id(spec) -> name of a node that mutates that tensor other than through an out= argument."""
    written: dict[int, str] = {}
    for node in nodes:
        if node.op != "call_function":
            continue
        try:
            op = unwrap_op_overload(node.target)
        except TypeError:
            continue
        out_args = set(get_out_args_from_opoverload(op)) if is_out_var_node(node) else set()
        for i, arg in enumerate(op._schema.arguments):
            if arg.alias_info is None or not arg.alias_info.is_write or arg.name in out_args:
                continue
            value = node.args[i] if i < len(node.args) and not arg.kwarg_only else node.kwargs.get(arg.name)
            for target in tree_flatten(value)[0]:
                if isinstance(target, torch.fx.Node) and isinstance(target.meta.get("spec"), TensorSpec):
                    written[id(_view_base(target).meta["spec"])] = node.name
    return written


def _nests(intervals: list[_Interval], lo: int, size: int) -> bool:
    """True if [lo, lo + size) is, against every placed range, nested or disjoint."""
    hi = lo + size
    for it in intervals:
        a, b = it.lo, it.lo + it.size
        disjoint = b <= lo or hi <= a
        if not (disjoint or (a <= lo and hi <= b) or (lo <= a and b <= hi)):
            return False
    return True


def _laminar_parents(intervals: dict[str, list[_Interval]]) -> dict[str, tuple[str, int]]:
    """Each placed range's smallest enclosing range in its root: key -> (parent key, relative offset).

    Ranges are nested or disjoint (fusion builds a tree, aliases are checked
    by `_nests`), so sorting by (start, -size, rank) and keeping a stack of
    open ranges finds each one's parent. Copy targets never enclose anything.
    """
    parents: dict[str, tuple[str, int]] = {}
    for root, items in intervals.items():
        stack: list[_Interval] = []
        for it in sorted(items, key=lambda i: (i.lo, -i.size, i.key != root, i.rank, i.depth, i.key)):
            while stack and stack[-1].lo + stack[-1].size < it.lo + it.size:
                stack.pop()
            while stack and stack[-1].key.startswith("copy:"):
                stack.pop()
            if it.key != root:
                if not stack:
                    raise AssertionError(f"cat fusion: {it.key} is not inside its region {root}")
                parents[it.key] = (stack[-1].key, it.lo - stack[-1].lo)
            stack.append(it)
    return parents


def _referenced_nodes(node: torch.fx.Node) -> list[torch.fx.Node]:
    """The node and every node among its arguments: what ExecuTorch counts as a use for lifetimes."""
    found = [node]
    for value in tree_flatten((node.args, node.kwargs))[0]:
        if isinstance(value, torch.fx.Node):
            found.append(value)
    return found
