"""Mutable state shared by the methods of one program, at one offset in mem_id 2.

In the ExecuTorch runtime the host-only methods of a program share one set of
arenas (see `executorch.runtime.Program.load_method`), so state kept in a
method's activation arena would be overwritten by another method's
activations. As with `MemoryPlanningPass(share_mutable_buffers=True)`, every
buffer FQN that some method mutates gets one offset in an extra arena (mem_id
2) that no method plans activations into, and every method that touches that
FQN, mutating it or only reading it, is pointed at that offset. The emitter
then treats a read-only appearance as mutable state because it has a mem_id
and offset (`_emitter.py`, `placeholder`).

Unlike upstream, the layout covers every method planned in one `to_executorch`
call, also in the per-method dict form where each method has its own pass
instance: methods register in a per-thread `Session`, and the first
`run_multimethod()` call lays out the union of FQNs once.
"""

from __future__ import annotations

import dataclasses
import math
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import torch
from executorch.exir.memory_planning import get_node_tensor_specs
from torch.export.exported_program import ExportedProgram, ExportGraphSignature

from memplan.errors import SharedStatePolicyError
from memplan.plan import Outcome, Plan
from memplan.planner.compat import ExportContext
from memplan.planner.graph.extract import StateRef, state_buffers
from memplan.planner.memory.bank_maps import state_pool as banked_state_pool
from memplan.planner.memory.instruction_traffic import argument_bytes, argument_counts
from memplan.planner.stages.verify import verify_storage_reuse
from memplan.problem import Buffer, BufferKind, Problem, SameOffset
from memplan.validate import check_plan

STATE_POOL = 2  # the arena after ExecuTorch's default activation arena (mem_id 1)


@dataclass
class MethodState:
    """One planned method as the shared layout needs it."""

    method: str
    graph_module: torch.fx.GraphModule
    graph_signature: ExportGraphSignature | None
    refs: list[StateRef]
    num_nodes: int
    alignment: int
    shared: bool  # planned with share_mutable_buffers (state left out of its own plan)
    flags: tuple[bool, bool]  # alloc_graph_input, alloc_graph_output (for the Verifier)
    owner: Any  # the PlannerPass that planned it; its results get the state buffers
    state_pool: int = STATE_POOL  # under a memory map: one past every arena the map or a pin uses


@dataclass
class SharedLayout:
    """The FQN -> offset layout of mem_id 2 and the joint problem it solves."""

    offsets: dict[str, int]
    sizes: dict[str, int]
    arena: int
    problem: Problem
    plan: Plan
    pool: int = STATE_POOL  # the arena holding the state


@dataclass
class Session:
    """Methods planned in one `to_executorch` call (identified by `key`)."""

    key: Any
    methods: dict[str, MethodState] = field(default_factory=dict)
    layout: SharedLayout | None = None
    done: bool = False


_local = threading.local()


def current_session(key: Any, method: str) -> Session:
    """The session `method` belongs to, starting a new one when the export changed.

    `key` identifies the `to_executorch` call (its dict of execution programs,
    held here so the identity cannot be reused while the session lives). A
    finished session, another key, or a method name seen before all start a
    new session.
    """
    session: Session | None = getattr(_local, "session", None)
    if session is None or session.done or session.key is not key or method in session.methods:
        session = Session(key)
        _local.session = session
    return session


def shares(
    alloc_mutable_buffers: bool, share_mutable_buffers: bool | None, context: ExportContext | None
) -> bool:
    """Whether a method's state is shared across the program's methods: as asked, else exactly when the
    program has more than one method (`share_mutable_buffers=None`)."""
    if not alloc_mutable_buffers:
        return False
    if share_mutable_buffers is not None:
        return share_mutable_buffers
    return context is not None and context.num_methods > 1


def register(
    owner: Any,
    key: Any,
    method: str,
    graph_module: torch.fx.GraphModule,
    graph_signature: ExportGraphSignature,
    shared: bool,
) -> None:
    """Record `method`, just planned by `owner` (a PlannerPass: its alignment, flags, memory map and
    `results[method]` are read), in the session of export `key` for `run_multimethod`;
    `graph_signature` is read only from here on."""
    memory_map = owner.algorithm.memory_map
    current_session(key, method).methods[method] = MethodState(
        method=method,
        graph_module=graph_module,
        graph_signature=graph_signature,
        refs=state_buffers(graph_module, graph_signature, unplaced=shared),
        num_nodes=len(graph_module.graph.nodes),
        alignment=owner.alignment,
        shared=shared,
        flags=(owner.alloc_graph_input, owner.alloc_graph_output),
        owner=owner,
        state_pool=(
            STATE_POOL if memory_map is None else banked_state_pool(memory_map, owner.results[method].problem)
        ),
    )


