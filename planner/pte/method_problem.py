"""A scanned method's problem (`method_layout`): its tensors as buffers (aliases as one block, state
pinned, other methods' state kept off, dead tensors left out), checked against the file's own layout."""

from __future__ import annotations

from collections import defaultdict

from memplan.arith import align_up
from memplan.errors import ProblemError
from memplan.peak_bound import lower_bound
from memplan.plan import Plan
from memplan.planner.pte.accesses import MethodScan, ScannedTensor
from memplan.planner.pte.layout import MethodLayout
from memplan.problem import Buffer, BufferKind, ContiguousGroup, Problem
from memplan.solvers import DEFAULT_ALIGNMENT
from memplan.validate import validate


def _state_placement(scan: MethodScan) -> str:
    state = [t for t in scan.tensors.values() if t.pinned]
    if not state:
        return ""
    total = sum(t.nbytes for t in state)
    kept = sorted({t.mem_id for t in state if scan.fixed(t)})
    if not kept:
        return (
            f"state ({len(state)} tensors, {total:,} bytes) is live for the whole method and free to move:"
            " no other method plans tensors in its arena"
        )
    where = ", ".join(str(m) for m in kept)
    return (
        f"state ({len(state)} tensors, {total:,} bytes) stays at its offsets in arena {where}:"
        " another method plans tensors there"
    )


def method_layout(scan: MethodScan, other_state: list[tuple[int, int, int]], alignment: int) -> MethodLayout:
    """The scanned method's layout with its problem derived; `other_state` are the (mem_id, lo, hi)
    other methods keep for their state, `alignment` the one planned at (lowered to what the file uses)."""
    layout = scan.layout
    layout.cannot, layout.notes = list(scan.cannot), list(scan.notes)
    if scan.cannot:
        return layout
    layout.overlaps = scan.live_overlaps()
    if layout.overlaps:
        layout.cannot.append(
            f"{len(layout.overlaps)} live overlap(s): tensors read bytes another tensor wrote over while"
            " they were live; memplan cannot tell what the program relies on"
        )
        return layout
    scan.adopt_state(other_state)
    layout.state_placement = _state_placement(scan)
    lifetimes = {v: scan.lifetime(t) for v, t in scan.tensors.items()}
    _join_overlapping(scan, lifetimes)
    components: dict[int, list[ScannedTensor]] = defaultdict(list)
    for v, t in scan.tensors.items():
        components[scan.union.find(v)].append(t)
    roots = [
        min(c, key=lambda t: t.offset).offset for c in components.values() if not any(map(scan.fixed, c))
    ]
    alignment = _usable_alignment(alignment, roots)
    if alignment < DEFAULT_ALIGNMENT:
        layout.notes.append(
            f"offsets in the file are multiples of {alignment} only; planning at that alignment"
        )
    layout.alignment = alignment
    end_of_method = max(scan.num_instructions, 1)
    buffers: list[Buffer] = []
    groups: list[ContiguousGroup] = []
    offsets: dict[str, int] = {}
    try:  # sizes and offsets come from the file: a damaged one may give no valid buffer
        for members in components.values():
            _component(scan, members, lifetimes, alignment, end_of_method, buffers, groups, offsets, layout)
        buffers += _other_state(scan, other_state, end_of_method, offsets)
        if not buffers:
            return layout
        problem = Problem(tuple(buffers), tuple(groups), name=layout.name, pool_names=layout.devices)
    except ProblemError as exc:
        layout.cannot.append(f"the derived problem is malformed: {exc}")
        return layout
    extent: dict[int, int] = defaultdict(int)
    for b in buffers:
        extent[b.pool] = max(extent[b.pool], offsets[b.id] + b.size)
    arena = {pool: (layout.arenas[pool] if pool < len(layout.arenas) else 0) for pool in problem.pools}
    plan = Plan(offsets, arena, solver="file", lower_bound=lower_bound(problem), status="as built")
    broken = validate(problem, plan)
    if broken:
        layout.cannot.append(
            f"the file's own layout breaks the derived lifetimes ({broken[0]}); memplan cannot tell what"
            " the program relies on"
        )
        return layout
    layout.problem, layout.layout = problem, plan
    layout.slack = {pool: arena[pool] - extent[pool] for pool in problem.pools}
    return layout


