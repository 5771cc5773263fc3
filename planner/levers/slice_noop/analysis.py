"""Decide which slice/select/split outputs can live inside their input, and build that problem.

An output is a no-op when its bytes are one contiguous run of the input's
bytes that nothing changes while the output is read. Legality is read off the
graph (the levers' shared facts, levers.graph_facts): the run is contiguous when every dim
before the sliced one has size 1, the step is 1 and both tensors are in the
default dim order; the input's bytes stay put when its producer is an
ordinary out-variant op (not a graph input, constant, mutable buffer, delegate
or control flow), no op mutates it in place or writes it through a second
`out=`, and it sits at no fixed or shared offset. The input's lifetime is
widened to cover the output, so nothing else is placed on those bytes
meanwhile. A split goes only when all its outputs do; an output that would
raise the problem's lower bound is refused (ARENA_GREW).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import Any, cast

import torch
from executorch.exir import memory
from executorch.exir.operator.convert import get_out_args_from_opoverload, unwrap_op_overload
from executorch.exir.schema import TensorShapeDynamism
from executorch.exir.tensor import TensorSpec, num_bytes_from_shape_and_dtype
from torch.export.exported_program import ExportGraphSignature

from memplan.peak_bound import lower_bound
from memplan.planner.compat import is_out_var_node
from memplan.planner.graph.extract import Extraction
from memplan.planner.levers.graph_facts import GraphFacts, default_dim_order, producer_refusal, view_base
from memplan.planner.levers.refusals import Refusal
from memplan.planner.levers.slice_noop.decisions import SliceDecision, SliceNoops
from memplan.planner.memory.instruction_traffic import without_instructions
from memplan.problem import ContiguousGroup, Problem

_OPS = {
    torch.ops.aten.slice_copy.Tensor_out: "slice",
    torch.ops.aten.select_copy.int_out: "select",
    torch.ops.aten.split_with_sizes_copy.out: "split",
    torch.ops.aten.split_copy.Tensor_out: "split",
}


def slice_kind(node: torch.fx.Node) -> str:
    """ "slice", "select" or "split" for those out-variant copies, "" for any other node."""
    if node.op != "call_function":
        return ""
    try:
        return _OPS.get(unwrap_op_overload(node.target), "")
    except TypeError:
        return ""


def analyze_slices(
    graph_module: torch.fx.GraphModule,
    graph_signature: ExportGraphSignature | None,
    extraction: Extraction,
) -> SliceNoops:
    """Every slice/select/split output's decision and the problem with the no-ops as groups."""
    facts = GraphFacts(graph_module, graph_signature, extraction, relax_alignment=False)
    writers = _out_writers(facts.nodes)
    outputs = {id(s) for s in _graph_output_specs(graph_module)}
    per_node = [_inspect(facts, writers, outputs, node) for node in facts.nodes if slice_kind(node)]
    base = lower_bound(extraction.problem)
    problem = extraction.problem
    decisions: list[SliceDecision] = []
    for node_decisions in sorted(per_node, key=lambda ds: -sum(d.nbytes for d in ds)):
        if not node_decisions:
            continue
        node_decisions = [_nested(problem, d) if d.removed else d for d in node_decisions]
        if all(d.removed for d in node_decisions):
            grown = _grouped(problem, node_decisions)
            if lower_bound(grown) <= base:
                problem = grown
                decisions += node_decisions
                continue
            node_decisions = [
                _refused(d, Refusal.ARENA_GREW, "the input lives longer") for d in node_decisions
            ]
        elif any(d.removed for d in node_decisions):  # a split keeps its instruction: every output does
            node_decisions = [
                d
                if not d.removed
                else _refused(
                    d,
                    d.reasons[0] if d.reasons else Refusal.ARENA_GREW,
                    "another output of the split is refused",
                )
                for d in node_decisions
            ]
        decisions += node_decisions
    order = {n.name: i for i, n in enumerate(facts.nodes)}
    decisions.sort(key=lambda d: (order[d.node], d.offset))
    noops = SliceNoops(decisions, problem, extraction.problem)
    gone = set(noops.nodes_removed)
    removed = [n for n in facts.nodes if n.name in gone]  # their instructions go
    return dataclasses.replace(noops, problem=without_instructions(problem, extraction.spec_of, removed))