def finish_session() -> Session | None:
    """The open session, marked done (later `run_multimethod` calls are no-ops)."""
    session: Session | None = getattr(_local, "session", None)
    if session is None or session.done:
        return None
    session.done = True
    session.key = None  # drop the reference to the export's programs
    return session


def lay_out(session: Session) -> SharedLayout | None:
    """Place the union of mutated FQNs in mem_id 2 and point every method at it."""
    shared = [m for m in session.methods.values() if m.shared]
    mutated_anywhere = {r.fqn for m in session.methods.values() for r in m.refs if r.mutable}
    mutated = sorted({r.fqn for m in shared for r in m.refs} & mutated_anywhere)
    _reject_unshared(session, mutated)
    if not mutated:
        return None
    alignment = math.lcm(*(m.alignment for m in shared))
    sizes = _sizes(shared, mutated, alignment)
    offsets, arena = {}, 0
    for fqn in mutated:
        offsets[fqn] = arena
        arena += sizes[fqn]
    pool = max(m.state_pool for m in shared)
    problem, plan = joint_problem(shared, mutated, offsets, sizes, alignment, arena, pool)
    check_plan(problem, plan)  # before any TensorSpec is touched
    slot = {fqn: i for i, fqn in enumerate(mutated)}
    for m in shared:
        for ref in m.refs:
            if ref.fqn in offsets:
                ref.spec.mem_id = pool
                ref.spec.mem_offset = offsets[ref.fqn]
                ref.spec.mem_obj_id = slot[ref.fqn]
        bufsizes = m.graph_module.meta["non_const_buffer_sizes"]
        if len(bufsizes) > pool:
            raise SharedStatePolicyError(
                f"method {m.method!r}: shared state goes to mem_id {pool}, but the method's"
                f" own plan already uses arenas {bufsizes}; only mem_id 1 may be used with"
                " share_mutable_buffers (or plan with a memory map)"
            )
        bufsizes.extend([0] * (pool - len(bufsizes)) + [arena])  # in place: the program's meta holds it
    for m in shared:
        _verify_with_state(m)
    return SharedLayout(offsets, sizes, arena, problem, plan, pool)


def share_layout(session: Session, layout: SharedLayout) -> None:
    """Tell every method sharing the state where it sits: each owner pass's `shared_state`, and its
    result's problem, plan, traffic, specs and buffer sizes with the state in them."""
    for m in session.methods.values():
        if not m.shared:
            continue
        m.owner.shared_state = layout
        res = m.owner.results[m.method]
        res.problem, res.plan = with_state(res.problem, res.plan, m, layout)
        shared = {r.node: r.spec for r in m.refs if r.fqn in layout.offsets}
        moved = sum(argument_bytes(shared, m.graph_module.graph.nodes).values())
        res.traffic = {**res.traffic, layout.pool: res.traffic.get(layout.pool, 0) + moved}
        res.specs.update(shared)
        res.buffer_sizes = list(m.graph_module.meta["non_const_buffer_sizes"])


def check_default_mem_ids(graph_module: torch.fx.GraphModule) -> None:
    """Shared state takes mem_id 2, so a sharing method may not use other arenas itself."""
    elsewhere = sorted(
        {
            f"{node.name} (mem_id {spec.mem_id})"
            for node in graph_module.graph.nodes
            for spec in get_node_tensor_specs(node)
            if spec.mem_id not in (None, 1)
        }
    )
    if elsewhere:
        raise SharedStatePolicyError(
            f"shared mutable state goes to mem_id {STATE_POOL}, so tensors of a sharing method must use"
            f" mem_id 1, but an earlier pass placed {', '.join(elsewhere[:10])}; plan with"
            " share_mutable_buffers=False or keep those tensors in mem_id 1"
        )


def joint_problem(
    methods: list[MethodState],
    fqns: list[str],
    offsets: dict[str, int],
    sizes: dict[str, int],
    alignment: int,
    arena: int,
    pool: int = STATE_POOL,
) -> tuple[Problem, Plan]:
    """The program-wide problem of mem_id 2, with the layout as its plan.

    Methods run one at a time, so each gets its own time window; state
    persists across calls, so every FQN is live in every window. One
    `SameOffset` per FQN ties its per-method copies together.
    """
    buffers, start = [], 0
    for m in methods:
        for fqn in fqns:
            buffers.append(
                Buffer(
                    id=f"{m.method}:{fqn}",
                    start=start,
                    end=start + m.num_nodes,
                    size=sizes[fqn],
                    alignment=alignment,
                    offset=offsets[fqn],
                    pool=pool,
                    kind=BufferKind.MUTABLE_STATE,
                    label=fqn,
                )
            )
        start += m.num_nodes
    same = (
        [SameOffset(tuple(f"{m.method}:{fqn}" for m in methods)) for fqn in fqns] if len(methods) > 1 else []
    )
    problem = Problem(tuple(buffers), same_offsets=tuple(same), name="shared state")
    plan = Plan(
        offsets={b.id: offsets[b.label] for b in buffers},
        arena_sizes={pool: arena},
        solver="shared-state layout",
        lower_bound=arena,
        outcome=Outcome.OPTIMAL,
    )
    return problem, plan


