"""The independent validator: every way a plan breaks its problem, as named violations.

It shares no code with any solver; every plan passes it before it touches a `TensorSpec`.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import Enum

import numpy as np
from sortedcontainers import SortedList

import memplan.timeline as timeline
from memplan.bank_placement import place_in_banks
from memplan.errors import InvalidPlanError
from memplan.plan import Plan, arena_sizes_of
from memplan.problem import Buffer, Problem

__all__ = ["Violation", "ViolationKind", "check_plan", "validate"]


class ViolationKind(str, Enum):
    MISSING_OFFSET = "missing_offset"
    UNKNOWN_BUFFER = "unknown_buffer"
    NEGATIVE_OFFSET = "negative_offset"
    MISALIGNED = "misaligned"
    FIXED_OFFSET_MOVED = "fixed_offset_moved"
    GROUP_BROKEN = "group_broken"
    SAME_OFFSET_BROKEN = "same_offset_broken"
    OVERLAP = "overlap"
    WRONG_ARENA_SIZE = "wrong_arena_size"
    OVER_CAPACITY = "over_capacity"
    WRONG_BANK = "wrong_bank"
    OVER_BANK_CAPACITY = "over_bank_capacity"
    SHARED_OBJECT_BROKEN = "shared_object_broken"


@dataclass(frozen=True)
class Violation:
    kind: ViolationKind
    buffers: tuple[str, ...]
    message: str

    def __str__(self) -> str:
        return f"{self.kind.value}: {self.message}"


def validate(problem: Problem, plan: Plan) -> list[Violation]:
    """Every way `plan` breaks `problem`; empty when the plan is valid.

    Independent of every solver. A pool whose rectangles a numpy pass clears
    (`_surely_apart`) has no overlap; in any other, they are found by a sweep
    over time that keeps the live rectangles ordered by offset, so only
    neighbours are compared: O(n log n), not all pairs.
    """
    found: list[Violation] = []

    def add(kind: ViolationKind, buffers: Iterable[str], message: str) -> None:
        found.append(Violation(kind, tuple(buffers), message))

    if problem.banks:
        found.extend(_bank_choice_violations(problem, plan))
        if found:
            return found
        problem = place_in_banks(problem, plan.pools)
    elif plan.pools:
        add(
            ViolationKind.WRONG_BANK,
            list(plan.pools)[:10],
            "plan chooses banks but the problem declares none",
        )
        return found

    offsets = plan.offsets
    ids = {b.id for b in problem.buffers}
    if not offsets.keys() <= ids:  # set operations first: at a million buffers the loops take a second
        for buffer_id in offsets:
            if buffer_id not in problem:
                add(
                    ViolationKind.UNKNOWN_BUFFER,
                    [buffer_id],
                    f"plan places {buffer_id!r}, which the problem does not have",
                )
    missing = [] if ids <= offsets.keys() else [b.id for b in problem.buffers if b.id not in offsets]
    for buffer_id in missing:
        add(ViolationKind.MISSING_OFFSET, [buffer_id], f"{buffer_id!r} has no offset")
    if missing:
        return found

    found.extend(_placement_violations(problem, offsets))
    found.extend(_constraint_violations(problem, offsets))
    found.extend(_overlaps(problem, offsets))
    if problem.shared_objects:
        found.extend(_broken_objects(problem, offsets))
    found.extend(_arena_violations(problem, plan, offsets))
    return found


def _placement_violations(problem: Problem, offsets: Mapping[str, int]) -> list[Violation]:
    """Each buffer on its own: negative, misaligned or moved from its fixed offset (looked for
    buffer by buffer only where numpy finds some: `_placed_well`)."""
    if _placed_well(problem, offsets):
        return []
    found: list[Violation] = []
    for buf in problem.buffers:
        off = offsets[buf.id]
        if off < 0:
            found.append(
                Violation(ViolationKind.NEGATIVE_OFFSET, (buf.id,), f"{buf.id!r} is at negative offset {off}")
            )
        if off % buf.alignment:
            found.append(
                Violation(
                    ViolationKind.MISALIGNED,
                    (buf.id,),
                    f"{buf.id!r} at {off} is not a multiple of {buf.alignment}",
                )
            )
        if buf.offset is not None and off != buf.offset:
            found.append(
                Violation(
                    ViolationKind.FIXED_OFFSET_MOVED,
                    (buf.id,),
                    f"{buf.id!r} is fixed at {buf.offset} but placed at {off}",
                )
            )
    return found


def _placed_well(problem: Problem, offsets: Mapping[str, int]) -> bool:
    """True if no buffer is negative, misaligned or moved from its fixed offset; False if one may be."""
    buffers = problem.buffers
    at = [offsets[b.id] for b in buffers]
    if not at or min(at) < 0 or max(at) >= _ROOM:
        return not at
    placed = np.array(at)
    if placed.dtype.kind != "i":  # not all integers (a float or a bool offset): the loop says which
        return False
    if np.any(placed % np.array([b.alignment for b in buffers], dtype=np.int64)):
        return False
    return all(offsets[b.id] == b.offset for b in buffers if b.offset is not None)


def _constraint_violations(problem: Problem, offsets: Mapping[str, int]) -> list[Violation]:
    """Group members off their place in the parent; same-offset sets at several offsets."""
    found: list[Violation] = []
    for group in problem.groups:
        for member, rel in group.members:
            want = offsets[group.parent] + rel
            if offsets[member] != want:
                found.append(
                    Violation(
                        ViolationKind.GROUP_BROKEN,
                        (group.parent, member),
                        f"{member!r} must sit {rel} bytes into {group.parent!r} (at {want}) but is at"
                        f" {offsets[member]}",
                    )
                )
    for sset in problem.same_offsets:
        placed = {offsets[b] for b in sset.buffers}
        if len(placed) > 1:
            found.append(
                Violation(
                    ViolationKind.SAME_OFFSET_BROKEN,
                    tuple(sset.buffers),
                    f"buffers {list(sset.buffers)} must share one offset but are at {sorted(placed)}",
                )
            )
    return found


def _arena_violations(problem: Problem, plan: Plan, offsets: Mapping[str, int]) -> list[Violation]:
    """Pools whose bytes the plan's arena sizes, the capacity or their bank cannot hold."""
    found: list[Violation] = []
    for pool, need in arena_sizes_of(problem, offsets).items():
        have = plan.arena_sizes.get(pool)
        if have is None or have < need:
            found.append(
                Violation(
                    ViolationKind.WRONG_ARENA_SIZE,
                    (),
                    f"pool {pool} needs {need} bytes but the plan declares {have}",
                )
            )
        if problem.capacity is not None and need > problem.capacity:
            top = [
                b.id for b in problem.buffers if b.pool == pool and offsets[b.id] + b.size > problem.capacity
            ]
            found.append(
                Violation(
                    ViolationKind.OVER_CAPACITY,
                    tuple(top),
                    f"pool {pool} needs {need} bytes, over the capacity {problem.capacity}",
                )
            )
        bank = problem.bank(pool)
        if bank is not None and need > bank.capacity:
            top = [b.id for b in problem.buffers if b.pool == pool and offsets[b.id] + b.size > bank.capacity]
            found.append(
                Violation(
                    ViolationKind.OVER_BANK_CAPACITY,
                    tuple(top),
                    f"bank {bank.name!r} (pool {pool}) needs {need} bytes, {need - bank.capacity} over its"
                    f" capacity {bank.capacity}",
                )
            )
    return found


