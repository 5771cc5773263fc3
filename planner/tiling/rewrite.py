"""Emit a tiled region into an fx graph: slices, border pads, the region's ops per band, one cat.

The pieces (`schedule`) are inserted before the region's end in order, the end's users read the cat,
and the region's original ops are erased; each new node carries its band mark (`BAND`, but the cat),
its value's fake tensor (meta "val") as exported nodes do, and the program node it stands for
(`partitioned.ORIGIN`: a band's op its original). The graph stays ATen, so it exports and lowers
like any other: XNNPACK delegates the per-band convolutions, pads and cats where it supports them.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence

import torch
from torch._guards import detect_fake_mode
from torch.fx import Graph, GraphModule, Node
from torch.utils._pytree import tree_flatten

from memplan.planner.tiling.partitioned import mark_origin, origin
from memplan.planner.tiling.pointwise import is_pointwise
from memplan.planner.tiling.region import Region, has_rows
from memplan.planner.tiling.schedule import START, Piece
from memplan.planner.tiling.semantics import rebuilt_args, shape

aten = torch.ops.aten

BAND = "memplan_tiling_band"
"""Meta key of the nodes a rewrite emits before its cat: a region tiled already, which a search for the
next region neither starts in nor crosses (its cat, the old end's place, is a tensor like any other)."""


def rewrite(module: GraphModule, region: Region, pieces: Sequence[Piece]) -> None:
    """Replace `region` in `module` by `pieces` (in place) and recompile."""
    graph = module.graph
    made: list[Node] = []
    claimed: set[Node] = set()
    with graph.inserting_before(region.end):
        for piece in pieces:
            inputs = [region.start if j == START else made[j] for j in piece.inputs]
            node = _emit(graph, piece, inputs, _own_weights(graph, piece, claimed))
            node.meta["val"] = _value(node)
            mark_origin(node, origin(piece.origin) if piece.kind == "op" else node.name)
            made.append(node)
    cat = made[-1]
    for node in made[:-1]:
        node.meta[BAND] = True
    region.end.replace_all_uses_with(cat)
    for node in reversed(region.nodes):
        graph.erase_node(node)
    graph.lint()
    module.recompile()


def _value(node: Node) -> object:
    """The new node's meta "val", computed from its inputs' in their fake mode: a graph searched
    again for the next region is counted with its bands' shapes, as the exported graph has them."""
    args, kwargs = torch.fx.node.map_arg((node.args, node.kwargs), lambda a: a.meta["val"])
    with detect_fake_mode(tree_flatten((args, kwargs))[0]) or contextlib.nullcontext():
        return node.target(*args, **kwargs)  # type: ignore[operator]


def _own_weights(graph: Graph, piece: Piece, claimed: set[Node]) -> dict[int, Node]:
    """Copies, for this band's op, of the ops computing its constant args: a weight's dequantize, or
    the dequantize of a one-row tensor from outside the region (a squeeze-and-excitation's scale).

    XNNPACK's partitioner takes a conv together with its weight's dequantize (a mul with its scale's),
    so ops of several bands sharing one dequantize would become one delegate and every band's input
    would be live at once; each band gets its own (the first keeps the original), reading the same
    tensor.
    """
    if piece.kind != "op":
        return {}
    own = {}
    for pos, arg in enumerate(piece.origin.args):
        if pos in piece.args or not isinstance(arg, Node) or arg.op != "call_function":
            continue
        if not (all(a.op == "get_attr" for a in arg.all_input_nodes) or _one_row_pointwise(arg)):
            continue
        if arg in claimed:
            own[pos] = graph.node_copy(arg)
        claimed.add(arg)
    return own


def _one_row_pointwise(node: Node) -> bool:
    """A pointwise op of one tensor whose output has one row (broadcast along H): cheap to copy."""
    one_row = shape(node) is not None and not has_rows(node)
    return one_row and len(node.all_input_nodes) == 1 and is_pointwise(node)


def _emit(graph, piece: Piece, inputs: list[Node], own: dict[int, Node]) -> Node:
    if piece.kind == "slice":
        return graph.call_function(aten.slice.Tensor, (inputs[0], piece.axis, piece.cut[0], piece.cut[1]))
    if piece.kind == "pad":
        top, bottom, value = piece.pad
        return graph.call_function(aten.constant_pad_nd.default, (inputs[0], [0, 0, top, bottom], value))
    if piece.kind in ("cat", "join"):
        return graph.call_function(aten.cat.default, (inputs, piece.axis))
    args, kwargs = rebuilt_args(piece.origin, {**own, **dict(zip(piece.args, inputs, strict=True))})
    return graph.call_function(piece.origin.target, args, kwargs)