def _nested(problem: Problem, d: SliceDecision) -> SliceDecision:
    """`d` placed inside the smallest no-op output of the same input that holds its bytes (so
    overlapping tensors form a storage-base chain, as ExecuTorch's Verifier requires); refused if
    it overlaps one without being inside it."""
    size = problem.buffer(d.output).size
    holders = []
    for member, rel in _members(problem, d.input):
        other = problem.buffer(member).size
        if rel < d.offset + size and d.offset < rel + other:
            if not (rel <= d.offset and d.offset + size <= rel + other):
                return _refused(d, Refusal.OVERLAPS_SLICE, f"overlaps the no-op output {member}")
            holders.append((other, member, rel))
    if not holders:
        return d
    _, member, rel = min(holders)
    return _nested(problem, dataclasses.replace(d, input=member, offset=d.offset - rel))


def _members(problem: Problem, parent: str) -> list[tuple[str, int]]:
    return [m for g in problem.groups if g.parent == parent for m in g.members]


def _refused(d: SliceDecision, reason: Refusal, detail: str) -> SliceDecision:
    return dataclasses.replace(d, removed=False, reasons=(*d.reasons, reason), detail=d.detail or detail)


def _grouped(problem: Problem, decisions: Sequence[SliceDecision]) -> Problem:
    """`problem` with the outputs as members of their inputs, each input living as long as its members.

    Both ends widen: a holder may be a larger no-op output of the same input produced after the
    member (`x[1:2]` read before `x[0:2]`); its bytes are the input's, already written when the
    member starts, so it may start that early too (as cat fusion widens its parents)."""
    widened: dict[str, tuple[int, int]] = {}
    for d in decisions:
        out = problem.buffer(d.output)
        holder: str | None = d.input
        while holder is not None:  # the input and every tensor it sits in (a slice of a slice)
            buf = problem.buffer(holder)
            start, end = widened.get(holder, (buf.start, buf.end))
            widened[holder] = (min(start, out.start), max(end, out.end))
            link = problem.parent_of(holder)
            holder = link[0] if link else None
    buffers = tuple(
        dataclasses.replace(b, start=widened[b.id][0], end=widened[b.id][1])
        if b.id in widened and widened[b.id] != (b.start, b.end)
        else b
        for b in problem.buffers
    )
    groups = [*problem.groups, *(ContiguousGroup(d.input, ((d.output, d.offset),)) for d in decisions)]
    return dataclasses.replace(problem, buffers=buffers, groups=tuple(groups))


def _inspect(
    facts: GraphFacts, writers: dict[int, list[str]], graph_outputs: set[int], node: torch.fx.Node
) -> list[SliceDecision]:
    """One decision per output of the op (one for slice/select, one per piece for split)."""
    kind = slice_kind(node)
    source = cast(torch.fx.Node, node.args[0])
    in_spec = source.meta["spec"]
    storage = view_base(source)
    sspec = storage.meta["spec"]
    ndim = len(in_spec.shape)
    dim = int(_arg(node, 2 if kind == "split" else 1, "dim", 0))
    dim = dim + ndim if dim < 0 else dim
    inner = math.prod(in_spec.shape[dim + 1 :]) * torch._utils._element_size(in_spec.dtype)
    out_specs = node.meta["spec"] if kind == "split" else [node.meta["spec"]]
    starts = _starts(node, kind, in_spec, dim, out_specs)
    input_bid = facts.bid_of.get(id(sspec), "")
    common = _input_reasons(facts, writers, node, kind, source, storage, in_spec, sspec, dim, input_bid)
    decisions = []
    for spec, start in zip(out_specs, starts):
        reasons = list(common)
        bid = facts.bid_of.get(id(spec), "")
        nbytes = num_bytes_from_shape_and_dtype(torch.Size(spec.shape), spec.dtype)
        if start is None:
            offset = 0
            reasons.append((Refusal.DYNAMIC_OFFSET, f"{node.name} starts at a value computed at run time"))
        else:
            offset = start * inner
            reasons += _output_reasons(facts, graph_outputs, spec, bid, in_spec, offset, input_bid)
        decisions.append(
            SliceDecision(
                node.name,
                kind,
                bid,
                input_bid,
                offset,
                nbytes,
                removed=not reasons,
                reasons=tuple(r for r, _ in reasons),
                detail="; ".join(d for _, d in reasons if d),
            )
        )
    return decisions


