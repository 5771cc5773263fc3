"""Seeded random problems for property tests and scale benchmarks.

`random_problem` exercises every constraint the model has (alignment, groups,
fixed offsets, same-offset sets, pools) on lifetimes drawn without structure.
`layered_problem` mimics what a sequential network exported by ExecuTorch
looks like: most activations die one or two ops after they are made, a few
skip connections live long, a handful of buffers live for the whole program.
The same arguments always give the same problem.
"""

from __future__ import annotations

import bisect
import dataclasses
import math
import random
from collections.abc import Sequence

from memplan.arith import align_up
from memplan.problem import Bank, Buffer, BufferKind, ContiguousGroup, Problem, SameOffset

# Spatial sides seen in mobile CNNs: channels x side^2 x dtype gives the "odd"
# (non power of two) tensor sizes real models have.
_SIDES = (1, 7, 14, 17, 28, 35, 56, 112)


def _tensor_size(rng: random.Random, scale: int) -> int:
    """A power of two near `scale`, or an odd channels x side^2 x dtype product near it."""
    if rng.random() < 0.55:
        return 1 << max(0, int(math.log2(scale)) + rng.choice((-1, 0, 0, 1)))
    side = rng.choice(_SIDES)
    dtype_bytes = rng.choice((1, 2, 4))
    channels = max(1, round(scale * rng.uniform(0.4, 2.5) / (side * side * dtype_bytes)))
    return channels * side * side * dtype_bytes


