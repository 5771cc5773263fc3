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

ExecuTorch has one alignment per program. Here each root keeps its own (and
its members'): an object starts at the pool's next address aligned for the
buffer that opens it, a buffer reuses an object only at an address aligned for
it, so with one alignment everywhere the plan is ExecuTorch's, byte for byte.

ExecuTorch also charges `extra_padding` (XNNPACK) to every bank that holds
something; the pass models that by declaring each bank that much smaller,
which accepts and rejects exactly the same buffers.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

from memplan.arith import align_up
from memplan.bank_placement import place_in_banks
from memplan.errors import BankCapacityError, UnsupportedProblemError
from memplan.peak_bound import lower_bound
from memplan.plan import Plan, arena_sizes_of
from memplan.problem import Buffer, BufferKind, Problem


@dataclass
class _Object:
    """One of ExecuTorch's SharedObjects: a slot of fixed size at `base` in its pool, allocations inside it."""

    size: int
    base: int
    allocs: list[tuple[int, int, int, int]] = field(default_factory=list)  # start, end, offset, size

    def free_at_zero(self, start: int, end: int) -> bool:
        return all(end <= a_start or a_end <= start for a_start, a_end, _, _ in self.allocs)

    def top_of_overlapping(self, start: int, end: int) -> int:
        return max(
            (off + size for a_start, a_end, off, size in self.allocs if start < a_end and a_start < end),
            default=0,
        )

    def aligned(self, offset: int, alignment: int) -> int:
        """The lowest offset inside the object from `offset` up whose address is a multiple of `alignment`."""
        return align_up(self.base + offset, alignment) - self.base


@dataclass(frozen=True)
class BankedGreedyParams:
    allow_overlapping_allocations: bool = (
        True  # reuse a shared object whenever lifetimes allow (ExecuTorch's)
    )


def solve_banked_greedy(
    problem: Problem, params: BankedGreedyParams = BankedGreedyParams(), *, time_limit_s: float | None = None
) -> Plan:
    """Plan like ExecuTorch's `BankedGreedy` over the problem's banks (its `TargetMemoryMap`).

    A problem asking for shared objects is planned as `BankedGreedy(target,
    allow_overlapping_allocations=False)` plans it, whatever the flag says.
    """
    del time_limit_s  # one deterministic pass
    t0 = time.perf_counter()
    overlapping = params.allow_overlapping_allocations and not problem.shared_objects
    if not problem.banks:
        raise UnsupportedProblemError(
            "banked_greedy plans across banks, but the problem declares none; use greedy"
        )
    if problem.same_offsets:
        raise UnsupportedProblemError(
            f"banked_greedy (ExecuTorch's algorithm) cannot honour same-offset sets"
            f" {list(problem.same_offsets[0].buffers)}; use banked_bestfit or cpsat"
        )
    reserved = _reservations(problem)
    roots = [b for b in problem.roots() if b.id not in reserved.values()]
    objects: dict[int, list[_Object]] = {bank.pool: [] for bank in problem.banks}
    # Per pool, where the next shared object goes: after the submodule reservation and the objects so far.
    used = {pool: problem.buffer(root).size for pool, root in reserved.items()}
    placed: dict[str, tuple[int, _Object, int]] = {}  # root -> pool, object, offset inside it

    need = _alignments(problem)
    for buf in _packing_order([b for b in roots if not b.banks]):
        _place_pin(problem, buf, objects, used, placed, overlapping, need)
    for buf in _packing_order([b for b in roots if b.banks]):
        _place_free(problem, buf, objects, used, placed, overlapping, need)

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


def _alignments(problem: Problem) -> dict[str, int]:
    """Per root: the alignment its offset needs, its own and every member's (members sit at fixed
    distances inside it, each a multiple of the member's alignment)."""
    need: dict[str, int] = {}
    for buf in problem.buffers:
        root = problem.root_of(buf.id)[0]
        need[root] = math.lcm(need.get(root, 1), buf.alignment)
    return need


def _in_pool(problem: Problem, buf: Buffer, pool: int, need: dict[str, int]) -> tuple[int, int]:
    """(bytes, offset alignment) of root `buf` placed in `pool`: a bank's alignment tightens both,
    and the bytes are rounded up to the root's own alignment there, as `place_in_banks` does."""
    bank = problem.bank(pool)
    own = buf.alignment if bank is None else math.lcm(buf.alignment, bank.alignment)
    return align_up(buf.size, own), math.lcm(own, need[buf.id])


def _new_object(
    objects: dict[int, list[_Object]], used: dict[int, int], pool: int, size: int, alignment: int
) -> _Object:
    """A shared object at the pool's next aligned address."""
    obj = _Object(size, align_up(used.get(pool, 0), alignment))
    objects.setdefault(pool, []).append(obj)
    used[pool] = obj.base + size
    return obj


def _overlapping_slot(
    objs: list[_Object], buf: Buffer, size: int, alignment: int
) -> tuple[_Object, int] | None:
    """ExecuTorch's reuse on top: the first object with room above the allocations `buf` lives with."""
    for obj in objs:
        top = obj.top_of_overlapping(buf.start, buf.end)
        if top > 0:
            at = obj.aligned(top, alignment)
            if at + size <= obj.size:
                return obj, at
    return None


def _place_pin(
    problem: Problem,
    buf: Buffer,
    objects: dict[int, list[_Object]],
    used: dict[int, int],
    placed: dict[str, tuple[int, _Object, int]],
    allow_overlapping: bool,
    need: dict[str, int],
) -> None:
    """`pick_shared_obj` into the pinned pool; a new object is charged to a declared bank."""
    pool = buf.pool
    size, alignment = _in_pool(problem, buf, pool, need)
    objs = objects.setdefault(pool, [])
    for obj in objs:
        if obj.free_at_zero(buf.start, buf.end) and obj.aligned(0, alignment) == 0:
            if obj.size < size:
                raise UnsupportedProblemError(
                    f"pin {buf.id!r} comes after a smaller pin in pool {pool}, where ExecuTorch's"
                    " BankedGreedy fails its 'Allocation specs are not sorted' assertion"
                )
            _put(placed, buf, pool, obj, 0, size)
            return
    slot = _overlapping_slot(objs, buf, size, alignment) if allow_overlapping else None
    if slot is not None:
        _put(placed, buf, pool, *slot, size)
        return
    bank = problem.bank(pool)
    free = bank.capacity - used.get(pool, 0) if bank is not None else 0
    obj = _new_object(objects, used, pool, size, alignment)
    _put(placed, buf, pool, obj, 0, size)
    if bank is not None and used[pool] > bank.capacity:
        missing = used[pool] - bank.capacity
        raise BankCapacityError(
            f"buffer {buf.id!r} ({_bytes(buf, size, alignment)}) is pinned to bank {bank.name!r}"
            f" (mem_id {pool}), which has {free} of {bank.capacity} bytes left: {missing} bytes missing."
            " A pinned buffer has no fallback bank.",
            bank.name,
            missing,
            [buf.id],
        )


def _place_free(
    problem: Problem,
    buf: Buffer,
    objects: dict[int, list[_Object]],
    used: dict[int, int],
    placed: dict[str, tuple[int, _Object, int]],
    allow_overlapping: bool,
    need: dict[str, int],
) -> None:
    """Into the first of its banks that can take it (reusing an object, or with room for a new one)."""
    banks = [bank for bank in problem.banks if bank.pool in buf.banks]
    short: list[tuple[int, str, str]] = []  # bytes missing, bank, what it says
    for bank in banks:
        pool = bank.pool
        size, alignment = _in_pool(problem, buf, pool, need)
        objs = objects[pool]
        reuse = next(
            (
                o
                for o in objs
                if o.size >= size and o.free_at_zero(buf.start, buf.end) and o.aligned(0, alignment) == 0
            ),
            None,
        )
        if reuse is not None:
            _put(placed, buf, pool, reuse, 0, size)
            return
        slot = _overlapping_slot(objs, buf, size, alignment) if allow_overlapping else None
        if slot is not None:
            _put(placed, buf, pool, *slot, size)
            return
        at = align_up(used.get(pool, 0), alignment)
        if at + size <= bank.capacity:
            _put(placed, buf, pool, _new_object(objects, used, pool, size, alignment), 0, size)
            return
        free = bank.capacity - used.get(pool, 0)
        padding = (
            f" and {at - used.get(pool, 0)} bytes of padding to its alignment"
            if at > used.get(pool, 0)
            else ""
        )
        short.append(
            (
                at + size - bank.capacity,
                bank.name,
                f"bank {bank.name!r} has {free} of {bank.capacity} bytes free and would need"
                f" {at + size - used.get(pool, 0)} ({_bytes(buf, size, alignment)}{padding})",
            )
        )
    missing, closest, _ = min(short)
    raise BankCapacityError(
        f"no bank can hold buffer {buf.id!r}: {'; '.join(what for _, _, what in short)}. Bank {closest!r}"
        f" comes closest, {missing} bytes missing. Give a bank more room or declare another one.",
        closest,
        missing,
        [buf.id],
    )


def _bytes(buf: Buffer, size: int, alignment: int) -> str:
    """The buffer's bytes in words, with the rounding a bank's alignment added."""
    if size == buf.size:
        return f"{size} bytes"
    return f"{size} bytes: its {buf.size} rounded up to the alignment {alignment}"


def _put(
    placed: dict[str, tuple[int, _Object, int]], buf: Buffer, pool: int, obj: _Object, offset: int, size: int
) -> None:
    obj.allocs.append((buf.start, buf.end, offset, size))
    placed[buf.id] = (pool, obj, offset)
