"""ExecuTorch 1.5.1's `BankedGreedy`, reimplemented without torch (exir/banked_memory_planning.py).

The baseline for planning across memory banks, byte for byte:

- Group roots are placed; members follow their root (ExecuTorch's
  storage_base resolution). A root without `banks` is a pin (a `mem_id` set by
  a custom pool pass); a root with `banks` is free.
- Pins go first, size-descending with `greedy`'s tie-break (stable ascending
  sort, reversed), each into its pool by `pick_shared_obj`, realigned to its
  bank's alignment. A pin that opens a new shared object in a declared bank is
  charged its size; over the bank's capacity it is an error (no fallback).
- Free buffers follow in the same order. Each is offered to its banks in
  preference order, realigned to each: a bank takes it if an existing shared
  object holds it for free (`_reusable_object`: the first object at least as
  big that it overlaps nowhere in time, else the first with room on top of
  the allocations it overlaps), or if the bank has room for a new object.
  Nowhere: `BankCapacityError` naming the free bytes of every bank.
- A submodule reservation (a SUBMODULE buffer fixed at offset 0) is charged to
  its bank up front and the shared objects are laid out after it.

ExecuTorch also charges `extra_padding` (XNNPACK) to every bank that holds
something; the pass models that by declaring each bank that much smaller,
which accepts and rejects exactly the same buffers.
"""

from __future__ import annotations

import dataclasses
import math
import time
from dataclasses import dataclass, field

from memplan.arith import align_up
from memplan.banks import place_in_banks
from memplan.bounds import lower_bound
from memplan.errors import BankCapacityError, UnsupportedProblemError
from memplan.plan import Plan, arena_sizes_of
from memplan.problem import Buffer, BufferKind, Problem


@dataclass
class _Object:
    """One of ExecuTorch's SharedObjects: a slot of fixed size, allocations inside it."""

    size: int
    allocs: list[tuple[int, int, int, int]] = field(default_factory=list)  # start, end, offset, size
    base: int = 0

    def free_at_zero(self, start: int, end: int) -> bool:
        return all(end <= a_start or a_end <= start for a_start, a_end, _, _ in self.allocs)

    def top_of_overlapping(self, start: int, end: int) -> int:
        return max(
            (off + size for a_start, a_end, off, size in self.allocs if start < a_end and a_start < end),
            default=0,
        )


@dataclass(frozen=True)
class BankedGreedyParams:
    allow_overlapping_allocations: bool = (
        True  # reuse a shared object whenever lifetimes allow (ExecuTorch's)
    )


def solve_banked_greedy(
    problem: Problem, params: BankedGreedyParams = BankedGreedyParams(), *, time_limit_s: float | None = None
) -> Plan:
    """Plan like ExecuTorch's `BankedGreedy` over the problem's banks (its `TargetMemoryMap`)."""
    del time_limit_s  # one deterministic pass
    t0 = time.perf_counter()
    if not problem.banks:
        raise UnsupportedProblemError(
            "banked_greedy plans across banks, but the problem declares none; use greedy"
        )
    if problem.same_offsets:
        raise UnsupportedProblemError(
            f"banked_greedy (ExecuTorch's algorithm) cannot honour same-offset sets"
            f" {list(problem.same_offsets[0].buffers)}; use banked_bestfit or cpsat"
        )
    # ExecuTorch has one alignment per program; with mixed ones, their lcm keeps every offset aligned.
    alignment = math.lcm(*(r.alignment for r in problem.roots()))
    problem = dataclasses.replace(
        problem,
        buffers=tuple(
            dataclasses.replace(b, alignment=alignment)
            if problem.parent_of(b.id) is None and b.alignment != alignment
            else b
            for b in problem.buffers
        ),
    )
    reserved = _reservations(problem)
    roots = [b for b in problem.roots() if b.id not in reserved.values()]
    objects: dict[int, list[_Object]] = {bank.pool: [] for bank in problem.banks}
    used = {
        bank.pool: problem.buffer(reserved[bank.pool]).size if bank.pool in reserved else 0
        for bank in problem.banks
    }
    placed: dict[str, tuple[int, _Object, int]] = {}  # root -> pool, object, offset inside it

    for buf in _packing_order([b for b in roots if not b.banks]):
        _place_pin(problem, buf, objects, used, placed, params.allow_overlapping_allocations)
    for buf in _packing_order([b for b in roots if b.banks]):
        _place_free(problem, buf, objects, used, placed, params.allow_overlapping_allocations)

    for pool, objs in objects.items():
        base = problem.buffer(reserved[pool]).size if pool in reserved else 0
        for obj in objs:
            obj.base = base
            base += obj.size
    pools = {bid: pool for bid, (pool, _, _) in placed.items()}
    offsets = {rid: 0 for rid in reserved.values()}
    for buf in problem.buffers:
        root, rel = problem.root_of(buf.id)
        if root in placed:
            pool, obj, off = placed[root]
            offsets[buf.id] = obj.base + off + rel
            if buf.banks:
                pools[buf.id] = pool
    chosen = {bid: pool for bid, pool in pools.items() if problem.buffer(bid).banks}
    resolved = place_in_banks(problem, chosen)
    arena_sizes = {pool: 0 for pool in objects} | arena_sizes_of(resolved, offsets)
    return Plan(
        offsets=offsets,
        arena_sizes=arena_sizes,
        solver="banked_greedy",
        seconds=time.perf_counter() - t0,
        lower_bound=lower_bound(resolved),
        status="heuristic",
        pools=chosen,
    )


