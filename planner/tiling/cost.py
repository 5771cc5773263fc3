"""What a graph costs, counted from the graph: live activation bytes at its worst step, and MACs.

The peak here is the live-bytes bound: at every step the bytes of every activation produced and not
yet read for the last time (graph inputs from the start, outputs to the end; constants are not in
the arena; an op that returns an alias of its input adds no bytes). No placement can beat it and
memplan's plans meet it on the CNNs tiled here, so the search ranks tilings by it; the planned
arena of the chosen program is measured by lowering it (the report and the benchmark show both).
MACs: every op with a `weight` of rank >= 2 (convolution, linear) does numel(output) * prod(weight
dims after the first) multiply-accumulates, which for a convolution is N*Cout*Hout*Wout*Cin/groups*kh*kw.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from dataclasses import dataclass

from torch.fx import Graph, Node

from memplan.planner.tiling.region import Region
from memplan.planner.tiling.schedule import START, Piece
from memplan.planner.tiling.semantics import arguments, itemsize, shape


@dataclass(frozen=True)
class Step:
    """One op: the key of what it makes (None: nothing planned), its bytes, the keys it reads."""

    key: Hashable | None
    bytes: int
    reads: tuple[Hashable, ...]


def node_bytes(node: Node) -> int:
    """Bytes of the node's tensor value (0 when it is not one tensor of static shape)."""
    s = shape(node)
    return 0 if s is None else math.prod(s) * itemsize(node)


def _aliases(node: Node) -> bool:
    """True when the op returns a view of an input (getitem of a tuple, view ops): no bytes of its own."""
    if node.op == "call_function" and getattr(node.target, "__name__", "") == "getitem":
        return True
    schema = getattr(node.target, "_schema", None)
    return bool(schema and schema.returns and schema.returns[0].alias_info is not None)


def node_step(node: Node, roots: dict[Node, Hashable]) -> Step | None:
    """The step of an untiled node; `roots` maps aliases to the tensor they view (updated here)."""
    if node.op == "placeholder":
        roots[node] = node
        return Step(node, node_bytes(node), ())
    if node.op not in ("call_function", "output"):
        return None
    reads = tuple(dict.fromkeys(roots[a] for a in node.all_input_nodes if a in roots))
    if node.op == "output":  # what the graph returns stays live to the end
        return Step(None, 0, reads)
    if _aliases(node) and reads:
        roots[node] = reads[0]
        return Step(None, 0, reads)
    roots[node] = node
    return Step(node, node_bytes(node), reads)


def graph_steps(graph: Graph, region: Region | None = None, pieces: Sequence[Piece] = ()) -> list[Step]:
    """The graph's steps; with a region, its ops replaced by `pieces` at the end's place."""
    roots: dict[Node, Hashable] = {}
    inside = set(region.nodes) if region else set()
    steps: list[Step] = []
    for node in graph.nodes:
        if region is not None and node is region.end:
            steps += _piece_steps(region, pieces, roots)
            roots[node] = node  # the cat makes the end
        elif node not in inside:
            step = node_step(node, roots)
            if step is not None:
                steps.append(step)
    return steps


def _piece_steps(region: Region, pieces: Sequence[Piece], roots: dict[Node, Hashable]) -> list[Step]:
    steps = []
    for i, piece in enumerate(pieces):
        reads = [roots[region.start] if j == START else ("piece", j) for j in piece.inputs]
        if piece.kind == "op":  # its other activation args (broadcast along H) are read too
            reads += [
                roots[a]
                for pos, a in enumerate(piece.origin.args)
                if pos not in piece.args and isinstance(a, Node) and a in roots
            ]
        key = region.end if piece.kind == "cat" else ("piece", i)
        steps.append(Step(key, piece.bytes, tuple(dict.fromkeys(reads))))
    return steps


def peak_bytes(steps: Sequence[Step]) -> int:
    """Most bytes live at once: each tensor from its step through its last read."""
    last: dict[Hashable, int] = {}
    for t, step in enumerate(steps):
        for key in step.reads:
            last[key] = t
    delta = [0] * (len(steps) + 2)
    for t, step in enumerate(steps):
        if step.key is not None and step.bytes:
            delta[t] += step.bytes
            delta[max(last.get(step.key, t), t) + 1] -= step.bytes
    live = peak = 0
    for d in delta:
        live += d
        peak = max(peak, live)
    return peak


def macs_of(out_shape: Sequence[int], weight_shape: Sequence[int]) -> int:
    """Multiply-accumulates of an op with this output and weight: numel(out) * prod(weight[1:])."""
    return math.prod(out_shape) * math.prod(weight_shape[1:])


def node_macs(node: Node, out_shape: Sequence[int] | None = None) -> int:
    """MACs of one node (0 unless it has a weight of rank >= 2); `out_shape` overrides its output's."""
    if node.op != "call_function":
        return 0
    weight = arguments(node).get("weight")
    w = shape(weight)
    out = out_shape if out_shape is not None else shape(node)
    if w is None or len(w) < 2 or out is None:
        return 0
    return macs_of(out, w)


def graph_macs(graph: Graph) -> int:
    """MACs of every convolution and linear op in the graph."""
    return sum(node_macs(n) for n in graph.nodes)


def tiled_macs(graph: Graph, region: Region, pieces: Sequence[Piece]) -> int:
    """MACs of the graph with `region` computed as `pieces`."""
    inside = set(region.nodes)
    outside = sum(node_macs(n) for n in graph.nodes if n not in inside)
    return outside + sum(node_macs(p.origin, p.shape) for p in pieces if p.kind == "op")
