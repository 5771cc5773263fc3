"""Hypothesis strategies for small, valid planning problems that shrink well.

Every drawn problem is valid by construction: group members fit inside their
parent (bytes, lifetime, alignment), same-offset partners never live together
in one pool, and fixed buffers never collide. Fixed offsets lie on a grid that
every alignment divides, so a fixed group root stays aligned.
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict

from hypothesis import strategies as st

from memplan.problem import Buffer, ContiguousGroup, Problem, SameOffset
from memplan.solvers.units import units_of

ALIGNMENTS = (1, 2, 4)
FIXED_GRID = 4  # a multiple of every alignment above


@st.composite
def problems(
    draw: st.DrawFn,
    max_buffers: int = 7,
    pools: tuple[int, ...] = (0,),
    fixed: bool = True,
    groups: bool = True,
    same_offsets: bool = True,
) -> Problem:
    """A problem with up to `max_buffers` buffers and the requested constraint kinds."""
    count = draw(st.integers(1, max_buffers))
    buffers: list[Buffer] = []
    members: dict[str, list[tuple[str, int]]] = defaultdict(list)
    depth: dict[str, int] = defaultdict(int)  # bytes into the outermost parent
    for i in range(count):
        if groups and buffers and draw(st.booleans()):
            parent = draw(st.sampled_from(buffers))
            buffers.append(_member(draw, f"m{i}", parent, members, depth))
        else:
            buffers.append(_root(draw, f"b{i}", pools, fixed))

    member_ids = {m for ms in members.values() for m, _ in ms}
    roots = [b for b in buffers if b.id not in member_ids]
    pairs = _same_offset_pairs(draw, roots) if same_offsets else []
    buffers = _unfix_partners(buffers, pairs)
    group_list = tuple(ContiguousGroup(p, tuple(ms)) for p, ms in members.items())
    sets = tuple(SameOffset(pair) for pair in pairs)
    return _without_fixed_collisions(Problem(tuple(buffers), group_list, sets))


def _root(draw: st.DrawFn, buffer_id: str, pools: tuple[int, ...], fixed: bool) -> Buffer:
    start = draw(st.integers(0, 6))
    offset = None
    if fixed and draw(st.integers(0, 3)) == 0:
        offset = FIXED_GRID * draw(st.integers(0, 4))
    return Buffer(
        buffer_id,
        start=start,
        end=start + draw(st.integers(1, 4)),
        size=draw(st.integers(1, 12)),
        alignment=draw(st.sampled_from(ALIGNMENTS)),
        offset=offset,
        pool=draw(st.sampled_from(pools)),
    )


def _member(
    draw: st.DrawFn,
    buffer_id: str,
    parent: Buffer,
    members: dict[str, list[tuple[str, int]]],
    depth: dict[str, int],
) -> Buffer:
    """A buffer inside `parent` (which may itself be a member: nested groups).

    Its offset inside its parent and inside the outermost parent are
    multiples of its alignment, as the problem model requires.
    """
    start = draw(st.integers(parent.start, parent.end - 1))
    end = draw(st.integers(start + 1, parent.end))
    size = draw(st.integers(1, parent.size))
    alignment = draw(st.sampled_from([a for a in ALIGNMENTS if depth[parent.id] % a == 0]))
    rel = alignment * draw(st.integers(0, (parent.size - size) // alignment))
    members[parent.id].append((buffer_id, rel))
    depth[buffer_id] = depth[parent.id] + rel
    return Buffer(buffer_id, start, end, size, alignment=alignment, pool=parent.pool)


def _same_offset_pairs(draw: st.DrawFn, roots: list[Buffer]) -> list[tuple[str, str]]:
    """Disjoint pairs of roots that may share an offset."""
    if len(roots) < 2:
        return []
    pairs: list[tuple[str, str]] = []
    used: set[str] = set()
    for _ in range(draw(st.integers(0, 2))):
        a, b = draw(st.sampled_from(roots)), draw(st.sampled_from(roots))
        if a.id == b.id or a.id in used or b.id in used or (a.pool == b.pool and a.lives_with(b)):
            continue
        pairs.append((a.id, b.id))
        used |= {a.id, b.id}
    return pairs


def _unfix_partners(buffers: list[Buffer], pairs: list[tuple[str, str]]) -> list[Buffer]:
    """Drop the second partner's fixed offset when the pair disagrees."""
    by_id = {b.id: b for b in buffers}
    for a, b in pairs:
        if by_id[a].offset is not None and by_id[b].offset is not None and by_id[a].offset != by_id[b].offset:
            by_id[b] = _unfixed(by_id[b])
    return [by_id[b.id] for b in buffers]


def _without_fixed_collisions(problem: Problem) -> Problem:
    """Unfix buffers until no two fixed units share bytes while both live."""
    while True:
        fixed_units = [u for u in units_of(problem) if u.fixed is not None]
        clash = next(
            (
                v
                for i, u in enumerate(fixed_units)
                for v in fixed_units[i + 1 :]
                if any(
                    a.lives_with(b) and u.fixed < v.fixed + b.size and v.fixed < u.fixed + a.size
                    for a in u.rects
                    for b in v.rects
                )
            ),
            None,
        )
        if clash is None:
            return problem
        buffers = tuple(_unfixed(b) if b.id in clash.roots else b for b in problem.buffers)
        problem = Problem(buffers, problem.groups, problem.same_offsets)


def _unfixed(buf: Buffer) -> Buffer:
    return dataclasses.replace(buf, offset=None)


def has_fixed_or_same_offset(problem: Problem) -> bool:
    """What the greedy solver refuses."""
    return bool(problem.same_offsets) or any(b.offset is not None for b in problem.buffers)
