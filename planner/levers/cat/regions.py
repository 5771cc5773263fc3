"""Where placed tensors sit inside their root region, and the nesting tree they form.

Fusion makes buffers members of a cat output, which may itself be a member
of another: each chain ends at a root region. Inside a root every placed
range (cat outputs, members, clone targets) must be nested in or disjoint
from every other, so the ranges form a tree; ExecuTorch's `Verifier` sees it
as storage-base chains.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from memplan.planner.levers.cat.legality import CatFacts, InputFacts, is_cat
from memplan.planner.levers.graph_facts import GraphFacts

Roots = dict[str, tuple[str, int]]  # buffer id -> (root region, absolute byte offset)
MemberOf = dict[str, tuple[str, int]]  # buffer id -> (cat output buffer, offset) from FUSED/PARTIAL
Copies = list[tuple[CatFacts, InputFacts]]  # PARTIAL inputs cloned into their slice


@dataclass
class Interval:
    """A placed tensor's bytes inside a root region: [lo, lo + size).

    At equal bytes, lower `rank` encloses higher (cat outputs 0, inputs 1,
    clone targets 2), then lower `depth` (fused nesting level) encloses higher.
    """

    lo: int
    size: int
    rank: int
    depth: int
    key: str  # buffer id, or "copy:<n>" for a clone target


def roots_of(member_of: MemberOf) -> Roots:
    """Buffer -> (root region, absolute offset) for every output and member placed so far."""
    placed = set(member_of) | {parent for parent, _ in member_of.values()}
    roots = {}
    for bid in placed:
        node, rel = bid, 0
        while node in member_of:
            node, step = member_of[node]
            rel += step
        roots[bid] = (node, rel)
    return roots


def intervals_of(
    facts: GraphFacts, member_of: MemberOf, copies: Copies, roots: Roots
) -> dict[str, list[Interval]]:
    """Per root region, the byte ranges of everything placed in it (copies included)."""
    cat_index = {
        facts.bid_of[id(n.meta["spec"])]: facts.index[n]
        for n in facts.nodes
        if is_cat(n) and id(n.meta["spec"]) in facts.bid_of
    }
    intervals: dict[str, list[Interval]] = defaultdict(list)
    for bid, (root, rel) in roots.items():
        depth, node = 0, bid
        while node in member_of:
            node, depth = member_of[node][0], depth + 1
        rank = 0 if bid in cat_index else 1
        intervals[root].append(Interval(rel, facts.nbytes(bid), rank, depth, bid))
    for n, (cat, inp) in enumerate(copies):
        root, rel = roots[cat.bid]
        intervals[root].append(Interval(rel + inp.offset, inp.nbytes, 2, 0, f"copy:{n}"))
    return intervals


def value_key(inp: InputFacts) -> Any:
    return ("buffer", inp.bid) if inp.bid else ("node", inp.storage.name)


def value_locations(roots: Roots, copies: Copies) -> dict[Any, list[tuple[str, int]]]:
    """Value -> every (root, absolute offset) holding its bytes: its own buffer or a clone.

    A clone of a value that something writes in place is left out: moving
    the clone earlier (to the ALIASED cat) could capture an older value.
    """
    where: dict[Any, list[tuple[str, int]]] = defaultdict(list)
    for bid, loc in roots.items():
        where[("buffer", bid)].append(loc)
    for cat, inp in copies:
        if inp.stable:
            root, rel = roots[cat.bid]
            where[value_key(inp)].append((root, rel + inp.offset))
    return where


def nests(intervals: list[Interval], lo: int, size: int) -> bool:
    """True if [lo, lo + size) is, against every placed range, nested or disjoint."""
    hi = lo + size
    for it in intervals:
        a, b = it.lo, it.lo + it.size
        disjoint = b <= lo or hi <= a
        if not (disjoint or (a <= lo and hi <= b) or (lo <= a and b <= hi)):
            return False
    return True


def laminar_parents(intervals: dict[str, list[Interval]]) -> dict[str, tuple[str, int]]:
    """Each placed range's smallest enclosing range in its root: key -> (parent key, relative offset).

    Ranges are nested or disjoint (fusion builds a tree, aliases are checked
    by `nests`), so sorting by (start, -size, rank) and keeping a stack of
    open ranges finds each one's parent. Copy targets never enclose anything.
    """
    parents: dict[str, tuple[str, int]] = {}
    for root, items in intervals.items():
        stack: list[Interval] = []
        for it in sorted(items, key=lambda i: (i.lo, -i.size, i.key != root, i.rank, i.depth, i.key)):
            while stack and stack[-1].lo + stack[-1].size < it.lo + it.size:
                stack.pop()
            while stack and stack[-1].key.startswith("copy:"):
                stack.pop()
            if it.key != root:
                if not stack:
                    raise AssertionError(f"cat fusion: {it.key} is not inside its region {root}")
                parents[it.key] = (stack[-1].key, it.lo - stack[-1].lo)
            stack.append(it)
    return parents