def with_state(problem: Problem, plan: Plan, m: MethodState, layout: SharedLayout) -> tuple[Problem, Plan]:
    """A method's problem and plan extended by the mem_id-2 state buffers (for plots)."""
    node_of = {r.fqn: r.node for r in m.refs}
    counts = argument_counts({r.node: r.spec for r in m.refs}, m.graph_module.graph.nodes)
    extra, offsets = [], dict(plan.offsets)
    for fqn, off in layout.offsets.items():
        bid = node_of.get(fqn, f"state:{fqn}")
        extra.append(
            Buffer(
                id=bid,
                start=0,
                end=m.num_nodes,
                size=layout.sizes[fqn],
                alignment=m.alignment,
                offset=off,
                pool=layout.pool,
                kind=BufferKind.MUTABLE_STATE,
                label=fqn,
                accesses=counts.get(bid, 0),
            )
        )
        offsets[bid] = off
    new_problem = dataclasses.replace(problem, buffers=problem.buffers + tuple(extra))
    new_plan = dataclasses.replace(
        plan, offsets=offsets, arena_sizes={**plan.arena_sizes, layout.pool: layout.arena}
    )
    check_plan(new_problem, new_plan)
    return new_problem, new_plan


def reject_foreign_planners(session: Session, programs: Mapping[str, ExportedProgram] | None) -> None:
    """Every method touching shared state must have been planned here (by a PlannerPass).

    In the per-method dict form a method without an entry gets ExecuTorch's
    default pass, which keeps state in its own arena 1: its copy of the state
    would silently part from everyone else's.
    """
    if not programs or not any(m.shared for m in session.methods.values()):
        return
    touched = {r.fqn for m in session.methods.values() if m.shared for r in m.refs}
    mutated = {r.fqn for m in session.methods.values() for r in m.refs if r.mutable}
    for method, program in programs.items():
        if method in session.methods:
            continue
        signature = program.graph_signature
        uses = set(signature.inputs_to_buffers.values())
        clash = sorted((uses & mutated & touched) | (set(signature.buffers_to_mutate.values()) & touched))
        if clash:
            raise SharedStatePolicyError(
                f"method {method!r} was planned by another pass but uses state {clash} that"
                " PlannerPass shares across methods; give every method a PlannerPass"
            )


def _sizes(methods: list[MethodState], fqns: list[str], alignment: int) -> dict[str, int]:
    sizes: dict[str, int] = {}
    seen_at: dict[str, str] = {}
    for m in methods:
        for ref in m.refs:
            if ref.fqn not in fqns:
                continue
            size = ref.spec.realign(alignment)
            where = f"{m.method}:{ref.node}"
            if ref.fqn in sizes and sizes[ref.fqn] != size:
                raise SharedStatePolicyError(
                    f"buffer {ref.fqn!r} has {sizes[ref.fqn]} bytes in {seen_at[ref.fqn]} but"
                    f" {size} bytes in {where}; methods sharing state must agree on its shape"
                )
            sizes.setdefault(ref.fqn, size)
            seen_at.setdefault(ref.fqn, where)
    return sizes


def _reject_unshared(session: Session, mutated: list[str]) -> None:
    """A method planned without sharing must not touch state another method shares."""
    for m in session.methods.values():
        if m.shared:
            continue
        clash = sorted({r.fqn for r in m.refs} & set(mutated))
        if clash:
            raise SharedStatePolicyError(
                f"method {m.method!r} was planned with share_mutable_buffers=False but uses"
                f" shared state {clash}; plan every method of the program with the same setting"
            )


def _verify_with_state(m: MethodState) -> None:
    """ExecuTorch's storage-reuse check over the method's tensors, state included."""
    alloc_in, alloc_out = m.flags
    verify_storage_reuse(
        m.graph_module,
        m.graph_signature,
        alloc_graph_input=alloc_in,
        alloc_graph_output=alloc_out,
        alloc_mutable_buffers=True,
    )
