"""What a partitioner does to a program, read off the partitioned untiled program, so the tiling cost
counts the tensors the lowered program holds rather than what one int8 kernel per dequantize -> op ->
quantize would hold.

XNNPACK's quantizer leaves some ops float (hardswish, a `mean` without keepdim) and its partitioner
leaves some to portable kernels: their dequantize, the op and its quantize become delegates of their
own with float tensors between them, in the arena. An op the partitioner keeps from decomposition
(`ops_to_not_decompose`: hardswish for XNNPACK) runs as one kernel, without the intermediates
`transients` counts for `to_edge`'s decomposition. Nothing in the converted quantized graph tells an
annotated op from one left float (their q/dq pattern is the same), so the partitioner is asked: the
program goes through `to_edge` with those ops kept whole and each partitioner tags it (as
`to_edge_transform_and_lower` does, without the backends' preprocessing). A float tensor a delegate
both computes and alone reads stays inside it. Nodes are matched back to the program by `from_node`
provenance; tiled copies carry their original's name (`ORIGIN`, in the node's "custom" meta, which
export keeps).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch.export import ExportedProgram
from torch.fx import Graph, Node

ORIGIN = "memplan_origin"


@dataclass(frozen=True)
class Partitioned:
    """`inside`: names of the program's float tensors a delegate computes and alone reads (never in
    the arena); `kept_whole`: the op overloads the partitioners keep from decomposition."""

    inside: frozenset[str]
    kept_whole: frozenset[Any]


def origin(node: Node) -> str:
    """The name of the program node `node` stands for: its own, or its original's when tiling copied it."""
    return node.meta.get("custom", {}).get(ORIGIN, node.name)


def mark_origin(node: Node, name: str) -> None:
    """Record that `node` stands for the program node `name` (a fresh "custom" dict: copies share meta)."""
    node.meta["custom"] = {**node.meta.get("custom", {}), ORIGIN: name}


def mark_origins(graph: Graph) -> None:
    """Every op of `graph` marked as itself unless marked already, so a re-export keeps the names."""
    for node in graph.nodes:
        if node.op == "call_function" and ORIGIN not in node.meta.get("custom", {}):
            mark_origin(node, node.name)


def partitioned(program: ExportedProgram, partitioners: Sequence[Any]) -> Partitioned:
    """What `partitioners` (ExecuTorch `Partitioner`s, applied in order) do to `program`."""
    from executorch.exir import EdgeCompileConfig, to_edge

    kept: list[Any] = []
    for partitioner in partitioners:
        ops, _ = partitioner.ops_to_not_decompose(program)
        kept += ops
    config = EdgeCompileConfig(_check_ir_validity=False, preserve_ops=kept)
    edge = to_edge(program, compile_config=config).exported_program()
    tags: dict[Node, str] = {}
    for i, partitioner in enumerate(partitioners):
        result = partitioner.partition(edge)
        edge = result.tagged_exported_program
        for node in edge.graph.nodes:
            tag = node.meta.get("delegation_tag")
            if tag and node not in tags:
                tags[node] = f"{i}:{tag}"
    names = {n.name for n in program.graph.nodes}
    inside = set()
    for node, tag in tags.items():
        value = node.meta.get("val")
        floating = isinstance(value, torch.Tensor) and value.dtype.is_floating_point
        if floating and node.users and all(tags.get(u) == tag for u in node.users):
            source = _program_node(node, names)
            if source is not None:
                inside.add(source)
    return Partitioned(frozenset(inside), frozenset(kept))


def _program_node(node: Node, names: set[str]) -> str | None:
    """The name of the program node an edge node came from (nearest in its `from_node` chain)."""
    for source in node.meta.get("from_node") or []:
        while source is not None:
            if source.name in names:
                return source.name
            source = source.from_node[-1] if source.from_node else None
    return node.name if node.name in names else None
