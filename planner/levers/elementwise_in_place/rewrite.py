"""Carry out the decisions: the output of every shared instruction carries its input's TensorSpec.

That is how ExecuTorch marks storage two nodes share: the planner sees one tensor living from the
input's producer to the output's last reader, and the emitter gives every node carrying the spec one
value, so the kernel (or delegate) is called with its output being its input. The spec is set on
every node naming the output's: the op (or the delegate call's list of output specs), its getitem
and its `memory.alloc` out= node; a node left with the old spec would be emitted as a separate value
that nobody reads.
"""

from __future__ import annotations

import operator
from collections.abc import Sequence

import torch
from executorch.exir.delegate import executorch_call_delegate
from executorch.exir.tensor import TensorSpec

from memplan.errors import ProblemError
from memplan.planner.levers.elementwise_in_place.analysis import InPlace, alloc_of


class InPlaceRewriteError(ProblemError):
    """The graph no longer matches the decisions; the message names the node."""


def rewrite(graph_module: torch.fx.GraphModule, decisions: Sequence[InPlace]) -> int:
    """Share the specs the decisions say; returns how many instructions now write over an input."""
    nodes = {n.name: n for n in graph_module.graph.nodes}

    def node(name: str) -> torch.fx.Node:
        if name not in nodes:
            raise InPlaceRewriteError(f"elementwise in place: node {name!r} is no longer in the graph")
        return nodes[name]

    shared = 0
    for d in decisions:
        if d.shared:
            _give_spec(node(d.instruction), node(d.output), node(d.input).meta["spec"])
            shared += 1
    return shared


def _give_spec(instruction: torch.fx.Node, output: torch.fx.Node, spec: TensorSpec) -> None:
    old = output.meta["spec"]
    if instruction.target is executorch_call_delegate:
        specs = instruction.meta["spec"]
        instruction.meta["spec"] = type(specs)(spec if s is old else s for s in specs)
        for user in instruction.users:
            if user.target is operator.getitem and user.meta.get("spec") is old:
                user.meta["spec"] = spec
        return
    instruction.meta["spec"] = spec
    alloc = alloc_of(instruction)
    if alloc is not None:
        alloc.meta["spec"] = spec