def _other_state(
    scan: MethodScan, other_state: list[tuple[int, int, int]], end_of_method: int, offsets: dict[str, int]
) -> list[Buffer]:
    """Fixed buffers for the bytes other methods' state keeps that this method's own state does not."""
    found = []
    own = [(t.mem_id, t.offset, t.hi) for t in scan.tensors.values() if scan.fixed(t)]
    for mem_id, lo, hi in _uncovered(other_state, own):
        bid = f"state of another method @{mem_id}:{lo}"
        found.append(
            Buffer(
                bid,
                0,
                end_of_method,
                hi - lo,
                1,
                lo,
                mem_id,
                BufferKind.MUTABLE_STATE,
                "another method's state",
            )
        )
        offsets[bid] = lo
    return found


def _join_overlapping(scan: MethodScan, lifetimes: dict[int, tuple[int, int]]) -> None:
    """Tensors that share bytes while both live are aliases in the file: one block."""
    events = sorted((lifetimes[v][0], v) for v in scan.tensors)
    live: list[int] = []
    for start, v in events:
        t = scan.tensors[v]
        live = [u for u in live if lifetimes[u][1] > start]
        for u in live:
            o = scan.tensors[u]
            if o.mem_id == t.mem_id and o.offset < t.hi and t.offset < o.hi:
                scan.union.join(u, v)
        live.append(v)


def _component(
    scan: MethodScan, members, lifetimes, alignment, end_of_method, buffers, groups, offsets, layout
) -> None:
    pinned = any(t.pinned for t in members)  # live for the whole method
    stays = any(map(scan.fixed, members))
    lo = min(t.offset for t in members)
    hi = max(t.hi for t in members)
    start = 0 if pinned else min(lifetimes[t.value][0] for t in members)
    end = end_of_method if pinned else max(lifetimes[t.value][1] for t in members)
    kind = _kind({scan.role(t) for t in members}, pinned)
    first = min(members, key=lambda t: t.value)
    size = hi - lo if stays else align_up(hi - lo, alignment)
    fixed = lo if stays else None
    align = 1 if stays else alignment
    if len(members) == 1:
        bid = f"v{first.value}"
        buffers.append(
            Buffer(bid, start, end, size, align, fixed, first.mem_id, kind, first.writer or kind.value)
        )
        offsets[bid] = lo
        layout.members[bid] = [(first.value, 0)]
        return
    bid = f"block v{first.value}"
    label = "aliases " + ", ".join(f"v{t.value}" for t in sorted(members, key=lambda t: t.value)[:6])
    buffers.append(Buffer(bid, start, end, size, align, fixed, first.mem_id, kind, label))
    offsets[bid] = lo
    inside = []
    for t in members:
        s, e = (start, end) if pinned else lifetimes[t.value]
        mid = f"v{t.value}"
        buffers.append(Buffer(mid, s, e, t.nbytes, 1, None, t.mem_id, kind, t.writer or kind.value))
        offsets[mid] = t.offset
        inside.append((mid, t.offset - lo))
    groups.append(ContiguousGroup(bid, tuple(inside)))
    layout.members[bid] = [(t.value, t.offset - lo) for t in members]


def _kind(roles: set[str], pinned: bool) -> BufferKind:
    if pinned:
        return BufferKind.MUTABLE_STATE
    if any(r.startswith("input") for r in roles):
        return BufferKind.GRAPH_INPUT
    if any("output" in r for r in roles):
        return BufferKind.GRAPH_OUTPUT
    return BufferKind.ACTIVATION


def _usable_alignment(alignment: int, offsets: list[int]) -> int:
    """`alignment`, lowered to the largest power of two dividing every offset the file uses."""
    while alignment > 1 and any(o % alignment for o in offsets):
        alignment //= 2
    return alignment


def _uncovered(
    ranges: list[tuple[int, int, int]], own: list[tuple[int, int, int]]
) -> list[tuple[int, int, int]]:
    """Merged (mem_id, lo, hi) of `ranges` minus the bytes `own` already covers."""
    by_mem: dict[int, list[tuple[int, int]]] = defaultdict(list)
    for m, lo, hi in ranges:
        by_mem[m].append((lo, hi))
    found = []
    for m, spans in by_mem.items():
        merged: list[list[int]] = []
        for lo, hi in sorted(spans):
            if merged and lo <= merged[-1][1]:
                merged[-1][1] = max(merged[-1][1], hi)
            else:
                merged.append([lo, hi])
        cuts = sorted((lo, hi) for mm, lo, hi in own if mm == m)
        for lo, hi in merged:
            pos = lo
            for a, b in cuts:
                if b <= pos or a >= hi:
                    continue
                if a > pos:
                    found.append((m, pos, a))
                pos = max(pos, b)
            if pos < hi:
                found.append((m, pos, hi))
    return found
