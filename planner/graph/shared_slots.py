"""The `mem_obj_id`s of a plan, as ExecuTorch's storage-reuse check reads them.

ExecuTorch's `Verifier.verify_storage_reuse` demands that any two tensors
whose bytes overlap (at any time) carry the same `mem_obj_id`, so ids are
handed out per "shared slot": the maximal runs of overlapping byte ranges in
a pool. Buffers that never share a byte with another get an id of their own.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping

from memplan.problem import Problem


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
