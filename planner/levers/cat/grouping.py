"""Turn the fusion decisions into planning constraints: groups, widened and shortened lifetimes, clones.

Each fused or aliased output becomes a `ContiguousGroup` parent with its
members at their byte offsets; parents live while any member does; inputs a
PARTIAL cat copies are needed only until their clone.
"""

from __future__ import annotations

import dataclasses
import math
from collections import defaultdict

from executorch.exir.memory_planning import get_node_tensor_specs

from memplan.planner.levers.cat.decisions import CatStatus, CopySlot
from memplan.planner.levers.cat.legality import CatFacts
from memplan.planner.levers.cat.regions import Copies, Interval, Roots
from memplan.planner.levers.graph_facts import GraphFacts
from memplan.problem import ContiguousGroup, Problem


def copy_slots(
    facts: GraphFacts,
    cats: list[CatFacts],
    status: dict[str, CatStatus],
    copies: Copies,
    roots: Roots,
    intervals: dict[str, list[Interval]],
    parent_of: dict[str, tuple[str, int]],
) -> list[CopySlot]:
    """Where each clone goes: before the earliest cat reading its slot (its own, or an ALIASED one)."""
    slots = []
    for n, (cat, inp) in enumerate(copies):
        root, rel = roots[cat.bid]
        lo = rel + inp.offset
        first = cat.index
        for other in cats:
            if status[other.node.name] is CatStatus.ALIASED and roots[other.bid][0] == root:
                o_lo = roots[other.bid][1]
                if o_lo <= lo and lo + inp.nbytes <= o_lo + other.nbytes:
                    first = min(first, other.index)
        enclosing, enc_off = parent_of[f"copy:{n}"]
        slots.append(CopySlot(inp.node.name, root, lo, facts.nodes[first].name, enclosing, enc_off))
    return slots


def copy_source_ends(
    facts: GraphFacts, status: dict[str, CatStatus], copies: Copies, slots: list[CopySlot]
) -> dict[str, int]:
    """New (half-open) lifetime ends of buffers whose cat readers are now clones.

    A removed cat no longer reads its inputs, so an input that PARTIAL
    fusion copies is needed only until its last clone or other reader,
    not until the last cat it fed. Tensors written in place and mutable
    state keep their lifetimes.
    """
    removed = {name for name, st in status.items() if st is not CatStatus.REFUSED}
    ends: dict[int, int] = {}
    for slot, (_, inp) in zip(slots, copies):
        if inp.bid and inp.stable:
            ends[id(inp.spec)] = max(ends.get(id(inp.spec), -1), facts.index[facts.by_name[slot.before]])
    if not ends:
        return {}
    for node in facts.nodes:
        if node.name in removed:
            continue
        for ref in (node, *node.all_input_nodes):  # what ExecuTorch counts as a use for lifetimes
            for spec in get_node_tensor_specs(ref):
                if id(spec) in ends:
                    ends[id(spec)] = max(ends[id(spec)], facts.index[node])
    return {facts.bid_of[sid]: end + 1 for sid, end in ends.items()}


def grouped_problem(
    problem: Problem, parent_of: dict[str, tuple[str, int]], shrink: dict[str, int]
) -> Problem:
    """The extraction's problem plus one group per placed output.

    Member sizes are clipped to their parent top-down (padding past the
    parent's end holds nothing), parent lifetimes widened bottom-up.

    `shrink` gives buffers whose lifetime now ends earlier (copy sources);
    one that already holds members (a slice no-op's output inside it) still
    lives while they do.
    """
    buffers = {b.id: b for b in problem.buffers}
    held = {g.parent: max(buffers[m].end for m, _ in g.members) for g in problem.groups if g.members}
    for bid, end in shrink.items():
        end = max(end, buffers[bid].start + 1, held.get(bid, 0))
        if end < buffers[bid].end:
            buffers[bid] = dataclasses.replace(buffers[bid], end=end)
    children: dict[str, list[tuple[str, int]]] = defaultdict(list)
    for child, (parent, rel) in parent_of.items():
        if not child.startswith("copy:"):
            children[parent].append((child, rel))

    def depth(bid: str) -> int:
        d = 0
        while bid in parent_of:
            bid = parent_of[bid][0]
            d += 1
        return d

    def absolute(bid: str) -> int:
        rel = 0
        while bid in parent_of:
            bid, step = parent_of[bid]
            rel += step
        return rel

    placed = sorted((c for c in parent_of if not c.startswith("copy:")), key=depth)
    for child in placed:  # outer first: a member's padding may not reach past its parent's
        parent, rel = parent_of[child]
        member, outer = buffers[child], buffers[parent]
        alignment = member.alignment
        if rel % alignment or absolute(child) % alignment:
            alignment = math.gcd(alignment, rel, absolute(child))
        buffers[child] = dataclasses.replace(
            member, size=min(member.size, outer.size - rel), alignment=alignment
        )
    for child in reversed(placed):  # inner first: each parent lives while any member does
        parent, _ = parent_of[child]
        member, outer = buffers[child], buffers[parent]
        start, end = min(outer.start, member.start), max(outer.end, member.end)
        buffers[parent] = dataclasses.replace(outer, start=start, end=end)
    groups = list(problem.groups) + [
        ContiguousGroup(parent, tuple(sorted(members, key=lambda m: (m[1], m[0]))))
        for parent, members in children.items()
    ]
    order = [b.id for b in problem.buffers]
    return dataclasses.replace(problem, buffers=tuple(buffers[b] for b in order), groups=tuple(groups))