def layered_problem(n_buffers: int, seed: int, alignment: int = 16) -> Problem:
    """A sequential layered graph with `n_buffers` buffers over about as many ops.

    Each op makes one output, consumed by the next op (often) or the next few;
    ~4% are skip connections consumed 10-300 ops later; ~30% of ops also use a
    scratch buffer for the op itself; max(1, min(32, n/500)) buffers live from
    the first op to the last (state, inputs, outputs). The network goes
    through stages whose tensor size scale changes every 20-60 ops.
    """
    if n_buffers < 1:
        raise ValueError(f"n_buffers must be >= 1, got {n_buffers}")
    rng = random.Random(seed)
    n_whole = max(1, min(32, n_buffers // 500))
    spans: list[tuple[int, int, int, BufferKind]] = []  # start, end, size, kind
    op = 0
    scale = 1 << rng.randint(12, 18)
    stage_left = rng.randint(20, 60)
    while len(spans) < n_buffers - n_whole:
        if stage_left == 0:
            scale = 1 << rng.randint(12, 18)
            stage_left = rng.randint(20, 60)
        stage_left -= 1
        r = rng.random()
        if r < 0.04:
            last_use = op + int(10 * 30 ** rng.random())  # log-uniform in [10, 300)
        elif r < 0.30:
            last_use = op + rng.randint(2, 3)
        else:
            last_use = op + 1
        spans.append((op, last_use + 1, _tensor_size(rng, scale), BufferKind.ACTIVATION))
        if rng.random() < 0.3 and len(spans) < n_buffers - n_whole:
            spans.append((op, op + 1, _tensor_size(rng, scale // 4 or 1), BufferKind.OTHER))
        op += 1
    horizon = max(op + 1, max(end for _, end, _, _ in spans))
    spans = [(s, min(e, horizon), size, kind) for s, e, size, kind in spans]
    for i in range(n_whole):
        kind = BufferKind.MUTABLE_STATE if i % 2 else BufferKind.GRAPH_INPUT
        spans.append((0, horizon, _tensor_size(rng, 1 << rng.randint(10, 16)), kind))
    buffers = tuple(
        Buffer(f"t{i}", s, e, size, alignment=alignment, kind=kind)
        for i, (s, e, size, kind) in enumerate(spans)
    )
    return Problem(buffers, name=f"layered-{n_buffers}-s{seed}")


def pigeonholes(buffers: int, holes: int) -> Problem:
    """`buffers` 3-byte buffers and 1-byte fixed walls 6 bytes apart, all live at once.

    Each 5-byte hole below a wall takes one buffer, the rest stack above the
    walls: optimum 6 * holes + 3 * (buffers - holes), well above the lower
    bound 3 * buffers + holes. Proving it takes search, not the bound.
    """
    free = [Buffer(f"b{i}", 0, 2, 3) for i in range(buffers)]
    walls = [Buffer(f"wall{j}", 0, 2, 1, offset=5 + 6 * j) for j in range(holes)]
    return Problem(tuple(free + walls), name=f"pigeonholes-{buffers}-{holes}")


def random_problem(
    n_buffers: int,
    seed: int,
    alignment: int | Sequence[int] = 1,
    with_groups: bool = False,
    with_fixed: bool = False,
    with_same_offset: bool = False,
    n_pools: int = 1,
) -> Problem:
    """About `n_buffers` buffers with unstructured lifetimes and optional constraints.

    `alignment` is one value for every buffer, or choices drawn per buffer.
    Groups add members inside ~15% of buffers (sometimes nested two deep);
    fixed offsets pin ~8% of roots at stacked, never-colliding offsets;
    same-offset sets join ~10% of roots into chains that never live together.
    """
    if n_buffers < 1:
        raise ValueError(f"n_buffers must be >= 1, got {n_buffers}")
    rng = random.Random(seed)
    choices = (alignment,) if isinstance(alignment, int) else tuple(alignment)
    horizon = max(4, n_buffers)
    roots: list[Buffer] = []
    for i in range(n_buffers):
        start = rng.randrange(horizon)
        r = rng.random()
        length = rng.randint(1, 4) if r < 0.7 else rng.randint(1, horizon // 4 + 1) if r < 0.95 else horizon
        size = 1 << rng.randint(0, 12) if rng.random() < 0.5 else rng.randint(1, 5000)
        roots.append(
            Buffer(
                f"b{i}",
                start,
                min(start + length, horizon + 1),
                size,
                alignment=rng.choice(choices),
                pool=rng.randrange(n_pools),
            )
        )

    same_offsets = _same_offset_chains(rng, roots) if with_same_offset else []
    in_sets = {b for s in same_offsets for b in s.buffers}
    if with_fixed:
        roots = _fix_some(rng, roots, in_sets, math.lcm(*choices))
    buffers: list[Buffer] = []
    groups: list[ContiguousGroup] = []
    for buf in roots:
        buffers.append(buf)
        if with_groups and rng.random() < 0.15:
            _add_members(rng, buf, buffers, groups, depth=2)
    return Problem(tuple(buffers), tuple(groups), tuple(same_offsets), name=f"random-{n_buffers}-s{seed}")


def _same_offset_chains(rng: random.Random, roots: list[Buffer]) -> list[SameOffset]:
    """Chains of 2-3 roots in one pool, each starting after the previous one ended."""
    by_start = sorted(roots, key=lambda b: b.start)
    starts = [b.start for b in by_start]
    used: set[str] = set()
    sets = []
    for first in rng.sample(roots, k=max(1, len(roots) // 20)):
        if first.id in used:
            continue
        chain = [first]
        want = rng.randint(2, 3)
        while len(chain) < want:
            i = bisect.bisect_left(starts, chain[-1].end)
            nxt = next((b for b in by_start[i : i + 50] if b.pool == first.pool and b.id not in used), None)
            if nxt is None:
                break
            chain.append(nxt)
            used.add(nxt.id)
        if len(chain) >= 2:
            used.add(first.id)
            sets.append(SameOffset(tuple(c.id for c in chain)))
        else:
            used -= {c.id for c in chain[1:]}
    return sets


def _fix_some(rng: random.Random, roots: list[Buffer], skip: set[str], alignment: int) -> list[Buffer]:
    """Pin ~8% of roots at offsets stacked per pool so pinned buffers never collide."""
    top: dict[int, int] = {}
    fixed = []
    for buf in roots:
        if buf.id not in skip and rng.random() < 0.08:
            offset = align_up(top.get(buf.pool, 0), alignment)
            top[buf.pool] = offset + buf.size
            buf = Buffer(buf.id, buf.start, buf.end, buf.size, buf.alignment, offset, buf.pool)
        fixed.append(buf)
    return fixed


def _add_members(
    rng: random.Random, parent: Buffer, buffers: list[Buffer], groups: list[ContiguousGroup], depth: int
) -> None:
    """Cut `parent` into 1-3 back-to-back aligned members living inside its lifetime."""
    members = []
    rel = 0
    for k in range(rng.randint(1, 3)):
        rel = align_up(rel, parent.alignment)
        room = parent.size - rel
        if room <= 0:
            break
        size = room if k == 2 else rng.randint(1, room)
        start = rng.randint(parent.start, parent.end - 1)
        end = rng.randint(start + 1, parent.end)
        member = Buffer(
            f"{parent.id}.{k}",
            start,
            end,
            size,
            alignment=parent.alignment,
            pool=parent.pool,
            kind=parent.kind,
        )
        buffers.append(member)
        members.append((member.id, rel))
        if depth > 1 and rng.random() < 0.3:
            _add_members(rng, member, buffers, groups, depth - 1)
        rel += size
    groups.append(ContiguousGroup(parent.id, tuple(members)))


def with_banks(
    problem: Problem,
    capacities: Sequence[int],
    seed: int = 0,
    pinned: float = 0.0,
    alignments: Sequence[int] | None = None,
    max_accesses: int = 8,
) -> Problem:
    """`problem` over banks of these capacities (pools 1, 2, ... in preference order).

    Every root may go to any bank (its members follow it) except ~`pinned` of
    them, pinned to a random bank; each buffer is accessed 1..`max_accesses`
    times. `alignments` gives each bank's alignment (default 1).
    """
    rng = random.Random(seed)
    pools = tuple(range(1, len(capacities) + 1))
    banks = tuple(
        Bank(f"bank{p}", p, cap, alignment=(alignments[p - 1] if alignments else 1))
        for p, cap in zip(pools, capacities, strict=True)
    )
    choice: dict[str, tuple[int, tuple[int, ...]]] = {}
    for buf in problem.roots():
        if rng.random() < pinned:
            choice[buf.id] = (rng.choice(pools), ())
        else:
            choice[buf.id] = (pools[0], pools)
    for s in problem.same_offsets:  # a same-offset set shares its first member's choice
        for b in s.buffers[1:]:
            choice[b] = choice[s.buffers[0]]
    buffers = []
    for buf in problem.buffers:
        pool, banks_of = choice[problem.root_of(buf.id)[0]]
        buffers.append(
            dataclasses.replace(
                buf, pool=pool, banks=banks_of, accesses=rng.randint(1, max_accesses), offset=None
            )
        )
    return dataclasses.replace(problem, buffers=tuple(buffers), banks=banks)
