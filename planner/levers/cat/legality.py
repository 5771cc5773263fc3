"""Per-cat facts that do not depend on other decisions: may this cat and each of its inputs move?

`GraphFacts` indexes the graph once (node order, buffer ids, tensors written
in place, pinned buffers); `inspect_cat` reads one `aten.cat.out` call and
says, for the output and every input, why it cannot take part (or nothing).
Legality is derived from what the graph does: which op writes the bytes,
whether anything mutates them, where they are pinned.
"""

from __future__ import annotations

import operator
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import cast

import torch
from executorch.exir import memory
from executorch.exir.delegate import executorch_call_delegate
from executorch.exir.operator.convert import get_out_args_from_opoverload, unwrap_op_overload
from executorch.exir.schema import TensorShapeDynamism
from executorch.exir.tensor import TensorSpec, num_bytes_from_shape_and_dtype
from torch.export.exported_program import ExportGraphSignature
from torch.utils._pytree import tree_flatten

from memplan.planner.compat import is_inplace_node, is_out_var_node
from memplan.planner.graph.extract import Extraction
from memplan.planner.levers.cat.decisions import CatRefusal
from memplan.problem import Problem

_CONTROL_FLOW = (
    torch.ops.higher_order.cond,
    torch.ops.higher_order.map_impl,
    torch.ops.higher_order.while_loop,
    torch.ops.higher_order.scan,
)


@dataclass
class InputFacts:
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
class CatFacts:
    node: torch.fx.Node
    index: int
    spec: TensorSpec
    bid: str
    dim: int
    nbytes: int
    reasons: list[tuple[CatRefusal, str]]
    inputs: list[InputFacts]


class GraphFacts:
    """One method's graph indexed for cat fusion: node order, buffer ids, in-place writes, pins."""

    def __init__(
        self,
        gm: torch.fx.GraphModule,
        signature: ExportGraphSignature | None,
        extraction: Extraction,
        relax_alignment: bool,
    ) -> None:
        self.signature = signature
        self.extraction = extraction
        self.problem: Problem = extraction.problem
        self.relax_alignment = relax_alignment
        self.nodes = list(gm.graph.nodes)
        self.index = {n: i for i, n in enumerate(self.nodes)}
        self.by_name = {n.name: n for n in self.nodes}
        self.bid_of = {id(spec): bid for bid, spec in extraction.spec_of.items()}
        self.written = written_in_place(self.nodes)
        self.group_parents = {g.parent for g in self.problem.groups}
        self.same_offset = {b for s in self.problem.same_offsets for b in s.buffers}

    def nbytes(self, bid: str) -> int:
        spec = self.extraction.spec_of[bid]
        return num_bytes_from_shape_and_dtype(torch.Size(spec.shape), spec.dtype)

    def pinned(self, bid: str, spec: TensorSpec) -> str:
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


def is_cat(node: torch.fx.Node) -> bool:
    """True for an `aten.cat.out` call (what `torch.cat` is after ToOutVarPass)."""
    if node.op != "call_function":
        return False
    try:
        return unwrap_op_overload(node.target) == torch.ops.aten.cat.out
    except TypeError:
        return False


def inspect_cat(facts: GraphFacts, node: torch.fx.Node) -> CatFacts:
    """The cat's own refusals (output side) and every input's, in argument order."""
    spec = node.meta["spec"]
    ndim = len(spec.shape)
    dim = int(cast(int, node.args[1] if len(node.args) > 1 else node.kwargs.get("dim", 0)))
    dim = dim + ndim if dim < 0 else dim
    reasons: list[tuple[CatRefusal, str]] = []
    bid = facts.bid_of.get(id(spec), "")
    if any(s != 1 for s in spec.shape[:dim]):
        reasons.append((CatRefusal.INNER_DIM, f"dim {dim} of shape {list(spec.shape)}"))
    if spec.shape_dynamism != TensorShapeDynamism.STATIC:
        reasons.append((CatRefusal.DYNAMIC_SHAPE, "output shape is dynamic"))
    if not _default_dim_order(spec):
        reasons.append((CatRefusal.NOT_CONTIGUOUS, f"output dim order {tuple(spec.dim_order)}"))
    if not bid:
        reasons.append((CatRefusal.OUTPUT_NOT_PLANNED, "the output has no planned buffer"))
    else:
        why = facts.pinned(bid, spec)
        if why:
            reasons.append((CatRefusal.OUTPUT_PINNED, why))
    if id(spec) in facts.written:
        reasons.append(
            (CatRefusal.OUTPUT_WRITTEN_IN_PLACE, f"{facts.written[id(spec)]} writes the output in place")
        )

    inputs: list[InputFacts] = []
    offset = 0
    seen: dict[int, str] = {}
    for arg in cast(Sequence[torch.fx.Node], node.args[0]):
        inp = _inspect_input(facts, arg, offset, spec, seen)
        inputs.append(inp)
        offset += inp.nbytes
    nbytes = num_bytes_from_shape_and_dtype(torch.Size(spec.shape), spec.dtype)
    return CatFacts(node, facts.index[node], spec, bid, dim, nbytes, reasons, inputs)


