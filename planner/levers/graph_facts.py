"""What every lever reads off one method's graph: the facts no single lever owns.

`GraphFacts` indexes the graph once (node order, buffer ids, tensors written
in place, pinned buffers); `producer_refusal` says why the op producing a
tensor's bytes does not write them into a movable planned buffer (in the one
refusal vocabulary, `levers.refusals`); `view_base` resolves a `memory.view`
chain to the node owning the bytes. Cat fusion and slice no-ops both decide
from these.
"""

from __future__ import annotations

import operator
from collections.abc import Iterable
from typing import cast

import torch
from executorch.exir import memory
from executorch.exir.delegate import executorch_call_delegate
from executorch.exir.operator.convert import get_out_args_from_opoverload, unwrap_op_overload
from executorch.exir.tensor import TensorSpec, num_bytes_from_shape_and_dtype
from torch.export.exported_program import ExportGraphSignature
from torch.utils._pytree import tree_flatten

from memplan.planner.compat import is_inplace_node, is_out_var_node
from memplan.planner.graph.extract import Extraction
from memplan.planner.levers.refusals import Refusal
from memplan.problem import Problem

_CONTROL_FLOW = (
    torch.ops.higher_order.cond,
    torch.ops.higher_order.map_impl,
    torch.ops.higher_order.while_loop,
    torch.ops.higher_order.scan,
)


class GraphFacts:
    """One method's graph indexed for the levers: node order, buffer ids, in-place writes, pins."""

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


def producer_refusal(node: torch.fx.Node, sig: ExportGraphSignature | None) -> tuple[Refusal, str] | None:
    """Why the op producing `node`'s bytes does not write them into a movable planned buffer."""
    if node.op == "get_attr":
        return Refusal.CONSTANT, f"{node.name} is a constant attribute"
    if node.op == "placeholder":
        target = str(node.target)
        if sig is not None and target in sig.inputs_to_buffers:
            fqn = sig.inputs_to_buffers[target]
            if fqn in sig.buffers_to_mutate.values():
                return Refusal.MUTABLE_BUFFER, f"mutable buffer {fqn}"
            return Refusal.CONSTANT, f"buffer {fqn}"
        constants = (
            (sig.inputs_to_parameters, sig.inputs_to_lifted_tensor_constants) if sig is not None else ()
        )
        if any(target in table for table in constants) or node.meta["spec"].const:
            return Refusal.CONSTANT, f"{node.name} is a parameter/constant"
        return Refusal.GRAPH_INPUT, f"{node.name} is a graph input"
    if node.op != "call_function":
        return Refusal.NOT_AN_OUT_OP, f"{node.name} is a {node.op} node"
    if node.target is operator.getitem:
        source = cast(torch.fx.Node, node.args[0])
        if source.target is executorch_call_delegate:
            return Refusal.DELEGATE_OUTPUT, f"{node.name} comes from delegate {source.name}"
        if source.target in _CONTROL_FLOW:
            return Refusal.CONTROL_FLOW_OUTPUT, f"{node.name} comes from {source.name}"
        if is_out_var_node(source) and not is_inplace_node(source):
            return None
        return Refusal.NOT_AN_OUT_OP, f"{node.name} comes from {source.name}"
    if node.target is executorch_call_delegate:
        return Refusal.DELEGATE_OUTPUT, f"{node.name} is a delegate call"
    if node.target in _CONTROL_FLOW:
        return Refusal.CONTROL_FLOW_OUTPUT, f"{node.name} is a control-flow op"
    if is_inplace_node(node):
        return Refusal.INPUT_WRITTEN_IN_PLACE, f"{node.name} is an in-place op's result"
    if is_out_var_node(node):
        return None
    return Refusal.NOT_AN_OUT_OP, f"{node.name} ({node.target}) does not write an out buffer"


def view_base(node: torch.fx.Node) -> torch.fx.Node:
    """The node owning a memory.view chain's bytes."""
    while node.op == "call_function" and node.target is memory.view:
        node = cast(torch.fx.Node, node.args[0])
    return node


def elem_size(spec: TensorSpec) -> int:
    return torch._utils._element_size(spec.dtype)


def default_dim_order(spec: TensorSpec) -> bool:
    return tuple(int(d) for d in spec.dim_order) == tuple(range(len(spec.shape)))


def written_in_place(nodes: Iterable[torch.fx.Node]) -> dict[int, str]:
    """id(spec) -> name of a node that mutates that tensor other than through its own out= argument:
    an in-place op, or a second instruction writing into the same TensorSpec through its out= or as a
    delegate's output (`levers.elementwise_in_place` gives an op's output its dying input's spec)."""
    written: dict[int, str] = {}
    writers: dict[int, list[str]] = {}
    for node in nodes:
        if node.op != "call_function":
            continue
        for spec in _specs_written(node):
            writers.setdefault(id(spec), []).append(node.name)
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
    for spec_id, names in writers.items():
        if len(names) > 1:
            written.setdefault(spec_id, names[1])
    return written


def _specs_written(node: torch.fx.Node) -> list[TensorSpec]:
    """The TensorSpecs an instruction writes as its result: an out-variant op's, a delegate's outputs."""
    if node.target is executorch_call_delegate:
        specs = node.meta.get("spec")
        return [s for s in specs if isinstance(s, TensorSpec)] if isinstance(specs, (list, tuple)) else []
    if is_inplace_node(node) or not is_out_var_node(node):
        return []
    return [s for s in tree_flatten(node.meta.get("spec"))[0] if isinstance(s, TensorSpec)]
