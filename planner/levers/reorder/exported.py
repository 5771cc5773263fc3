"""The order the program was exported in, given back to a lowered graph.

`to_edge` numbers every node in graph order (`meta["debug_handle"]`); lowering keeps those numbers
on the nodes it leaves alone and on the nodes inside each delegate's `original_module`, while
`legalize_graph` re-sorts the graph around them (package docstring). A delegate then stands where
its last node stood, and a topological sort that always runs the ready instruction with the lowest
number rebuilds the order the tiler (or the user) wrote: every band's slices, convolutions and
quantizes together again, where sinking one instruction at a time (`sink`) can only follow the
first user of each.

Only graphs whose every instruction is `movable` get this order (nothing with side effects then
changes place relative to anything); a graph with a node that carries no number keeps its order.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence

import torch
from executorch.exir import memory
from executorch.exir.delegate import executorch_call_delegate

from memplan.planner.levers.reorder.legality import arg_nodes, is_instruction, movable

_FIRST, _LAST = -1.0, float("inf")


def exported_order(nodes: Sequence[torch.fx.Node], mutated: set[torch.fx.Node]) -> list[torch.fx.Node] | None:
    """`nodes` in the order their debug handles give, or None when that order is not known or not legal."""
    keys: dict[torch.fx.Node, float] = {}
    for node in nodes:
        if is_instruction(node):
            handle = _handle(node)
            if handle is None or not movable(node, mutated):
                return None
            keys[node] = handle
    for node in nodes:  # what is not an instruction runs as its instruction does
        if node in keys:
            continue
        if node.op in ("placeholder", "get_attr"):
            keys[node] = _FIRST
        elif node.op == "output":
            keys[node] = _LAST
        elif node.op == "call_function" and node.target is memory.alloc:
            keys[node] = min((keys.get(u, _LAST) for u in node.users), default=_LAST)
        else:  # getitem, memory.view: right after what they read
            keys[node] = max((keys.get(a, _FIRST) for a in arg_nodes(node)), default=_FIRST)
    return _sorted(nodes, keys)


def _handle(node: torch.fx.Node) -> float | None:
    """The debug handle of `node`, or for a delegate call the highest of the nodes it runs."""
    if node.target is not executorch_call_delegate:
        handle = node.meta.get("debug_handle")
        return float(handle) if isinstance(handle, int) else None
    lowered = node.args[0]
    if not isinstance(lowered, torch.fx.Node) or lowered.op != "get_attr":
        return None
    module = getattr(node.graph.owning_module, str(lowered.target), None)
    original = getattr(module, "original_module", None)
    if original is None:
        return None
    handles = [
        n.meta["debug_handle"]
        for n in original.graph.nodes
        if n.op == "call_function" and isinstance(n.meta.get("debug_handle"), int)
    ]
    return float(max(handles)) if handles else None


def _sorted(nodes: Sequence[torch.fx.Node], keys: dict[torch.fx.Node, float]) -> list[torch.fx.Node]:
    """Kahn's sort of `nodes`, the ready node with the lowest (key, current place) first."""
    place = {n: i for i, n in enumerate(nodes)}
    waiting = {n: len(set(arg_nodes(n))) for n in nodes}
    ready = [(keys[n], place[n], n) for n in nodes if waiting[n] == 0]
    heapq.heapify(ready)
    order: list[torch.fx.Node] = []
    while ready:
        _, _, node = heapq.heappop(ready)
        order.append(node)
        for user in node.users:
            waiting[user] -= 1
            if waiting[user] == 0:
                heapq.heappush(ready, (keys[user], place[user], user))
    return order