def _keeps_aligned(problem: Problem, root: Buffer, pool: int) -> bool:
    """True if root's fixed offset is a multiple of the alignment it takes in `pool`."""
    bank = problem.bank(pool)
    return bank is None or root.offset is None or root.offset % math.lcm(root.alignment, bank.alignment) == 0


def _bank_choice_violations(problem: Problem, plan: Plan) -> list[Violation]:
    """Buffers the plan puts in a pool they may not go to (or a member apart from its root)."""
    found = []
    for bid in plan.pools:
        if bid not in problem:
            found.append(
                Violation(ViolationKind.UNKNOWN_BUFFER, (bid,), f"plan chooses a bank for unknown {bid!r}")
            )
    for buf in problem.buffers:
        root, _ = problem.root_of(buf.id)
        pool = plan.pools.get(root, problem.buffer(root).pool)
        if pool not in buf.choices:
            found.append(
                Violation(
                    ViolationKind.WRONG_BANK,
                    (buf.id,),
                    f"{buf.id!r} is placed in pool {pool}, which is not one of its banks {list(buf.choices)}",
                )
            )
        elif buf.offset is not None and root == buf.id and not _keeps_aligned(problem, buf, pool):
            found.append(
                Violation(
                    ViolationKind.WRONG_BANK,
                    (buf.id,),
                    f"{buf.id!r} is fixed at {buf.offset} but placed in pool {pool}, whose bank's alignment"
                    f" {problem.bank(pool).alignment} that offset breaks",  # type: ignore[union-attr]
                )
            )
        elif root != buf.id and plan.pools.get(buf.id, pool) != pool:
            found.append(
                Violation(
                    ViolationKind.WRONG_BANK,
                    (buf.id, root),
                    f"group member {buf.id!r} is given pool {plan.pools[buf.id]} but its root {root!r} is in {pool}",
                )
            )
    for sset in problem.same_offsets:
        placed = {plan.pools.get(b, problem.buffer(b).pool) for b in sset.buffers}
        if len(placed) > 1:
            found.append(
                Violation(
                    ViolationKind.WRONG_BANK,
                    sset.buffers,
                    f"buffers {list(sset.buffers)} share an offset but are placed in pools {sorted(placed)}",
                )
            )
    return found


