"""Per-cat facts that do not depend on other decisions: may this cat and each of its inputs move?

From the graph's shared facts (`levers.graph_facts.GraphFacts`), `inspect_cat` reads one `aten.cat.out` call and
says, for the output and every input, why it cannot take part (or nothing).
Legality is derived from what the graph does: which op writes the bytes,
whether anything mutates them, where they are pinned.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import cast

import torch
from executorch.exir.operator.convert import unwrap_op_overload
from executorch.exir.schema import TensorShapeDynamism
from executorch.exir.tensor import TensorSpec, num_bytes_from_shape_and_dtype

from memplan.planner.levers.graph_facts import (
    GraphFacts,
    default_dim_order,
    elem_size,
    producer_refusal,
    view_base,
)
from memplan.planner.levers.refusals import Refusal


@dataclass
class InputFacts:
    node: torch.fx.Node
    storage: torch.fx.Node  # the node whose spec owns the bytes (views resolved)
    spec: TensorSpec  # the storage spec
    bid: str
    offset: int
    nbytes: int
    reason: Refusal | None
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
    reasons: list[tuple[Refusal, str]]
    inputs: list[InputFacts]


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
    reasons: list[tuple[Refusal, str]] = []
    bid = facts.bid_of.get(id(spec), "")
    if any(s != 1 for s in spec.shape[:dim]):
        reasons.append((Refusal.INNER_DIM, f"dim {dim} of shape {list(spec.shape)}"))
    if spec.shape_dynamism != TensorShapeDynamism.STATIC:
        reasons.append((Refusal.DYNAMIC_SHAPE, "output shape is dynamic"))
    if not default_dim_order(spec):
        reasons.append((Refusal.NOT_CONTIGUOUS, f"output dim order {tuple(spec.dim_order)}"))
    if not bid:
        reasons.append((Refusal.OUTPUT_NOT_PLANNED, "the output has no planned buffer"))
    else:
        why = facts.pinned(bid, spec)
        if why:
            reasons.append((Refusal.OUTPUT_PINNED, why))
    if id(spec) in facts.written:
        reasons.append(
            (Refusal.OUTPUT_WRITTEN_IN_PLACE, f"{facts.written[id(spec)]} writes the output in place")
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

    def result(reason: Refusal | None, detail: str = "") -> InputFacts:
        keeps_value = stable and reason is not Refusal.MUTABLE_BUFFER
        return InputFacts(arg, storage, sspec, bid, offset, nbytes, reason, detail, keeps_value)

    if nbytes == 0:
        return result(None, "empty")
    if spec.dtype != out.dtype:
        return result(Refusal.DTYPE_MISMATCH, f"{spec.dtype} into {out.dtype}")
    if (
        spec.shape_dynamism != TensorShapeDynamism.STATIC
        or sspec.shape_dynamism != TensorShapeDynamism.STATIC
    ):
        return result(Refusal.DYNAMIC_SHAPE, "dynamic shape")
    if not default_dim_order(spec) or not default_dim_order(sspec):
        return result(Refusal.NOT_CONTIGUOUS, f"dim order {tuple(spec.dim_order)}")
    producer = producer_refusal(storage, facts.signature)
    if producer:
        return result(*producer)
    if storage is not arg and num_bytes_from_shape_and_dtype(torch.Size(sspec.shape), sspec.dtype) != nbytes:
        return result(Refusal.VIEW_OF_OTHER_SIZE, f"view of {storage.name}")
    if id(sspec) in facts.written:
        return result(Refusal.INPUT_WRITTEN_IN_PLACE, f"{facts.written[id(sspec)]} writes it in place")
    if not bid:
        return result(Refusal.INPUT_NOT_PLANNED, "no planned buffer (unplanned graph output?)")
    if id(sspec) in seen:
        return result(Refusal.DUPLICATE_INPUT, f"same bytes as input {seen[id(sspec)]}")
    seen[id(sspec)] = arg.name
    why = facts.pinned(bid, sspec)
    if why:
        return result(Refusal.INPUT_PINNED, why)
    member = facts.problem.buffer(bid)
    out_bid = facts.bid_of.get(id(out))
    out_pool = facts.problem.buffer(out_bid).pool if out_bid is not None else member.pool
    if member.pool != out_pool:
        return result(Refusal.POOL_MISMATCH, f"mem_id {member.pool} vs the output's {out_pool}")
    need = elem_size(spec) if facts.relax_alignment else member.alignment
    if offset % need:
        return result(Refusal.MISALIGNED, f"offset {offset} is not a multiple of {need}")
    return result(None)
