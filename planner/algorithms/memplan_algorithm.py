"""memplan's solvers with ExecuTorch's algorithm signature, for the stock `MemoryPlanningPass`.

    MemoryPlanningPass(MemoryPlanningAlgorithmSuite(algo_list=[MemplanAlgorithm("cpsat"), greedy]))

`apply_algo` hands an algorithm the specs to place (lifetimes already set,
already filtered by the alloc flags and split by device) and the graph; the
algorithm returns a `MemoryAlgoResult` (mem_id, mem_obj_id, offset per spec
and the arena sizes) and the suite writes the winner into the specs. Here the
specs become a `Problem` (a tensor living inside another's storage becomes a
group member, submodule reservations fixed buffers at offset 0), a memplan
solver plans it with its fallbacks, and the plan is validated before it is
returned. Only what the stock pass hands over is planned: no cat fusion, no
state in place (those need `PlannerPass`).
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from collections.abc import Iterable
from typing import Any

import torch
from executorch.exir.memory_planning import MemoryAlgoResult, SpecAllocResult
from executorch.exir.tensor import TensorSpec
from torch.export.exported_program import ExportGraphSignature

from memplan import solvers
from memplan.errors import ExtractionError
from memplan.plan import Outcome, Plan
from memplan.planner.graph.extract import DEFAULT_POOL, buffer_names
from memplan.planner.graph.shared_slots import shared_slots
from memplan.problem import Buffer, BufferKind, ContiguousGroup, Problem


class MemplanAlgorithm:
    """A memplan solver as an ExecuTorch memory-planning algorithm (see the module docstring)."""

    def __init__(
        self,
        solver: str = solvers.DEFAULT_SOLVER,
        time_limit_s: float | None = solvers.DEFAULT_TIME_LIMIT_S,
        solver_options: dict[str, Any] | None = None,
    ) -> None:
        solvers.entry(solver).make_params(dict(solver_options or {}))  # bad names fail here, not mid-export
        self.solver = solver
        self.time_limit_s = time_limit_s
        self.solver_options = dict(solver_options or {})
        self.__name__ = f"memplan_{solver}"  # what MemoryPlanningAlgorithmSuite reports

    def __repr__(self) -> str:
        return f"MemplanAlgorithm({self.solver!r}, time_limit_s={self.time_limit_s})"

    def __call__(
        self,
        alignment: int,
        specs: Iterable[TensorSpec],
        graph_module: torch.fx.GraphModule,
        graph_signature: ExportGraphSignature | None = None,
        extra_padding: int = 0,
    ) -> MemoryAlgoResult:
        specs = list(specs)
        reserved = list(getattr(graph_module, "input_mem_buffer_sizes", None) or [])
        problem, spec_of = problem_of_specs(specs, alignment, reserved, graph_module)
        if solvers.makes_shared_objects(self.solver):  # its plans keep the form: the validator checks they do
            problem = dataclasses.replace(problem, shared_objects=True)
        plan = (
            solvers.solve(problem, self.solver, self.time_limit_s, fallback=True, **self.solver_options)
            if problem.buffers
            else Plan({}, {}, self.solver, outcome=Outcome.OPTIMAL)
        )
        return algo_result(problem, plan, spec_of, specs, extra_padding)


def problem_of_specs(
    specs: list[TensorSpec], alignment: int, reserved: list[int], graph_module: torch.fx.GraphModule
) -> tuple[Problem, dict[str, TensorSpec]]:
    """The specs (of positive size) as a `Problem`, and buffer id -> spec.

    Ids are node names as in `extract`; a tensor inside another's storage is a group member.
    """
    names = buffer_names(list(graph_module.graph.nodes), None)
    planned = set(specs)
    ids = {spec: names.get(spec, (f"tensor{i}", ""))[0] for i, spec in enumerate(specs)}
    spec_of: dict[str, TensorSpec] = {}
    buffers = []
    members: dict[str, list[tuple[str, int]]] = defaultdict(list)
    for spec in specs:
        spec.realign(alignment)
        if spec.allocated_memory == 0:
            continue
        bid = ids[spec]
        spec_of[bid] = spec
        if spec.storage_base is not None:
            if spec.storage_base not in planned:
                raise ExtractionError(f"{bid}: its storage_base is not among the specs to plan")
            members[ids[spec.storage_base]].append((bid, spec.storage_base_offset))
        start, end = spec.lifetime
        buffers.append(Buffer(bid, start, end + 1, spec.allocated_memory, alignment, pool=_pool(_root(spec))))
    end = 1 + max((b.end for b in buffers), default=0)
    for pool, size in enumerate(reserved):
        if pool >= DEFAULT_POOL and size > 0:
            buffers.append(
                Buffer(f"submodules@mem_id{pool}", 0, end, size, alignment, 0, pool, BufferKind.SUBMODULE)
            )
    groups = tuple(ContiguousGroup(parent, tuple(ms)) for parent, ms in members.items())
    return Problem(tuple(buffers), groups, name=graph_module.__class__.__name__), spec_of


def algo_result(
    problem: Problem, plan: Plan, spec_of: dict[str, TensorSpec], specs: list[TensorSpec], extra_padding: int
) -> MemoryAlgoResult:
    """The plan as ExecuTorch's `MemoryAlgoResult`: arena sizes as `greedy` reports them (index 0 unused)."""
    slots = shared_slots(problem, plan.offsets)
    result = MemoryAlgoResult({}, [])
    for bid, spec in spec_of.items():
        result.spec_dict[spec] = SpecAllocResult(problem.buffer(bid).pool, slots[bid], plan.offsets[bid])
    next_slot = max(slots.values(), default=-1) + 1
    by_spec = {id(spec): result.spec_dict[spec] for spec in spec_of.values()}
    for spec in specs:
        if spec.allocated_memory:
            continue
        base = by_spec.get(id(spec.storage_base)) if spec.storage_base is not None else None
        offset = base.mem_offset + spec.storage_base_offset if base else 0
        result.spec_dict[spec] = SpecAllocResult(base.mem_id if base else _pool(spec), next_slot, offset)
        next_slot += 1
    used = {a.mem_id for a in result.spec_dict.values()} | set(plan.arena_sizes)
    if not used:
        result.bufsizes = [0, 0]
        return result
    sizes = [0] * (max(used) + 1)
    for pool in used:
        sizes[pool] = plan.arena_sizes.get(pool, 0) + extra_padding
    result.bufsizes = sizes
    return result


def _root(spec: TensorSpec) -> TensorSpec:
    while spec.storage_base is not None:
        spec = spec.storage_base
    return spec


def _pool(spec: TensorSpec) -> int:
    return DEFAULT_POOL if spec.mem_id is None else spec.mem_id
