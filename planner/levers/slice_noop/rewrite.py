"""Remove the no-op slices from a planned graph (the second half of slice no-ops).

Runs after the plan is in the TensorSpecs. Each removed op's output already
has a planned `memory.alloc` node (its `out=` argument, or one per piece of a
split) that the emitter turns into a tensor value without an instruction,
placed inside the input's bytes. The op's users (a split's `getitem`s' users)
are pointed at those nodes and the op is deleted: consumers read the input's
bytes. The specs are told the truth for ExecuTorch's `Verifier`: each output's
`storage_base` is its input, and the input lives as long as the plan assumed.
"""

from __future__ import annotations

import operator
from typing import cast

import torch
from executorch.exir.tensor import TensorSpec

from memplan.errors import PlanningError
from memplan.planner.levers.slice_noop.decisions import SliceNoops


class SliceRewriteError(PlanningError):
    """The graph no longer matches the slice decisions; the message names the node."""


def remove_noop_slices(
    graph_module: torch.fx.GraphModule, noops: SliceNoops, spec_of: dict[str, TensorSpec]
) -> int:
    """Record the placements in the specs and delete the no-op ops; returns how many went."""
    for d in noops.removed:
        spec = spec_of[d.output]
        spec.storage_base = spec_of[d.input]
        spec.storage_base_offset = d.offset
    before = {b.id: b for b in noops.problem_without.buffers}
    for buf in noops.problem.buffers:
        if (buf.start, buf.end) != (before[buf.id].start, before[buf.id].end):
            spec_of[buf.id].lifetime = [buf.start, buf.end - 1]
    graph = graph_module.graph
    nodes = {n.name: n for n in graph.nodes}
    removed = 0
    for name in noops.nodes_removed:
        node = nodes.get(name)
        if node is None:
            raise SliceRewriteError(f"slice no-ops: node {name!r} is no longer in the graph")
        out = node.kwargs.get("out")
        if isinstance(out, torch.fx.Node):
            _check_shares_spec(node, out, node.meta.get("spec"))
            node.replace_all_uses_with(out)
        else:
            pieces = cast(list[torch.fx.Node], out)
            for user in list(node.users):
                if user.target is not operator.getitem:
                    raise SliceRewriteError(f"slice no-ops: {name} is used by {user.name}, not a getitem")
                piece = pieces[cast(int, user.args[1])]
                _check_shares_spec(user, piece, user.meta.get("spec"))
                user.replace_all_uses_with(piece)
                graph.erase_node(user)
        graph.erase_node(node)
        removed += 1
    if removed:
        graph_module.recompile()
    return removed


def _check_shares_spec(node: torch.fx.Node, alloc: torch.fx.Node, spec: object) -> None:
    if alloc.meta.get("spec") is not spec:
        raise SliceRewriteError(f"slice no-ops: {node.name} has no memory.alloc out= node sharing its spec")
