"""Emit a tiled region into an fx graph: slices, border pads, the region's ops per band, one cat.

The pieces (`schedule`) are inserted before the region's end in order, the end's users read the cat,
and the region's original ops are erased. The graph stays ATen, so it exports and lowers like any
other: XNNPACK delegates the per-band convolutions, pads and cats where it supports them.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch.fx import GraphModule, Node

from memplan.planner.tiling.region import Region
from memplan.planner.tiling.schedule import START, Piece
from memplan.planner.tiling.semantics import H, rebuilt_args

aten = torch.ops.aten


def rewrite(module: GraphModule, region: Region, pieces: Sequence[Piece]) -> None:
    """Replace `region` in `module` by `pieces` (in place) and recompile."""
    graph = module.graph
    made: list[Node] = []
    with graph.inserting_before(region.end):
        for piece in pieces:
            made.append(_emit(graph, piece, [region.start if j == START else made[j] for j in piece.inputs]))
    cat = made[-1]
    region.end.replace_all_uses_with(cat)
    for node in reversed(region.nodes):
        graph.erase_node(node)
    graph.lint()
    module.recompile()


def _emit(graph, piece: Piece, inputs: list[Node]) -> Node:
    if piece.kind == "slice":
        return graph.call_function(aten.slice.Tensor, (inputs[0], H, piece.cut[0], piece.cut[1]))
    if piece.kind == "pad":
        top, bottom, value = piece.pad
        return graph.call_function(aten.constant_pad_nd.default, (inputs[0], [0, 0, top, bottom], value))
    if piece.kind == "cat":
        return graph.call_function(aten.cat.default, (inputs, H))
    args, kwargs = rebuilt_args(piece.origin, dict(zip(piece.args, inputs, strict=True)))
    return graph.call_function(piece.origin.target, args, kwargs)
