"""Reports built from what memplan has: a lowering (the pass's results and both programs) or a `.pte`.

A lowering knows the most: every tensor's node, so its op and the user's source line (the node's
`stack_trace`), and what memplan's levers did to it. ExecuTorch's stock plan is read off the program
lowered with its own `MemoryPlanningPass` (each TensorSpec's mem_id, offset and lifetime), so it is
the plan ExecuTorch writes, not a replica. A `.pte` alone knows its layout and its instructions
(memplan.planner.pte); its source lines are not in the file, and the plan it is compared with is
memplan's re-plan of the problem derived from it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

import torch
import torch.utils._pytree as pytree
from executorch.exir import memory
from executorch.exir.tensor import TensorSpec

from memplan.peak_bound import lower_bound
from memplan.plan import Plan
from memplan.planner.pte.layout import MethodLayout, ProgramLayout
from memplan.problem import BufferKind, Problem
from memplan.viz.report.explain import actions_of, lever_notes
from memplan.viz.report.instructions import execution_plan, lowered_instructions, pte_instructions
from memplan.viz.report.model import (
    BankedPlan,
    BankUse,
    MethodReport,
    PlanView,
    ProgramReport,
    TensorInfo,
)

_FRAME = re.compile(r'File "([^"]+)", line (\d+), in (\S+)\n\s*(.*)')
_LIBRARY = ("/site-packages/", "/dist-packages/", "/lib/python3")


def source_line(stack_trace: str | None) -> str:
    """The user's line in a node's stack trace: the innermost frame outside installed libraries
    ("model.py:12 in forward: return x.relu()"); the innermost frame if all are library frames."""
    frames = _FRAME.findall(stack_trace or "")
    if not frames:
        return ""
    own = [f for f in frames if not any(part in f[0] for part in _LIBRARY)]
    path, line, function, code = (own or frames)[-1]
    return f"{path.rsplit('/', 1)[-1]}:{line} in {function}: {code.strip()}"


def _shape(spec: Any) -> str:
    return "x".join(map(str, getattr(spec, "shape", ()))) or "scalar"


def _dtype(spec: Any) -> str:
    return str(getattr(spec, "dtype", "")).replace("torch.", "")


def _node_index(graph_modules: Iterable[torch.fx.GraphModule]) -> dict[str, torch.fx.Node]:
    """Node name -> node over several graphs; later graphs win (memplan's after the stock one)."""
    found: dict[str, torch.fx.Node] = {}
    for gm in graph_modules:
        found.update({n.name: n for n in gm.graph.nodes})
    return found


def _op_name(node: torch.fx.Node | None, fallback: str) -> str:
    if node is None or node.op != "call_function":
        return fallback
    return str(getattr(node.target, "__name__", node.target))


def _info(
    name: str, start: int, end: int, nbytes: int, kind: str, spec: Any, node: Any, label: str, **extra: Any
) -> TensorInfo:
    return TensorInfo(
        name=name,
        op=_op_name(node, label),
        shape=_shape(spec) if spec is not None else "",
        dtype=_dtype(spec) if spec is not None else "",
        nbytes=nbytes,
        start=start,
        end=end,
        kind=kind,
        source=source_line(node.meta.get("stack_trace")) if node is not None else "",
        **extra,
    )


def _base_name(buffer_id: str) -> str:
    """The node a buffer id names ("getitem[1]" -> "getitem")."""
    return buffer_id.split("[", 1)[0]


def memplan_view(
    problem: Problem, plan: Plan, specs: Mapping[str, Any], nodes: Mapping[str, torch.fx.Node], label: str
) -> PlanView:
    """memplan's plan of one method, from the pass's problem and plan (group members inside parents)."""
    tensors, offsets = {}, {}
    for b in problem.buffers:
        parent = problem.parent_of(b.id)
        shared = b.kind is BufferKind.MUTABLE_STATE and b.offset is not None and b.pool != 1
        tensors[b.id] = _info(
            b.id,
            b.start,
            b.end,
            b.size,
            b.kind.value,
            specs.get(b.id),
            nodes.get(_base_name(b.id)),
            b.label,
            parent=parent[0] if parent else "",
            shared=shared,
        )
        offsets[b.id] = (plan.pools.get(b.id, b.pool), plan.offsets[b.id])
    pools = set(problem.pools) | {bank.pool for bank in problem.banks} | set(plan.arena_sizes)
    lanes = {pool: problem.pool_label(pool) for pool in pools}  # a bank's buffers list its first pool
    return PlanView(label, tensors, offsets, dict(plan.arena_sizes), lanes, lower_bound(problem))


def stock_view(exported: Any, label: str = "ExecuTorch (stock)") -> PlanView:
    """The plan ExecuTorch's own pass wrote into a lowered method: every planned TensorSpec."""
    gm = exported.graph_module
    signature = exported.graph_signature
    mutated = set(getattr(signature, "buffers_to_mutate", {}).values())
    buffers = getattr(signature, "inputs_to_buffers", {})
    outputs = {
        id(s)
        for n in gm.graph.nodes
        if n.op == "output"
        for arg in pytree.tree_leaves(n.args)
        if isinstance(arg, torch.fx.Node)
        for s in _specs(arg.meta.get("spec"))
    }
    seen: dict[int, str] = {}
    tensors: dict[str, TensorInfo] = {}
    offsets: dict[str, tuple[int, int]] = {}
    arenas: dict[int, int] = {}
    for node in gm.graph.nodes:
        if node.op == "call_function" and node.target is memory.alloc:
            continue
        specs = _specs(node.meta.get("spec"))
        for i, spec in enumerate(specs):
            if id(spec) in seen or spec.mem_id is None or spec.mem_offset is None or spec.lifetime[0] is None:
                continue
            name = node.name if len(specs) == 1 else f"{node.name}[{i}]"
            seen[id(spec)] = name
            if node.op == "placeholder":
                kind = (
                    BufferKind.MUTABLE_STATE if buffers.get(node.name) in mutated else BufferKind.GRAPH_INPUT
                )
            else:
                kind = BufferKind.GRAPH_OUTPUT if id(spec) in outputs else BufferKind.ACTIVATION
            nbytes = spec.allocated_memory
            start, end = spec.lifetime[0], spec.lifetime[1] + 1
            shared = kind is BufferKind.MUTABLE_STATE and spec.mem_id != 1  # share_mutable_buffers' arena
            tensors[name] = _info(name, start, end, nbytes, kind.value, spec, node, node.name, shared=shared)
            offsets[name] = (spec.mem_id, spec.mem_offset)
            arenas[spec.mem_id] = max(arenas.get(spec.mem_id, 0), spec.mem_offset + nbytes)
    sizes = gm.meta.get("non_const_buffer_sizes")
    if sizes:
        arenas = {i: s for i, s in enumerate(sizes) if i and s}
    return PlanView(label, tensors, offsets, arenas)


def _specs(value: Any) -> list[TensorSpec]:
    return [s for s in pytree.tree_leaves(value) if isinstance(s, TensorSpec)]


def from_lowered(
    name: str,
    results: Mapping[str, Any],
    program: Any,
    stock_program: Any | None,
    methods: Iterable[str],
    levers: Mapping[str, bool],
    solver: str,
) -> ProgramReport:
    """A report of a program lowered with `PlannerPass` (`results` is its `pass_.results`), next to the
    same model lowered with ExecuTorch's stock pass (`stock_program`, None to leave it out)."""
    layout = _program_layout(program.buffer)
    reports = []
    for method in methods:
        result = results[method]
        graphs = [program.exported_program(method).graph_module]
        stock = stock_program.exported_program(method) if stock_program is not None else None
        if stock is not None:
            graphs.insert(0, stock.graph_module)
        nodes = _node_index(graphs)
        plans = [memplan_view(result.problem, result.plan, result.specs, nodes, f"memplan ({solver})")]
        plans[0].lower_bound = result.lower_bound  # the emitted program's, when derived
        plans[0].proven, plans[0].not_proven_because = result.plan.proven_optimal, result.not_proven_because
        if stock is not None:
            plans.append(stock_view(stock))
        file_method = layout.methods.get(method) if layout else None
        emitted = program.exported_program(method)
        instructions = lowered_instructions(
            emitted, execution_plan(program.executorch_program, method), result.steps, plans[0].tensors, stock
        )
        reports.append(
            MethodReport(
                method,
                plans,
                actions=actions_of(result),
                notes=[n for n in (result.note,) if n] + lever_notes(levers, result),
                emitted=list(
                    program.exported_program(method).graph_module.meta.get("non_const_buffer_sizes", [])
                )
                or (file_method.arenas if file_method else []),
                state_bytes=_state_bytes(plans[0]),
                delegates=file_method.delegates if file_method else [],
                instructions=instructions,
            )
        )
    constants, delegate = _file_bytes(layout) if layout else (None, 0)
    return ProgramReport(
        name,
        reports,
        constants,
        delegate,
        dict(levers),
        "lowered with memplan's PlannerPass",
        pte=program.buffer,
    )


def banked_plan(results: Mapping[str, Any], program: Any, methods: Iterable[str]) -> BankedPlan:
    """What a program lowered with `PlannerPass(memory_map=...)` puts in each bank of the map: the arena
    the program holds for it (the largest method's), the traffic through it and the tensors in it."""
    methods = list(methods)
    banks = results[methods[0]].problem.banks
    used = []
    for bank in banks:
        size, moved, names = 0, 0, []
        for method in methods:
            result = results[method]
            emitted = program.exported_program(method).graph_module.meta.get("non_const_buffer_sizes", [])
            size = max(size, emitted[bank.pool] if bank.pool < len(emitted) else 0)
            moved += result.traffic.get(bank.pool, 0)
            names += [
                b.id
                for b in result.problem.buffers
                if result.problem.parent_of(b.id) is None
                and result.plan.pools.get(b.id, b.pool) == bank.pool
                and b.id not in names
            ]
        used.append(BankUse(bank.name, bank.capacity, size, moved, tuple(names)))
    return BankedPlan(tuple(used))


def _program_layout(data: bytes) -> ProgramLayout | None:
    """The built program read back (constants, delegates, arenas); None if memplan cannot read it."""
    from memplan.planner.pte.program import read_program
    from memplan.planner.pte.structure import PteError

    try:
        return read_program(data)
    except PteError:
        return None


def _state_bytes(plan: PlanView) -> int:
    return sum(t.nbytes for t in plan.roots() if t.kind == BufferKind.MUTABLE_STATE.value)


def _file_bytes(layout: ProgramLayout) -> tuple[int, int]:
    """(constant bytes, delegate blob bytes) the `.pte` holds."""
    program = layout.pte.program
    constants = sum(len(b.storage) for b in program.constant_buffer or [])
    named = layout.pte.named_data
    if named is not None:
        constants += sum(len(getattr(b, "buffer", b"")) for b in getattr(named, "buffers", []) or [])
    delegate = sum(len(d.data) for d in program.backend_delegate_data or [])
    return constants, delegate


# -- a .pte on its own ------------------------------------------------------------------------------


def from_pte(layout: ProgramLayout, solver: str, time_limit_s: float) -> ProgramReport:
    """A report of a built program: its own layout, next to memplan's re-plan of the derived problem."""
    from memplan import solvers

    reports = []
    for m in layout.methods.values():
        plans = [_file_view(m)]
        notes = [f"cannot derive lifetimes: {why}" for why in m.cannot] + list(m.notes)
        if m.problem is not None and m.problem.buffers:
            plan = solvers.solve(m.problem, solver, time_limit_s, fallback=True)
            plans.append(_replanned_view(m, plan, f"memplan re-plan ({plan.solver})"))
            plans[0].lower_bound = m.lower_bound
        plans[0].proven, plans[0].not_proven_because = _file_proof(m)
        notes.append("a .pte holds no source lines: export with the model (memplan report MODEL) to see them")
        reports.append(
            MethodReport(
                m.name,
                plans,
                notes=notes,
                emitted=list(m.arenas),
                state_bytes=sum(t.nbytes for t in m.tensors if t.role == "state"),
                delegates=list(m.delegates),
                instructions=pte_instructions(execution_plan(layout.pte.program, m.name), m),
            )
        )
    constants, delegate = _file_bytes(layout)
    return ProgramReport(
        layout.path or "program", reports, constants, delegate, {}, ".pte file", pte=layout.data
    )


_ROLE_KINDS = {
    "input": BufferKind.GRAPH_INPUT,
    "output": BufferKind.GRAPH_OUTPUT,
    "input+output": BufferKind.GRAPH_INPUT,
    "state": BufferKind.MUTABLE_STATE,
}


def _file_proof(m: MethodLayout) -> tuple[bool, str]:
    """Whether the file's own layout is proven optimal (its tensors' bytes at the lower bound), and why not."""
    if m.lower_bound is None:
        return False, f"lower bound unknown: {'; '.join(m.cannot) or 'no planned tensors'}"
    tensors = sum(m.arenas) - sum(m.slack.values())  # what the runtime adds past the tensors is not planned
    if tensors == m.lower_bound:
        return True, ""
    return (
        False,
        f"the file's arenas hold {tensors:,} B of tensors, above the lower bound {m.lower_bound:,} B",
    )


def _file_view(m: MethodLayout) -> PlanView:
    """The file's own placement of every planned tensor value ("v12"); aliases inside their block's first."""
    parent_of = _block_parents(m)
    span = _block_spans(m)
    tensors, offsets = {}, {}
    dead = set(m.dead)
    for t in m.tensors:
        if t.value in dead:  # never read or written: no bytes of the arena are its
            continue
        name = f"v{t.value}"
        start, end = span.get(name) or (
            (t.first, t.last + 1)
            if t.first is not None and t.last is not None
            else (0, max(m.num_instructions, 1))
        )
        tensors[name] = TensorInfo(
            name=name,
            op=t.writer,
            shape="x".join(map(str, t.shape)) or "scalar",
            dtype=t.dtype,
            nbytes=t.nbytes,
            start=start,
            end=max(end, start + 1),
            kind=_ROLE_KINDS.get(t.role, BufferKind.ACTIVATION).value,
            parent=parent_of.get(name, ""),
        )
        offsets[name] = (t.mem_id, t.offset)
    arenas = {i: s for i, s in enumerate(m.arenas) if i and s}
    return PlanView(
        "this file", tensors, offsets, arenas, {i: f"mem_id {i} · {d}" for i, d in m.devices.items()}
    )


def _block_parents(m: MethodLayout) -> dict[str, str]:
    """Each value that shares a block with others -> the block's first value (it stands for the block)."""
    parents = {}
    for values in m.members.values():
        first = f"v{values[0][0]}"
        parents.update({f"v{v}": first for v, _ in values[1:]})
    return parents


def _block_spans(m: MethodLayout) -> dict[str, tuple[int, int]]:
    """The first value of each block of the derived problem -> the block's lifetime."""
    if m.problem is None:
        return {}
    return {f"v{m.members[b.id][0][0]}": (b.start, b.end) for b in m.problem.buffers if b.id in m.members}


def _replanned_view(m: MethodLayout, plan: Plan, label: str) -> PlanView:
    """memplan's plan of the derived problem, value by value (a block's members at their offsets in it)."""
    assert m.problem is not None
    view = _file_view(m)
    offsets = {}
    for b in m.problem.buffers:
        for value, rel in m.members.get(b.id, []):
            offsets[f"v{value}"] = (plan.pools.get(b.id, b.pool), plan.offsets[b.id] + rel)
    tensors = {name: t for name, t in view.tensors.items() if name in offsets}
    arenas = {pool: size + m.slack.get(pool, 0) for pool, size in plan.arena_sizes.items()}
    return PlanView(label, tensors, offsets, arenas, view.lanes, lower_bound(m.problem))