def _input_reasons(
    facts: GraphFacts,
    writers: dict[int, list[str]],
    node: torch.fx.Node,
    kind: str,
    source: torch.fx.Node,
    storage: torch.fx.Node,
    in_spec: TensorSpec,
    sspec: TensorSpec,
    dim: int,
    input_bid: str,
) -> list[tuple[Refusal, str]]:
    reasons: list[tuple[Refusal, str]] = []
    if any(s != 1 for s in in_spec.shape[:dim]):
        reasons.append((Refusal.INNER_DIM, f"dim {dim} of shape {list(in_spec.shape)}"))
    step = _constant(_arg(node, 4, "step", 1)) if kind == "slice" else 1
    if step != 1:
        reasons.append((Refusal.STEP, f"step {_arg(node, 4, 'step', 1)}"))
    if (
        in_spec.shape_dynamism != TensorShapeDynamism.STATIC
        or sspec.shape_dynamism != TensorShapeDynamism.STATIC
    ):
        reasons.append((Refusal.DYNAMIC_SHAPE, "input shape is dynamic"))
    if not default_dim_order(in_spec) or not default_dim_order(sspec):
        reasons.append((Refusal.NOT_CONTIGUOUS, f"input dim order {tuple(in_spec.dim_order)}"))
    producer = producer_refusal(storage, facts.signature)
    if producer is not None:
        reasons.append((Refusal.INPUT_SOURCE, f"{producer[0].value}: {producer[1]}"))
    elif storage is not source and _nbytes(sspec) != _nbytes(in_spec):
        reasons.append((Refusal.INPUT_SOURCE, f"a view of {storage.name}, of another size"))
    if id(sspec) in facts.written:
        reasons.append((Refusal.INPUT_WRITTEN_IN_PLACE, f"{facts.written[id(sspec)]} writes it in place"))
    if len(writers.get(id(sspec), [])) > 1:
        reasons.append((Refusal.INPUT_WRITTEN_IN_PLACE, f"written by {', '.join(writers[id(sspec)])}"))
    if not input_bid:
        reasons.append((Refusal.INPUT_NOT_PLANNED, "the input has no planned buffer"))
    else:
        why = facts.pinned(input_bid, sspec)
        if why:
            reasons.append((Refusal.INPUT_PINNED, why))
    return reasons


