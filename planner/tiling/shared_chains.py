"""A float chain read by a reduction and by something else, computed once for each kind of reader.

In a quantized squeeze-and-excitation block (MobileNetV3 with XNNPACK's quantizer, which leaves
hardswish and the SE's mean float) `F = hardswish(dequantize(D))` is read twice: by the SE's mean over
H and W and by the quantize of the gated branch. A region has one end, so neither region can hold F:
row bands cannot reach the mean (the mean of a band is not the band's share of it) and groups of
channels cannot reach the gating (its scale mixes every channel through the SE's 1x1 convolutions).
F then stands whole in float beside its int8 source (MobileNetV3-Small @224: 188,160 B at 14x14x240,
the peak once the early stages are tiled). Computing the chain from the int8 `D` again for the
reductions (`F' = hardswish(dequantize(D))`, read by the mean) leaves each reader a chain of its own
from D: the mean's runs in groups of channels, the gating's in row bands, and only D, a quarter of F,
stands whole.

The copies are the same ops on the same inputs, so they compute the same values; they carry the
original's name (`partitioned.ORIGIN`), so the partitioner's verdict on the original holds for them.
They add no MACs (a pointwise chain has no weights), only the chain's elementwise work once more.
`tile_module` tiles the graph with and without the copies and keeps the smaller peak.
"""

from __future__ import annotations

from torch.fx import Graph, GraphModule, Node

from memplan.planner.tiling.channels import channel_rule
from memplan.planner.tiling.partitioned import mark_origin, origin
from memplan.planner.tiling.pointwise import is_pointwise
from memplan.planner.tiling.semantics import arguments, shape

_CACHED = "memplan_tiling_"  # what the tiling modules cache in a node's meta: of the original, not the copy


def shared_chains(graph: Graph, cut: set[Node]) -> list[tuple[Node, list[Node], list[Node]]]:
    """Each float tensor read by a reduction over H and W and by another op, with the pointwise chain
    from the nearest tensor in `cut` (`search.cut_points`, where a region may start) up to it, and
    its reducing readers."""
    found = []
    for node in graph.nodes:
        reductions = [u for u in node.users if _reduction(u)]
        if node in cut or not reductions or len(reductions) == len(node.users):
            continue
        chain = _chain_to_cut(node, cut)
        if chain is not None:
            found.append((node, chain, reductions))
    return found


def split_shared_chains(module: GraphModule, cut: set[Node]) -> int:
    """Give every reduction reading a shared float chain (`shared_chains`) a copy of the chain, in
    place. Returns how many chains were copied."""
    graph = module.graph
    found = shared_chains(graph, cut)
    for node, chain, reductions in found:
        for reader in reductions:
            reader.replace_input_with(node, _copy_before(graph, reader, chain))
    if found:
        graph.lint()
        module.recompile()
    return len(found)


def _reduction(node: Node) -> bool:
    """A channel-local reduction (over dims leaving N and C alone: a mean over H and W)."""
    return {"dim", "keepdim"} <= arguments(node).keys() and channel_rule(node) is not None


def _chain_to_cut(node: Node, cut: set[Node]) -> list[Node] | None:
    """The pointwise ops from the nearest tensor in `cut` up to `node`, in order, each reading one
    activation of its own shape (the others constants and scalars); None when the chain is not that."""
    chain = []
    while node not in cut:
        activations = [a for a in node.all_input_nodes if shape(a) == shape(node)]
        if node.op != "call_function" or not is_pointwise(node) or len(activations) != 1:
            return None
        chain.append(node)
        node = activations[0]
    return chain[::-1] or None


def _copy_before(graph: Graph, reader: Node, chain: list[Node]) -> Node:
    """A copy of `chain` just before `reader`, reading what the chain's first op reads; its last op."""
    copies: dict[Node, Node] = {}
    with graph.inserting_before(reader):
        for op in chain:
            copy = graph.node_copy(op, lambda a: copies.get(a, a))
            copy.meta = {k: v for k, v in op.meta.items() if not k.startswith(_CACHED)}
            mark_origin(copy, origin(op))
            copies[op] = copy
    return copies[chain[-1]]