def _overlaps(problem: Problem, offsets: Mapping[str, int]) -> list[Violation]:
    """Pairs of group roots that share bytes while both live, per pool.

    Group members sit inside their root (checked by the group constraint), so
    comparing roots covers every pair across groups. A pool that `_surely_apart`
    clears (the common case: a valid plan) is not swept.
    """
    found: list[Violation] = []
    by_pool: dict[int, list[Buffer]] = defaultdict(list)
    for buf in problem.roots():
        by_pool[buf.pool].append(buf)
    for pool, bufs in by_pool.items():
        if not _surely_apart(bufs, offsets):
            found.extend(_swept_overlaps(pool, bufs, offsets))
    return found


PAIRS_PER_RECTANGLE = 64
"""`_surely_apart` compares every pair of rectangles that live together when there are at most this
many per rectangle (plus `PAIRS_ANYWAY`); beyond, the sweep's O(n log n) is cheaper."""
PAIRS_ANYWAY = 1 << 20
PAIRS_PER_BATCH = 1 << 22  # bounds the memory of one batch of compared pairs (a few 32 MB arrays)
_ROOM = 1 << 62  # addresses below this keep int64 arithmetic exact (coordinates are, `MAX_COORDINATE`)


def _surely_apart(bufs: list[Buffer], offsets: Mapping[str, int]) -> bool:
    """True if no two of `bufs` share bytes while both live; False if some may (then the sweep finds
    and names them).

    Sorted by start, the rectangles living with one that start at or after it
    are a run right after it (those starting before its end), so every pair is
    compared once, with numpy: a rectangle with a long run against its run at
    once, the others in batches of pairs. Several times cheaper than the sweep
    at 100,000 buffers; it answers nothing it is unsure of.
    """
    columns = _rectangle_columns(bufs, offsets)
    if columns is None:
        return False
    start, end, low, high = columns
    if len(start) < 2:
        return True
    order = np.argsort(start, kind="stable")
    start, end, low, high = start[order], end[order], low[order], high[order]
    n = len(start)
    runs = np.maximum(np.searchsorted(start, end, side="left") - np.arange(n) - 1, 0)
    if int(runs.sum()) > PAIRS_PER_RECTANGLE * n + PAIRS_ANYWAY:
        return False
    for i in np.flatnonzero(runs > PAIRS_PER_RECTANGLE).tolist():
        others = slice(i + 1, i + 1 + int(runs[i]))
        if np.any((low[others] < high[i]) & (low[i] < high[others])):
            return False
    short = np.where(runs > PAIRS_PER_RECTANGLE, 0, runs)
    ends = np.cumsum(short)
    first = 0
    while first < n:  # batches of positions whose pairs fit in PAIRS_PER_BATCH
        before = int(ends[first] - short[first])
        last = max(int(np.searchsorted(ends, before + PAIRS_PER_BATCH, side="right")), first + 1)
        counts = short[first:last]
        a = np.repeat(np.arange(first, last), counts)
        b = a + 1 + np.arange(len(a)) - np.repeat(np.cumsum(counts) - counts, counts)
        if np.any((low[a] < high[b]) & (low[b] < high[a])):
            return False
        first = last
    return True


