"""Regions computed one group of channels at a time: where row bands cannot go, a reduction over H and W.

A network's head often ends in a global mean (`x.mean([2, 3])`): the mean of a row band is not the
band's share of the mean, so no row region reaches it, and a partitioner that leaves the mean to a
portable kernel holds the dequantized feature map whole in float (MnasNet-1.0 @128 int8: 81,920 B
beside its 20,480 B int8 source, the program's peak once its early stages are tiled). Each output
channel of such a chain reads only the same channel of its input, so the chain can run per group of
channels: a slice of the start along C, the ops on it, one cat of the groups along C. Every value is
computed from the same inputs in the same order, so the outputs are the same numbers.

Which ops are channel-local is read off the op, as `semantics` reads rows:

* a pointwise op (`pointwise.is_pointwise`) whose tensor args either carry the channels or broadcast
  along C (a per-tensor scale, a scalar);
* a reduction, an op with `dim` and `keepdim` arguments, over dims that leave N and C alone;
* any other op of one activation whose output on each group of channels, run on random values, is
  the same numbers as its output on the whole sliced along C (`adaptive_avg_pool2d` to 1x1 and the
  `flatten` after it, a classifier head's).

Anything else ends a channel region. Nothing here changes a graph; `rewrite` emits the pieces.
"""

from __future__ import annotations

import torch
from torch.fx import Node

from memplan.planner.tiling.pointwise import is_pointwise
from memplan.planner.tiling.region import GraphIndex, Region, bands
from memplan.planner.tiling.schedule import START, Piece
from memplan.planner.tiling.semantics import Rule, arguments, shape

C = 1  # the channel dim of an NCHW activation (and of what a reduction over H and W leaves)

_RULE = "memplan_tiling_channel_rule"


def channel_rule(node: Node) -> Rule | None:
    """How `node` reads channels when each output channel reads only its own: the args carrying them
    (`Rule.spatial_args`); None when it is not channel-local (cached in the node's meta)."""
    if _RULE not in node.meta:
        node.meta[_RULE] = _channel_rule(node)
    return node.meta[_RULE]


def _channel_rule(node: Node) -> Rule | None:
    out = shape(node)
    if node.op != "call_function" or out is None or len(out) < 2:
        return None
    args = arguments(node)
    if {"dim", "keepdim"} <= args.keys():
        return _reduction(node, args["dim"])
    if not is_pointwise(node):
        return _probed(node)
    carrying = []
    for pos, arg in enumerate(node.args):
        s = shape(arg)
        if s is None:
            continue
        at = C - (len(out) - len(s))  # the arg's dim broadcast against the output's channels
        if at >= 0 and s[at] != 1:
            carrying.append(pos)
    return Rule(None, spatial_args=tuple(carrying)) if carrying else None


def _reduction(node: Node, dims: object) -> Rule | None:
    source = shape(node.args[0]) if node.args else None
    if source is None or not isinstance(dims, list | tuple) or not dims:
        return None  # no dim: a reduction over everything
    reduced = {int(d) % len(source) for d in dims}
    return Rule(None, spatial_args=(0,)) if reduced.isdisjoint({0, C}) else None


def _probed(node: Node) -> Rule | None:
    """An op of one activation (its other args constants: `adaptive_avg_pool2d` to 1x1, `flatten`)
    is channel-local when it does what a group needs: run on random values of the call's shape, its
    output on each group of channels (two groups, then three) is the same numbers as its output on
    the whole, sliced along C. An op mixing channels, or one whose args fix the channel count (a
    reshape's shape), gives other numbers or fails."""
    activations = [(pos, a) for pos, a in enumerate(node.args) if isinstance(a, Node)]
    source = shape(activations[0][1]) if len(activations) == 1 else None
    if source is None or len(source) < 2 or source[C] < 3 or len(node.all_input_nodes) != 1:
        return None
    pos, arg = activations[0]
    value = arg.meta.get("val")
    if not isinstance(value, torch.Tensor):
        return None
    generator = torch.Generator().manual_seed(0)
    if value.dtype.is_floating_point:
        x = torch.randn(source, generator=generator).to(value.dtype)
    else:
        x = torch.randint(-128, 128, source, generator=generator).to(value.dtype)

    def run(tensor: torch.Tensor) -> object:
        args = (*node.args[:pos], tensor, *node.args[pos + 1 :])
        return node.target(*args, **node.kwargs)  # type: ignore[operator]

    try:
        whole = run(x)
        if not isinstance(whole, torch.Tensor) or whole.dim() < 2 or whole.shape[C] != source[C]:
            return None
        for groups in (2, 3):
            parts = [run(x.narrow(C, lo, hi - lo)) for lo, hi in bands(source[C], groups)]
            if not torch.equal(torch.cat(parts, dim=C), whole):  # type: ignore[arg-type]
                return None
    except (RuntimeError, TypeError, ValueError):
        return None
    return Rule(None, spatial_args=(pos,))


def channel_region(index: GraphIndex, start: Node, end: Node, below: int) -> Region | None:
    """The region from `start` to `end` computed per group of channels, or None if it is not one: every
    op channel-local with the start's channel count, every channel-carrying arg the start or an op of
    the region, nothing but `end` read outside it."""
    channels = (shape(start) or (0, 0))[C]
    members = index.members(start, end, below)
    if not members or channels < 2:
        return None
    inside = set(members)
    rules: dict[Node, Rule] = {}
    for node in members:
        r = channel_rule(node)
        if r is None or shape(node)[C] != channels:  # type: ignore[index]
            return None
        if any(node.args[pos] is not start and node.args[pos] not in inside for pos in r.spatial_args):
            return None
        if node is not end and any(u not in inside for u in node.users):
            return None
        rules[node] = r
    return Region(start, end, tuple(members), rules, axis=C)


def channel_schedule(region: Region, groups: int) -> list[Piece] | None:
    """Per group of channels: the start's slice, then every op of the region on it; last, the cat of
    the end's groups along C. None when there are fewer channels than groups."""
    channels = shape(region.start)[C]  # type: ignore[index]
    if groups > channels:
        return None
    pieces: list[Piece] = []
    ends = []
    for lo, hi in bands(channels, groups):
        made = {region.start: len(pieces)}
        pieces.append(Piece("slice", region.start, (lo, hi), (START,), cut=(lo, hi), axis=C))
        for node in region.nodes:
            args = {pos: made[node.args[pos]] for pos in region.rules[node].spatial_args}  # type: ignore[index]
            made[node] = len(pieces)
            pieces.append(Piece("op", node, (lo, hi), tuple(args.values()), args=args, axis=C))
        ends.append(made[region.end])
    pieces.append(Piece("cat", region.end, (0, channels), tuple(ends), axis=C))
    return pieces