def _output_reasons(
    facts: GraphFacts,
    graph_outputs: set[int],
    spec: TensorSpec,
    bid: str,
    in_spec: TensorSpec,
    offset: int,
    input_bid: str,
) -> list[tuple[Refusal, str]]:
    reasons: list[tuple[Refusal, str]] = []
    if spec.dtype != in_spec.dtype:
        reasons.append((Refusal.DTYPE_MISMATCH, f"{in_spec.dtype} to {spec.dtype}"))
    if spec.shape_dynamism != TensorShapeDynamism.STATIC:
        reasons.append((Refusal.DYNAMIC_SHAPE, "output shape is dynamic"))
    if not default_dim_order(spec):
        reasons.append((Refusal.NOT_CONTIGUOUS, f"output dim order {tuple(spec.dim_order)}"))
    if id(spec) in graph_outputs:
        reasons.append((Refusal.GRAPH_OUTPUT, "a graph output"))
    if id(spec) in facts.written:
        reasons.append((Refusal.OUTPUT_WRITTEN_IN_PLACE, f"{facts.written[id(spec)]} writes it in place"))
    if not bid:
        reasons.append((Refusal.OUTPUT_NOT_PLANNED, "the output has no planned buffer"))
        return reasons
    why = facts.pinned(bid, spec)
    if why:
        reasons.append((Refusal.OUTPUT_PINNED, why))
    if input_bid:
        member, parent = facts.problem.buffer(bid), facts.problem.buffer(input_bid)
        if (member.pool, member.banks) != (parent.pool, parent.banks):
            reasons.append((Refusal.OUTPUT_PINNED, f"mem_id {member.pool} vs the input's {parent.pool}"))
        if offset % member.alignment or offset + member.size > parent.size:
            reasons.append(
                (Refusal.MISALIGNED, f"offset {offset} (alignment {member.alignment}, {member.size} B)")
            )
    return reasons


def _starts(
    node: torch.fx.Node, kind: str, in_spec: TensorSpec, dim: int, out_specs: Sequence[TensorSpec]
) -> list[int | None]:
    """Index along `dim` where each output begins (None: computed at run time, e.g. from `.item()`)."""
    size = int(in_spec.shape[dim]) if in_spec.shape else 0
    if kind == "select":
        index = _constant(_arg(node, 2, "index", 0))
        return [None if index is None else index + size if index < 0 else index]
    if kind == "slice":
        start = _arg(node, 2, "start", None)
        begin = 0 if start is None else _constant(start)
        if begin is None:
            return [None]
        begin = begin + size if begin < 0 else begin
        return [min(max(begin, 0), size)]
    starts: list[int | None] = []
    at = 0
    for spec in out_specs:
        starts.append(at)
        at += int(spec.shape[dim])
    return starts


def _constant(value: object) -> int | None:
    """`value` as an int, or None when the graph computes it at run time (a node, e.g. of `.item()`)."""
    return None if isinstance(value, torch.fx.Node) else int(cast(int, value))


def _arg(node: torch.fx.Node, index: int, name: str, default: object) -> Any:
    if index < len(node.args):
        return node.args[index]
    return node.kwargs.get(name, default)


def _out_writers(nodes: Sequence[torch.fx.Node]) -> dict[int, list[str]]:
    """id(storage spec) -> the ops writing it through an `out=` argument."""
    found: dict[int, list[str]] = {}
    for node in nodes:
        if (
            node.op != "call_function"
            or node.target in (memory.alloc, memory.view)
            or not is_out_var_node(node)
        ):
            continue
        op = unwrap_op_overload(node.target)
        for name in get_out_args_from_opoverload(op):
            for target in torch.utils._pytree.tree_flatten(node.kwargs.get(name))[0]:
                if isinstance(target, torch.fx.Node) and isinstance(target.meta.get("spec"), TensorSpec):
                    found.setdefault(id(view_base(target).meta["spec"]), []).append(node.name)
    return found


def _graph_output_specs(graph_module: torch.fx.GraphModule) -> list[TensorSpec]:
    out = next(n for n in reversed(graph_module.graph.nodes) if n.op == "output")
    specs = []
    for arg in torch.utils._pytree.tree_flatten(out.args)[0]:
        if isinstance(arg, torch.fx.Node) and isinstance(arg.meta.get("spec"), TensorSpec):
            specs.append(arg.meta["spec"])
    return specs


def _nbytes(spec: TensorSpec) -> int:
    return num_bytes_from_shape_and_dtype(torch.Size(spec.shape), spec.dtype)
