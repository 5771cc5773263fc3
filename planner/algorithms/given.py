"""Run the algorithm given to `PlannerPass` the way `apply_algo` runs it, and read its plan back.

The given algorithm (a `MemoryPlanningAlgorithmSuite` or any callable with
its signature) places the specs itself. It is called per device partition
with the same arguments and the same mem_id renumbering as ExecuTorch 1.5.1's
`apply_algo`; what it wrote is read back as a memplan `Plan` of the
extraction's problem (each tensor in the arena the algorithm chose), so the
independent validator checks it like any memplan plan. `placed_by` leaves the
specs as they were, so memplan can still plan them and the better plan wins.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from executorch.exir.tensor import TensorSpec
from torch.export.exported_program import ExportGraphSignature

from memplan.bank_placement import place_in_banks
from memplan.errors import InvalidPlanError, ProblemError
from memplan.plan import Outcome, Plan, arena_sizes_of
from memplan.planner.graph.extract import Extraction
from memplan.planner.memory.devices import CPU, DeviceArenas, device_of
from memplan.problem import Problem
from memplan.validate import check_plan


@dataclass(frozen=True)
class GivenPlan:
    """The given algorithm's plan: the problem with its arena choices, the plan, and its own arena sizes."""

    problem: Problem
    plan: Plan
    buffer_sizes: list[int]  # what the algorithm returned (`non_const_buffer_sizes` under stock)
    objects: list[tuple[TensorSpec, int | None]]  # the mem_obj_id it gave each spec


def placed_by(
    algorithm: Callable[..., Any],
    name: str,
    extraction: Extraction,
    graph_module: torch.fx.GraphModule,
    graph_signature: ExportGraphSignature | None,
    alignment: int,
    arenas: DeviceArenas,
    *,
    keep: bool = False,
) -> GivenPlan:
    """The plan `algorithm` makes for the extraction's tensors, validated (`InvalidPlanError` if not valid).

    The specs are restored afterwards unless `keep`.
    """
    saved = [(s, s.mem_id, s.mem_offset, s.mem_obj_id) for s in extraction.specs]
    reserved = getattr(graph_module, "input_mem_buffer_sizes", None)
    try:
        sizes = _run_like_apply_algo(algorithm, extraction, graph_module, graph_signature, alignment, arenas)
        problem, plan = _read_back(extraction, name)
        objects = [(spec, spec.mem_obj_id) for spec in extraction.specs]
    finally:
        graph_module.input_mem_buffer_sizes = reserved  # type: ignore[assignment]
        if not keep:
            for spec, mem_id, offset, obj in saved:
                spec.mem_id, spec.mem_offset, spec.mem_obj_id = mem_id, offset, obj
                spec.realign(alignment)
    return GivenPlan(problem, plan, sizes, objects)


def _run_like_apply_algo(
    algorithm: Callable[..., Any],
    extraction: Extraction,
    graph_module: torch.fx.GraphModule,
    graph_signature: ExportGraphSignature | None,
    alignment: int,
    arenas: DeviceArenas,
) -> list[int]:
    """`apply_algo`'s loop over devices: CPU:0 first (with the submodule reservations), then each device."""
    reserved = list(getattr(graph_module, "input_mem_buffer_sizes", None) or [])
    order = [CPU, *sorted(set(arenas.devices.values()), key=lambda k: (k[0].value, k[1]))]
    by_device: dict[Any, list[TensorSpec]] = {key: [] for key in order}
    for spec in extraction.specs:
        by_device[device_of(spec) if arenas.devices else CPU].append(spec)
    sizes = [0]
    for key in order:
        specs = by_device[key]
        if not specs:
            continue
        graph_module.input_mem_buffer_sizes = reserved if key == CPU else []  # type: ignore[assignment]
        local = list(algorithm(alignment, specs, graph_module, graph_signature, extraction.extra_padding))
        base = len(sizes)
        sizes.extend(local[1:])
        for spec in specs:
            if spec.mem_id is not None:
                spec.mem_id = spec.mem_id - 1 + base
    return sizes if len(sizes) > 1 else [0, 0]


def _read_back(extraction: Extraction, name: str) -> tuple[Problem, Plan]:
    """The specs' placements as a plan; each tensor (group root) in the arena the algorithm chose."""
    problem = extraction.problem
    chosen: dict[str, int] = {}
    for bid, spec in extraction.spec_of.items():
        if spec.mem_id is None or spec.mem_offset is None:
            raise InvalidPlanError(f"{name} left {bid} without a mem_id/mem_offset", [])
        chosen[bid] = spec.mem_id
    offsets: dict[str, int] = {b.id: b.offset for b in problem.buffers if b.offset is not None}
    offsets.update({bid: spec.mem_offset for bid, spec in extraction.spec_of.items()})  # type: ignore[misc]
    if problem.banks:
        pools = {b.id: chosen[b.id] for b in problem.buffers if b.banks and b.id in chosen}
        placed = place_in_banks(problem, pools)
    else:
        pools = {}
        try:
            placed = dataclasses.replace(
                problem,
                buffers=tuple(dataclasses.replace(b, pool=chosen.get(b.id, b.pool)) for b in problem.buffers),
            )
        except ProblemError as e:
            raise InvalidPlanError(f"{name}: {e}", []) from None
        problem = placed
    plan = Plan(
        offsets=offsets,
        arena_sizes=arena_sizes_of(placed, offsets),
        solver=name,
        pools=pools,
        outcome=Outcome.HEURISTIC,
    )
    try:
        check_plan(problem, plan)
    except InvalidPlanError as e:
        e.add_note(f"the plan of the given algorithm {name}")
        raise
    return problem, plan