def _rectangle_columns(bufs: list[Buffer], offsets: Mapping[str, int]) -> tuple[np.ndarray, ...] | None:
    """Start, end, low and high address of every segment in use, as int64 columns; None when an
    address is too far out for int64."""
    plain = [b for b in bufs if not b.gaps and b.size > 0]  # one segment: the whole lifetime, every byte
    at = [offsets[b.id] for b in plain]
    rest = [(seg, offsets[b.id]) for b in bufs if b.gaps for seg in b.segments() if seg.high > seg.low]
    at += [base for _, base in rest]
    if at and (max(at) >= _ROOM or min(at) <= -_ROOM):
        return None
    segments = [(b.start, b.end, 0, b.size) for b in plain] + [
        (s.start, s.end, s.low, s.high) for s, _ in rest
    ]
    if not segments:
        return (np.zeros(0, dtype=np.int64),) * 4
    start, end, low, high = np.array(segments, dtype=np.int64).T
    base = np.array(at, dtype=np.int64)
    return start, end, base + low, base + high


def _swept_overlaps(pool: int, bufs: list[Buffer], offsets: Mapping[str, int]) -> list[Violation]:
    """The overlaps of one pool's rectangles: a sweep over time that keeps the live rectangles ordered
    by address, so only neighbours are compared (O(n log n), not all pairs)."""
    found: list[Violation] = []
    # One rectangle per segment in use (gaps split a lifetime; empty byte ranges overlap nothing).
    rects = [
        (seg.start, seg.end, offsets[buf.id] + seg.low, offsets[buf.id] + seg.high, i)
        for i, buf in enumerate(bufs)
        for seg in buf.segments()
        if seg.high > seg.low
    ]
    live: SortedList = SortedList()  # (low address, high address, rectangle)
    for _, is_start, r in timeline.events((start, end) for start, end, _, _, _ in rects):
        _, _, lo, hi, i = rects[r]
        item = (lo, hi, r)
        if not is_start:
            live.discard(item)
            continue
        pos = live.bisect_left(item)
        for j in (pos - 1, pos):
            if 0 <= j < len(live):
                other_lo, other_hi, k = live[j]
                if other_lo < hi and lo < other_hi:
                    other, buf = bufs[rects[k][4]], bufs[i]
                    found.append(
                        Violation(
                            ViolationKind.OVERLAP,
                            (other.id, buf.id),
                            f"{other.id!r} [{other_lo}, {other_hi}) and {buf.id!r} [{lo}, {hi})"
                            f" share bytes while both live in pool {pool}",
                        )
                    )
        live.add(item)
    return found


def _broken_objects(problem: Problem, offsets: Mapping[str, int]) -> list[Violation]:
    """Roots of one pool whose byte ranges intersect without starting at the same offset (shared objects).

    Sorted by offset (then size), the roots at one offset form an object; the
    next offset must not start inside the bytes of the objects before it.
    """
    found: list[Violation] = []
    by_pool: dict[int, list[tuple[int, int, str]]] = defaultdict(list)
    for buf in problem.roots():
        if buf.size > 0:
            by_pool[buf.pool].append((offsets[buf.id], buf.size, buf.id))
    for pool, roots in by_pool.items():
        reach, holder, base = -1, "", -1  # highest end so far, the root reaching it, its offset
        for lo, size, bid in sorted(roots):
            if lo != base and lo < reach:
                found.append(
                    Violation(
                        ViolationKind.SHARED_OBJECT_BROKEN,
                        (holder, bid),
                        f"{bid!r} starts at {lo}, inside the bytes [{base}, {reach}) of {holder!r}'s"
                        f" shared object in pool {pool}; intersecting buffers must start at the same offset",
                    )
                )
            if lo + size > reach:
                reach, holder, base = lo + size, bid, lo
    return found


def check_plan(problem: Problem, plan: Plan) -> None:
    """Raise `InvalidPlanError` listing the violations if `plan` is not valid."""
    violations = validate(problem, plan)
    if violations:
        shown = "\n  ".join(str(v) for v in violations[:20])
        more = f"\n  ... and {len(violations) - 20} more" if len(violations) > 20 else ""
        raise InvalidPlanError(f"plan from {plan.solver!r} is invalid:\n  {shown}{more}", violations)
