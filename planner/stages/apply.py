"""The apply stage: the chosen plan written into ExecuTorch's TensorSpecs, the arena sizes to emit.

The plan is validated first, so an invalid plan never reaches a TensorSpec;
`mem_obj_id`s are handed out per shared slot (planner.graph.shared_slots). An
algorithm run as given keeps its own `mem_obj_id`s and reserved sizes; device
arenas and a memory map's banks are laid out as stock lays them out.
"""

from __future__ import annotations

import torch
from executorch.exir.banked_memory_planning import TargetMemoryMap

from memplan.bank_placement import place_in_banks
from memplan.plan import Plan
from memplan.planner.compat import merge_bufsizes
from memplan.planner.graph.extract import Extraction, _pool_of
from memplan.planner.graph.shared_slots import shared_slots
from memplan.planner.memory.bank_maps import bank_buffer_sizes
from memplan.planner.memory.devices import DeviceArenas, place_zero_size, with_device_arenas
from memplan.planner.stages.solve import Choice
from memplan.validate import check_plan


def written(
    choice: Choice,
    arenas: DeviceArenas,
    graph_module: torch.fx.GraphModule,
    memory_map: TargetMemoryMap | None,
) -> list[int]:
    """Write the chosen plan into the specs; the `non_const_buffer_sizes` (and devices) to emit."""
    planned, plan = choice.planned, choice.plan
    sizes = apply_plan(planned, plan)
    if choice.as_given is not None:
        sizes = merge_bufsizes(sizes, choice.as_given.buffer_sizes)  # it may reserve more than it places
        # Its mem_obj_ids may mean more than shared bytes (Vulkan reads them as allocations).
        for spec, obj in choice.as_given.objects:
            spec.mem_obj_id = obj
    if arenas.devices:
        place_zero_size(planned, arenas)
        sizes = with_device_arenas(sizes, arenas)
        if (devices := arenas.buffer_devices(len(sizes))) is not None:
            graph_module.meta["non_const_buffer_device"] = devices
    if memory_map is not None:
        sizes = bank_buffer_sizes(sizes, planned.problem.banks, dict(plan.arena_sizes))
    return sizes


def apply_plan(extraction: Extraction, plan: Plan) -> list[int]:
    """Set mem_id/mem_offset/mem_obj_id on every planned spec; return `non_const_buffer_sizes`.

    The plan is validated first, so an invalid plan never reaches a TensorSpec.
    """
    check_plan(extraction.problem, plan)
    problem = place_in_banks(extraction.problem, plan.pools)  # each tensor in the bank chosen for it
    slots = shared_slots(problem, plan.offsets)
    for bid, spec in extraction.spec_of.items():
        spec.mem_id = problem.buffer(bid).pool
        spec.mem_offset = plan.offsets[bid]
        spec.mem_obj_id = slots[bid]
    next_slot = max(slots.values(), default=-1) + 1
    placed = {id(spec): bid for bid, spec in extraction.spec_of.items()}
    for spec in extraction.zero_size.values():
        # Zero bytes overlap nothing; keep the pool and sit inside the base if aliased.
        base = spec.storage_base
        if base is not None and id(base) in placed:
            spec.mem_id = base.mem_id
            spec.mem_offset = base.mem_offset + spec.storage_base_offset
        else:
            spec.mem_id = _pool_of(spec)
            spec.mem_offset = 0
        spec.mem_obj_id = next_slot
        next_slot += 1
    return extraction.pool_sizes(dict(plan.arena_sizes))
