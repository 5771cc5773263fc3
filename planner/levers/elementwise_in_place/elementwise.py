"""Whether an instruction computes its output elementwise from one of its inputs.

An op is elementwise when its functional overload (an out-variant kernel's counterpart) is tagged
`torch.Tag.pointwise` or derived so from its decomposition on the call's shapes and dtypes
(`planner.tiling.pointwise`: how the untagged per-tensor quantize and dequantize ops qualify, and a
per-channel one does not). A delegate is
elementwise in an input when every op of its original graph is, the input feeds exactly one of them
(an input read twice could be read again after the result has overwritten it inside a backend that
computes op by op into the output), and its backend is one whose runtime is tested with an output
aliasing an input (`tests/planner/levers/test_elementwise_in_place.py`): a backend may stage
its work in ways the graph does not show.
"""

from __future__ import annotations

import torch
from executorch.exir.delegate import executorch_call_delegate
from executorch.exir.operator.convert import get_out_args_from_opoverload, unwrap_op_overload

from memplan.planner.compat import is_inplace_node, is_out_var_node
from memplan.planner.tiling.pointwise import derived_pointwise

ALIAS_TESTED_BACKENDS = frozenset({"XnnpackBackend"})
"""Backends whose runtime gives the same results when a delegate's output is one of its inputs."""


def is_elementwise(node: torch.fx.Node) -> bool:
    """True if `node`'s op (ATen, edge or out-variant) computes element i of its output from element i
    of its inputs (broadcast ones aside), judged on the node's own argument shapes (`meta["val"]`)."""
    op = _overload(node.target)
    if op is None:
        return False
    functional = _functional(op)
    if torch.Tag.pointwise in functional.tags:
        return True
    names = [a.name for a in functional._schema.arguments]
    given = {**dict(zip(names, node.args, strict=False)), **node.kwargs}
    values = torch.fx.node.map_arg(given, lambda a: a.meta.get("val"))
    return derived_pointwise(functional, (), {k: v for k, v in values.items() if k in names})


def elementwise_inputs(node: torch.fx.Node, graph_module: torch.fx.GraphModule) -> tuple[torch.fx.Node, ...]:
    """The inputs of instruction `node` its output may overwrite: every tensor input of an
    elementwise out-variant op, the singly-read inputs of an elementwise delegate, else none."""
    if node.op != "call_function":
        return ()
    if node.target is executorch_call_delegate:
        return _delegate_inputs(node, graph_module)
    if is_inplace_node(node) or not is_out_var_node(node) or not is_elementwise(node):
        return ()
    out_args = set(get_out_args_from_opoverload(unwrap_op_overload(node.target)))
    inputs = [a for a in node.args if isinstance(a, torch.fx.Node)]
    inputs += [v for k, v in node.kwargs.items() if k not in out_args and isinstance(v, torch.fx.Node)]
    return tuple(dict.fromkeys(inputs))


def _delegate_inputs(node: torch.fx.Node, graph_module: torch.fx.GraphModule) -> tuple[torch.fx.Node, ...]:
    lowered = getattr(graph_module, str(node.args[0].target), None)  # type: ignore[union-attr]
    program = getattr(lowered, "original_module", None)
    if getattr(lowered, "backend_id", None) not in ALIAS_TESTED_BACKENDS or program is None:
        return ()
    graph = program.graph
    if not all(is_elementwise(n) for n in graph.nodes if n.op == "call_function"):
        return ()
    by_name = {n.name: n for n in graph.nodes if n.op == "placeholder"}
    placeholders = [by_name[name] for name in program.graph_signature.user_inputs]
    arguments = list(node.args[1:])
    if len(placeholders) != len(arguments):
        return ()
    return tuple(
        a
        for a, p in zip(arguments, placeholders, strict=True)
        if isinstance(a, torch.fx.Node) and len(p.users) == 1 and arguments.count(a) == 1
    )


def _overload(target: object) -> torch._ops.OpOverload | None:
    try:
        return unwrap_op_overload(target)
    except (TypeError, AttributeError, AssertionError):
        return None


def _functional(op: torch._ops.OpOverload) -> torch._ops.OpOverload:
    """The overload of `op`'s packet with `op`'s arguments but no `out` (op itself if it has none)."""
    out_args = set(get_out_args_from_opoverload(op)) if op._schema.is_mutable else set()
    if not out_args:
        return op
    wanted = [a.name for a in op._schema.arguments if a.name not in out_args]
    packet = op.overloadpacket
    for name in packet.overloads():
        candidate = getattr(packet, name)
        if not candidate._schema.is_mutable and [a.name for a in candidate._schema.arguments] == wanted:
            return candidate
    return op