def _reservations(problem: Problem) -> dict[int, str]:
    """Pool -> the submodule reservation fixed at its bottom; any other fixed offset is refused."""
    found: dict[int, str] = {}
    for buf in problem.buffers:
        if buf.offset is None:
            continue
        if buf.kind is not BufferKind.SUBMODULE or buf.offset != 0 or buf.pool in found or buf.banks:
            raise UnsupportedProblemError(
                f"banked_greedy (ExecuTorch's algorithm) cannot honour the fixed offset of {buf.id!r}"
                " (only one submodule reservation at offset 0 per pool); use banked_bestfit or cpsat"
            )
        found[buf.pool] = buf.id
    return found


def _packing_order(buffers: list[Buffer]) -> list[Buffer]:
    """Size-descending, ties in reverse insertion order: `bisect.insort` by size, then reversed.

    The size is ExecuTorch's `allocated_memory` before any bank realigns it: rounded up to the
    buffer's own alignment.
    """
    return sorted(buffers, key=lambda b: align_up(b.size, b.alignment))[::-1]


def _size_in(problem: Problem, buf: Buffer, pool: int) -> int:
    bank = problem.bank(pool)
    alignment = buf.alignment if bank is None else math.lcm(buf.alignment, bank.alignment)
    return align_up(buf.size, alignment)


def _place_pin(
    problem: Problem,
    buf: Buffer,
    objects: dict[int, list[_Object]],
    used: dict[int, int],
    placed: dict[str, tuple[int, _Object, int]],
    allow_overlapping: bool,
) -> None:
    """`pick_shared_obj` into the pinned pool; a new object is charged to a declared bank."""
    pool, size = buf.pool, _size_in(problem, buf, buf.pool)
    objs = objects.setdefault(pool, [])
    for obj in objs:
        if obj.free_at_zero(buf.start, buf.end):
            if obj.size < size:
                raise UnsupportedProblemError(
                    f"pin {buf.id!r} comes after a smaller pin in pool {pool}, where ExecuTorch's"
                    " BankedGreedy fails its 'Allocation specs are not sorted' assertion"
                )
            _put(placed, buf, pool, obj, 0, size)
            return
    if allow_overlapping:
        for obj in objs:
            top = obj.top_of_overlapping(buf.start, buf.end)
            if top > 0 and top + size <= obj.size:
                _put(placed, buf, pool, obj, top, size)
                return
    obj = _Object(size)
    objs.append(obj)
    _put(placed, buf, pool, obj, 0, size)
    bank = problem.bank(pool)
    if bank is None:
        return  # not a bank: laid out, never budgeted
    if used[pool] + size > bank.capacity:
        missing = used[pool] + size - bank.capacity
        raise BankCapacityError(
            f"buffer {buf.id!r} ({size} bytes) is pinned to bank {bank.name!r} (mem_id {pool}), which has"
            f" {bank.capacity - used[pool]} of {bank.capacity} bytes left: {missing} bytes missing."
            " A pinned buffer has no fallback bank.",
            bank.name,
            missing,
            [buf.id],
        )
    used[pool] += size


def _place_free(
    problem: Problem,
    buf: Buffer,
    objects: dict[int, list[_Object]],
    used: dict[int, int],
    placed: dict[str, tuple[int, _Object, int]],
    allow_overlapping: bool,
) -> None:
    """Into the first of its banks that can take it (reusing an object, or with room for a new one)."""
    banks = [bank for bank in problem.banks if bank.pool in buf.banks]
    for bank in banks:
        pool, size = bank.pool, _size_in(problem, buf, bank.pool)
        objs = objects[pool]
        reuse = next((o for o in objs if o.size >= size and o.free_at_zero(buf.start, buf.end)), None)
        if reuse is not None:
            _put(placed, buf, pool, reuse, 0, size)
            return
        if allow_overlapping:
            for obj in objs:
                top = obj.top_of_overlapping(buf.start, buf.end)
                if top > 0 and top + size <= obj.size:
                    _put(placed, buf, pool, obj, top, size)
                    return
        if used[pool] + size <= bank.capacity:
            used[pool] += size
            obj = _Object(size)
            objs.append(obj)
            _put(placed, buf, pool, obj, 0, size)
            return
    remaining = ", ".join(f"{b.name} {b.capacity - used[b.pool]} of {b.capacity} free" for b in banks)
    missing, closest = min(
        (used[b.pool] + _size_in(problem, buf, b.pool) - b.capacity, b.name) for b in banks
    )
    raise BankCapacityError(
        f"no bank can hold buffer {buf.id!r} ({buf.size} bytes): {remaining}; bank {closest!r} comes"
        f" closest and lacks {missing} bytes. Give a bank more room or declare another one.",
        closest,
        missing,
        [buf.id],
    )


def _put(
    placed: dict[str, tuple[int, _Object, int]], buf: Buffer, pool: int, obj: _Object, offset: int, size: int
) -> None:
    obj.allocs.append((buf.start, buf.end, offset, size))
    placed[buf.id] = (pool, obj, offset)
