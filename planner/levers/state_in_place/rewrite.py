"""Carry out the write-back decisions on the graph, before memory planning.

IN_PLACE: the new value's out-variant op, its `memory.alloc` out= node and
every `memory.view` of it are given the state's own TensorSpec, the object
the placeholder carries. That is how ExecuTorch itself marks an in-place
op's result: the planner sees one tensor (the state, never freed), the
emitter gives every node sharing the spec one value, and the producer's
kernel is called with `out` = the state. The `copy_` is deleted; where the
output node named it, it now names the state's placeholder (the emitter
drops buffer-mutation outputs by position). State shared across methods
stays one TensorSpec per method, so the mem_id-2 layout
(`planner.stages.shared_state`) places the new value with it.

MOVED: the `copy_` is moved to right after its anchor, and the readers the
decision lists read the state instead of the new value. A `memory.view`
among them becomes a view of the state's TensorSpec (with every view of it):
the emitter places a view at its spec's bytes, and the new value's bytes are
free for reuse once the moved copy has read them.

Every write-back of a buffer, whatever its status: the output node's spec
entry for it becomes the state's TensorSpec (`outputs_name_the_state`).

Running before extraction means ExecuTorch's own lifetime analysis, cat
fusion and ExecuTorch's `Verifier` all see the program that will run.
"""

from __future__ import annotations

from typing import cast

import torch
from executorch.exir import memory
from executorch.exir.operator.convert import get_out_args_from_opoverload, unwrap_op_overload
from executorch.exir.tensor import TensorSpec

from memplan.errors import ProblemError
from memplan.planner.compat import ViewSpec
from memplan.planner.levers.refusals import Refusal
from memplan.planner.levers.state_in_place.analysis import StateStatus, WriteBack


class StateRewriteError(ProblemError):
    """The graph no longer matches the write-back decisions; the message names the node."""


def rewrite(graph_module: torch.fx.GraphModule, decisions: list[WriteBack]) -> int:
    """Apply every IN_PLACE and MOVED decision; return how many copy instructions were removed.

    Only the graph changes: its Python code is regenerated once by the pass
    (ExecuTorch's `insert_calls_to_free` recompiles after planning), not here.
    """
    graph = graph_module.graph
    nodes = {n.name: n for n in graph.nodes}

    def node(name: str) -> torch.fx.Node:
        if name not in nodes:
            raise StateRewriteError(f"state in place: node {name!r} is no longer in the graph")
        return nodes[name]

    removed = 0
    for d in decisions:
        copy, state, value = node(d.copy), node(d.state), node(d.value)
        if d.status is StateStatus.IN_PLACE:
            _share_state_spec(value, state)
            copy.replace_all_uses_with(state)
            graph.erase_node(copy)
            removed += 1
        elif d.status is StateStatus.MOVED:
            node(d.moved_after).append(copy)
            for reader in d.redirected:
                node(reader).replace_input_with(value, state)
                if _is_view_of(node(reader), state):
                    _views_share(node(reader), state.meta["spec"])
    return removed


def outputs_name_the_state(graph_module: torch.fx.GraphModule, decisions: list[WriteBack]) -> None:
    """Make the output node's spec entry of every buffer's write-back the state's spec.

    SpecPropPass gave the output node the spec each write-back result had then, a TensorSpec of
    its own. The emitted program returns the state at that position (the `copy_` result aliases
    it; an IN_PLACE write-back names the placeholder) and the emitter never reads the output
    node's spec, so that spec is written by nothing: planned, it is a tensor of its own, live at
    the last step next to the state it copies. Call after `rewrite`, only when graph outputs are
    planned (with `alloc_graph_output=False` ExecuTorch leaves every output spec, the state's
    included, unplanned). A mutated user input keeps its entry.
    """
    graph = graph_module.graph
    output = graph.output_node()
    args, specs = output.args[0], output.meta.get("spec")
    if not (isinstance(args, (tuple, list)) and isinstance(specs, (tuple, list)) and len(args) == len(specs)):
        return
    nodes = {n.name: n for n in graph.nodes}
    state_of: dict[torch.fx.Node, TensorSpec] = {}
    for d in decisions:
        if Refusal.USER_INPUT_MUTATION in d.reasons:
            continue
        spec = nodes[d.state].meta["spec"]
        state_of[nodes[d.state]] = spec
        if d.copy in nodes:  # the copy stays (KEPT, MOVED): its result aliases the state
            state_of[nodes[d.copy]] = spec
    named = [state_of.get(a, s) if isinstance(a, torch.fx.Node) else s for a, s in zip(args, specs)]
    output.meta["spec"] = type(specs)(named)


def _share_state_spec(value: torch.fx.Node, state: torch.fx.Node) -> None:
    """Give the value, its out= node and its views the state's TensorSpec."""
    spec = state.meta["spec"]
    old = value.meta["spec"]
    [out_arg] = get_out_args_from_opoverload(unwrap_op_overload(value.target))
    alloc = cast(torch.fx.Node, value.kwargs[out_arg])
    if alloc.meta.get("spec") is not old:
        raise StateRewriteError(f"state in place: {value.name}'s out= node {alloc.name} has another spec")
    value.meta["spec"] = spec
    alloc.meta["spec"] = spec
    for user in value.users:
        if _is_view_of(user, value):
            _views_share(user, spec)


def _is_view_of(node: torch.fx.Node, base: torch.fx.Node) -> bool:
    return node.op == "call_function" and node.target is memory.view and node.args[0] is base


def _views_share(view: torch.fx.Node, spec: TensorSpec) -> None:
    """Make `view`, and every view taken of it, a view of `spec` (each keeps its own shape)."""
    todo = [view]
    while todo:
        current = todo.pop()
        current.meta["spec"] = ViewSpec(spec, list(current.meta["spec"].shape))
        todo += [user for user in current.users if _is_view_of(user, current)]
