"""Write a validated `Plan` back into ExecuTorch's TensorSpecs.

ExecuTorch's `Verifier.verify_storage_reuse` demands that any two tensors
whose bytes overlap (at any time) carry the same `mem_obj_id`, so ids are
handed out per "shared slot": the maximal runs of overlapping byte ranges in
a pool. Buffers that never share a byte with another get an id of their own.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping

from memplan.banks import place_in_banks
from memplan.plan import Plan
from memplan.planner.graph.extract import Extraction, _pool_of
from memplan.problem import Problem
from memplan.validate import check_plan


def shared_slots(problem: Problem, offsets: Mapping[str, int], first_id: int = 0) -> dict[str, int]:
    """Buffer id -> slot id, one slot per maximal run of overlapping byte ranges in a pool."""
    by_pool: dict[int, list[tuple[int, int, str]]] = defaultdict(list)
    for buf in problem.buffers:
        lo = offsets[buf.id]
        by_pool[buf.pool].append((lo, lo + buf.size, buf.id))
    slot_of: dict[str, int] = {}
    next_id = first_id
    for pool in sorted(by_pool):
        top = None
        for lo, hi, bid in sorted(by_pool[pool]):
            if top is None or lo >= top:  # a gap (or a touch): a new slot starts
                next_id += 1
                top = hi
            top = max(top, hi)
            slot_of[bid] = next_id - 1
    return slot_of


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
