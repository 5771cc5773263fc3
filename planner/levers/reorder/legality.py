"""What an instruction reads and writes, and whether running it later changes anything but memory.

Derived from what the program does, not from a list of op names:

* an out-variant kernel may move when its schema writes only its `out` arguments and it is not
  tagged `nondeterministic_seeded` (moving one random op past another would change the draws each
  gets);
* a delegate call may move when none of its inputs is state or an input the method mutates (a
  backend may write those where they live);
* anything else (a `copy_` write-back, an in-place op, control flow, an op without a schema) stays
  where it is, and nothing moves across it when what it writes is not known.

`memory.alloc` nodes and `getitem`s are not instructions: they move with the instruction they
belong to (`unit`).
"""

from __future__ import annotations

import operator
from collections.abc import Iterable

import torch
from executorch.exir import memory
from executorch.exir.delegate import executorch_call_delegate
from executorch.exir.operator.convert import get_out_args_from_opoverload, unwrap_op_overload
from executorch.exir.tensor import TensorSpec
from torch.export.exported_program import ExportGraphSignature
from torch.utils._pytree import tree_flatten

from memplan.planner.levers.graph_facts import view_base
from memplan.planner.levers.write_window import written_specs

_NOT_INSTRUCTIONS = (memory.alloc, memory.view, operator.getitem)
_INERT = ("placeholder", "get_attr", "output")


def mutated_inputs(graph_module: torch.fx.GraphModule, signature: ExportGraphSignature) -> set[torch.fx.Node]:
    """The placeholders the method writes: mutable buffers and user inputs it mutates."""
    states = set(signature.buffers_to_mutate.values())
    inputs = set(signature.user_inputs_to_mutate.values())
    return {
        n
        for n in graph_module.graph.nodes
        if n.op == "placeholder"
        and (signature.inputs_to_buffers.get(str(n.target)) in states or str(n.target) in inputs)
    }


def unit(node: torch.fx.Node) -> list[torch.fx.Node]:
    """`node` with the `memory.alloc`s only it writes into (before it) and its `getitem`s (after)."""
    allocs = [
        a
        for a in arg_nodes(node)
        if a.op == "call_function" and a.target is memory.alloc and len(a.users) == 1
    ]
    getitems = [u for u in node.users if u.op == "call_function" and u.target is operator.getitem]
    return [*dict.fromkeys(allocs), node, *getitems]


def instruction_of(node: torch.fx.Node) -> torch.fx.Node:
    """The instruction whose unit holds `node` (a getitem's source; an alloc's writer; else itself)."""
    if node.op == "call_function" and node.target is operator.getitem:
        return node.args[0] if isinstance(node.args[0], torch.fx.Node) else node
    if node.op == "call_function" and node.target is memory.alloc and len(node.users) == 1:
        return next(iter(node.users))
    return node


def is_instruction(node: torch.fx.Node) -> bool:
    """True for a node the program runs (not an allocation, a view, a getitem or an input)."""
    return node.op == "call_function" and node.target not in _NOT_INSTRUCTIONS


def movable(node: torch.fx.Node, mutated: set[torch.fx.Node]) -> bool:
    """True if running `node` later (with its unit) changes only when its bytes are live."""
    if node.op != "call_function" or node.target in _NOT_INSTRUCTIONS or not node.users:
        return False
    if node.target is executorch_call_delegate:
        return not any(view_base(a) in mutated for a in arg_nodes(node))
    op = _op(node)
    if op is None or torch.Tag.nondeterministic_seeded in op.tags:
        return False
    try:
        out_args = set(get_out_args_from_opoverload(op))
    except AssertionError:  # not an out variant (copy_, in-place ops)
        return False
    written = {
        arg.name for arg in op._schema.arguments if arg.alias_info is not None and arg.alias_info.is_write
    }
    return bool(out_args) and written <= out_args


def reads(node: torch.fx.Node) -> set[int]:
    """id() of the TensorSpecs whose bytes `node` reads (views resolved to their base)."""
    return {id(s) for s in specs_of(view_base(a) for a in arg_nodes(node) if a.target is not memory.alloc)}


def writes(node: torch.fx.Node, mutated: set[torch.fx.Node]) -> set[int] | None:
    """id() of the TensorSpecs `node` writes; None when that is not known (nothing crosses it)."""
    if node.op in _INERT or node.target in _NOT_INSTRUCTIONS:
        return set()
    if node.target is executorch_call_delegate:
        state = [view_base(a) for a in arg_nodes(node) if view_base(a) in mutated]
        return {id(s) for s in specs_of([node, *state])}
    if _op(node) is None:
        return None
    return {id(s) for s in written_specs(node)}


def _op(node: torch.fx.Node) -> torch._ops.OpOverload | None:
    try:
        return unwrap_op_overload(node.target)
    except (TypeError, AttributeError):
        return None


def arg_nodes(node: torch.fx.Node) -> list[torch.fx.Node]:
    return [a for a in tree_flatten((node.args, node.kwargs))[0] if isinstance(a, torch.fx.Node)]


def specs_of(nodes: Iterable[torch.fx.Node]) -> list[TensorSpec]:
    found = tree_flatten([n.meta.get("spec") for n in nodes])[0]
    return [s for s in found if isinstance(s, TensorSpec)]
