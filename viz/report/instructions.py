"""Each instruction of an emitted method, traced to the step it runs at in each plan of the report.

Plans count steps over the graph the planner saw (ExecuTorch's node index), the program runs
instructions; the levers remove nodes in between (a fused cat, a removed copy), so the two numberings
differ. The emitter records the instruction index of each node it emits in the node's
`meta["debug_handle"]` (exir.emit._emitter._add_debug_handle); memplan's pass records the node at each
of its steps (`results[method].steps`). Together they give the step of an instruction in memplan's
plan; the stock plan's steps are the stock graph's node indices (its pass removes no node). A `.pte`
alone has no graph: its plans count instructions, so an instruction's step is its own index.

Tools that show the emitted program (Model Explorer's ExecuTorch adapter) name instructions by chain
and index; `Instruction` keeps both.
"""

from __future__ import annotations

import operator
from collections.abc import Mapping, Sequence
from typing import Any

import torch
from executorch.exir import memory, schema

from memplan.planner.pte.layout import MethodLayout
from memplan.viz.report.model import Instruction

DELEGATE = "delegate "  # what a delegate call calls: "delegate XnnpackBackend"
_NOT_EMITTED = (operator.getitem, memory.alloc)  # nodes the emitter turns into values, not instructions


def execution_plan(program: schema.Program, method: str) -> schema.ExecutionPlan:
    """The execution plan of `method` in an emitted program."""
    (plan,) = [p for p in program.execution_plan if p.name == method]
    return plan


def instruction_ops(plan: schema.ExecutionPlan) -> list[tuple[int, int, str]]:
    """(chain, index, what it calls) for every instruction of an execution plan, in order."""
    found = []
    for c, chain in enumerate(plan.chains):
        for k, instruction in enumerate(chain.instructions):
            found.append((c, k, _called(plan, instruction.instr_args)))
    return found


def _called(plan: schema.ExecutionPlan, args: Any) -> str:
    if isinstance(args, schema.KernelCall):
        op = plan.operators[args.op_index]
        return f"{op.name}.{op.overload}" if op.overload else op.name
    if isinstance(args, schema.DelegateCall):
        return f"{DELEGATE}{plan.delegates[args.delegate_index].id}"
    return type(args).__name__


def _emitted_nodes(graph: torch.fx.Graph, ops: Sequence[tuple[int, int, str]]) -> dict[int, torch.fx.Node]:
    """Instruction position (over all chains) -> the node emitted there.

    The emitter's debug handles anchor most instructions. A node keeps its original handle when the
    emitter emits nothing for it, and that number can equal an instruction index, so only call_function
    nodes that emit are candidates, and only the one calling the instruction's operator. A node
    that came without a handle (made by a pass after the handles were given) is found by order: the
    first unused candidate calling the same operator between the anchors around its instruction.
    """
    nodes = [n for n in graph.nodes if n.op == "call_function" and n.target not in _NOT_EMITTED]
    by_handle: dict[int, list[int]] = {}
    for k, node in enumerate(nodes):
        if isinstance(node.meta.get("debug_handle"), int):
            by_handle.setdefault(node.meta["debug_handle"], []).append(k)
    found: dict[int, int] = {}
    for position, (_, _, called) in enumerate(ops):
        ks = by_handle.get(position, [])
        named = [k for k in ks if _calls(nodes[k], called)]
        if named:
            found[position] = named[0]
    used = set(found.values())
    for position, (_, _, called) in enumerate(ops):
        if position in found:
            continue
        low = max((k for p, k in found.items() if p < position), default=-1)
        high = min((k for p, k in found.items() if p > position), default=len(nodes))
        free = [k for k in range(low + 1, high) if k not in used and _calls(nodes[k], called)]
        if free:
            found[position] = free[0]
            used.add(free[0])
    return {position: nodes[k] for position, k in found.items()}


def _calls(node: torch.fx.Node, called: str) -> bool:
    """Whether `node` calls the instruction's operator ("aten::linear.out" ~ aten.linear.out; a
    delegate's id ~ executorch_call_delegate)."""
    if called.startswith(DELEGATE):
        return "call_delegate" in str(getattr(node.target, "__name__", node.target))
    return called.split("::")[-1].split(".")[0] in str(node.target)


def _outputs(node: torch.fx.Node, tensors: Mapping[str, Any]) -> tuple[str, ...]:
    """The tensors a node writes: its own buffer ids ("n", "n[1]"), or its getitems' (a delegate's)."""
    names = [node.name] + [u.name for u in node.users if u.target is operator.getitem]
    return tuple(t for t in tensors if t.split("[", 1)[0] in names)


def lowered_instructions(
    exported: Any,
    plan: schema.ExecutionPlan,
    memplan_steps: Sequence[str],
    tensors: Mapping[str, Any],
    stock: Any | None = None,
) -> list[Instruction]:
    """The instructions of one lowered method: `exported` is the program's ExportedProgram for it
    (after emission), `memplan_steps` the pass's `results[method].steps`, `tensors` memplan's plan's
    tensors by name, `stock` the same method lowered by the stock pass (None: no stock steps).

    An instruction whose node is not found (the emitter's own, e.g. a free) runs at the step of the
    instruction before it.
    """
    ops = instruction_ops(plan)
    nodes = _emitted_nodes(exported.graph_module.graph, ops)
    step_of = {name: i for i, name in enumerate(memplan_steps)}
    stock_of = {n.name: i for i, n in enumerate(stock.graph_module.graph.nodes)} if stock is not None else {}
    found: list[Instruction] = []
    step, stock_step = None, None
    for position, (chain, index, called) in enumerate(ops):
        node = nodes.get(position)
        name = node.name if node is not None else ""
        step = step_of.get(name, step)
        stock_step = stock_of.get(name, stock_step)
        outputs = _outputs(node, tensors) if node is not None else ()
        found.append(Instruction(chain, index, called, name, (step, stock_step), outputs))
    return found


def pte_instructions(plan: schema.ExecutionPlan, method: MethodLayout) -> list[Instruction]:
    """The instructions of a method read from a `.pte`: step = instruction index (the file's plans count
    instructions); outputs = the planned values it mentions first ("v12", the report's names), inputs
    and state left out (the caller and the previous call write those)."""
    first: dict[int, list[str]] = {}
    for t in method.tensors:
        if t.first is not None and t.role not in ("input", "input+output", "state"):
            first.setdefault(t.first, []).append(f"v{t.value}")
    return [
        Instruction(chain, index, called, "", (position, position), tuple(first.get(position, ())))
        for position, (chain, index, called) in enumerate(instruction_ops(plan))
    ]