def _inspect_input(
    facts: GraphFacts, arg: torch.fx.Node, offset: int, out: TensorSpec, seen: dict[int, str]
) -> InputFacts:
    spec = arg.meta["spec"]
    nbytes = num_bytes_from_shape_and_dtype(torch.Size(spec.shape), spec.dtype)
    storage = view_base(arg)
    sspec = storage.meta["spec"]
    bid = facts.bid_of.get(id(sspec), "")

    stable = id(sspec) not in facts.written

    def result(reason: CatRefusal | None, detail: str = "") -> InputFacts:
        keeps_value = stable and reason is not CatRefusal.MUTABLE_BUFFER
        return InputFacts(arg, storage, sspec, bid, offset, nbytes, reason, detail, keeps_value)

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
    producer = producer_refusal(storage, facts.signature)
    if producer:
        return result(*producer)
    if storage is not arg and num_bytes_from_shape_and_dtype(torch.Size(sspec.shape), sspec.dtype) != nbytes:
        return result(CatRefusal.VIEW_OF_OTHER_SIZE, f"view of {storage.name}")
    if id(sspec) in facts.written:
        return result(CatRefusal.INPUT_WRITTEN_IN_PLACE, f"{facts.written[id(sspec)]} writes it in place")
    if not bid:
        return result(CatRefusal.INPUT_NOT_PLANNED, "no planned buffer (unplanned graph output?)")
    if id(sspec) in seen:
        return result(CatRefusal.DUPLICATE_INPUT, f"same bytes as input {seen[id(sspec)]}")
    seen[id(sspec)] = arg.name
    why = facts.pinned(bid, sspec)
    if why:
        return result(CatRefusal.INPUT_PINNED, why)
    member = facts.problem.buffer(bid)
    out_bid = facts.bid_of.get(id(out))
    out_pool = facts.problem.buffer(out_bid).pool if out_bid is not None else member.pool
    if member.pool != out_pool:
        return result(CatRefusal.POOL_MISMATCH, f"mem_id {member.pool} vs the output's {out_pool}")
    need = elem_size(spec) if facts.relax_alignment else member.alignment
    if offset % need:
        return result(CatRefusal.MISALIGNED, f"offset {offset} is not a multiple of {need}")
    return result(None)


def producer_refusal(node: torch.fx.Node, sig: ExportGraphSignature | None) -> tuple[CatRefusal, str] | None:
    """Why the op producing `node`'s bytes does not write them into a movable planned buffer."""
    if node.op == "get_attr":
        return CatRefusal.CONSTANT, f"{node.name} is a constant attribute"
    if node.op == "placeholder":
        target = str(node.target)
        if sig is not None and target in sig.inputs_to_buffers:
            fqn = sig.inputs_to_buffers[target]
            if fqn in sig.buffers_to_mutate.values():
                return CatRefusal.MUTABLE_BUFFER, f"mutable buffer {fqn}"
            return CatRefusal.CONSTANT, f"buffer {fqn}"
        constants = (
            (sig.inputs_to_parameters, sig.inputs_to_lifted_tensor_constants) if sig is not None else ()
        )
        if any(target in table for table in constants) or node.meta["spec"].const:
            return CatRefusal.CONSTANT, f"{node.name} is a parameter/constant"
        return CatRefusal.GRAPH_INPUT, f"{node.name} is a graph input"
    if node.op != "call_function":
        return CatRefusal.NOT_AN_OUT_OP, f"{node.name} is a {node.op} node"
    if node.target is operator.getitem:
        source = cast(torch.fx.Node, node.args[0])
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


def view_base(node: torch.fx.Node) -> torch.fx.Node:
    """The node owning a memory.view chain's bytes."""
    while node.op == "call_function" and node.target is memory.view:
        node = cast(torch.fx.Node, node.args[0])
    return node


def elem_size(spec: TensorSpec) -> int:
    return torch._utils._element_size(spec.dtype)


def _default_dim_order(spec: TensorSpec) -> bool:
    return tuple(int(d) for d in spec.dim_order) == tuple(range(len(spec.shape)))


def written_in_place(nodes: Iterable[torch.fx.Node]) -> dict[int, str]:
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
                    written[id(view_base(target).meta["spec"])] = node.name
    return written
