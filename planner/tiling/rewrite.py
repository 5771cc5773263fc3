"""Emit a tiled region into an fx graph: slices, border pads, the region's ops per band, one cat.

The pieces (`schedule`) are inserted before the region's end in order, the end's users read the cat,
and the region's original ops are erased. The graph stays ATen, so it exports and lowers like any
other: XNNPACK delegates the per-band convolutions, pads and cats where it supports them.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch.fx import Graph, GraphModule, Node

from memplan.planner.tiling.region import Region
from memplan.planner.tiling.schedule import START, Piece
from memplan.planner.tiling.semantics import H, rebuilt_args

aten = torch.ops.aten


def rewrite(module: GraphModule, region: Region, pieces: Sequence[Piece]) -> None:
    """Replace `region` in `module` by `pieces` (in place) and recompile."""
    graph = module.graph
    made: list[Node] = []
    claimed: set[Node] = set()
    with graph.inserting_before(region.end):
        for piece in pieces:
            inputs = [region.start if j == START else made[j] for j in piece.inputs]
            made.append(_emit(graph, piece, inputs, _own_weights(graph, piece, claimed)))
    cat = made[-1]
    region.end.replace_all_uses_with(cat)
    for node in reversed(region.nodes):
        graph.erase_node(node)
    graph.lint()
    module.recompile()


def _own_weights(graph: Graph, piece: Piece, claimed: set[Node]) -> dict[int, Node]:
    """Copies, for this band's op, of the ops computing its constant args (a weight's dequantize).

    XNNPACK's partitioner takes a conv together with its weight's dequantize, so ops of several bands
    sharing one dequantize would become one delegate and every band's output would be live at once;
    each band gets its own (the first keeps the original), reading the same constant.
    """
    if piece.kind != "op":
        return {}
    own = {}
    for pos, arg in enumerate(piece.origin.args):
        if pos in piece.args or not isinstance(arg, Node) or arg.op != "call_function":
            continue
        if not all(a.op == "get_attr" for a in arg.all_input_nodes):
            continue
        if arg in claimed:
            own[pos] = graph.node_copy(arg)
        claimed.add(arg)
    return own


def _emit(graph, piece: Piece, inputs: list[Node], own: dict[int, Node]) -> Node:
    if piece.kind == "slice":
        return graph.call_function(aten.slice.Tensor, (inputs[0], H, piece.cut[0], piece.cut[1]))
    if piece.kind == "pad":
        top, bottom, value = piece.pad
        return graph.call_function(aten.constant_pad_nd.default, (inputs[0], [0, 0, top, bottom], value))
    if piece.kind in ("cat", "join"):
        return graph.call_function(aten.cat.default, (inputs, H))
    args, kwargs = rebuilt_args(piece.origin, {**own, **dict(zip(piece.args, inputs, strict=True))})
    return graph.call_function(piece.origin.target, args, kwargs)
