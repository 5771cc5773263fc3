"""The one representation of a memory-planning problem: buffers, groups, same-offset sets, banks.

Every source (ExecuTorch programs, MiniMalloc CSV, generators) produces a
`Problem`; every solver reads one (`memplan.plan` holds what it returns). Lifetimes
are half-open `[start, end)` everywhere in here: two buffers conflict only if
their lifetimes intersect under that reading. Conversion from other conventions
happens at the edges (extraction, file readers). A `Problem` checks itself when
built: a malformed one raises `ProblemError` naming the buffer or constraint.
Its parts (`Buffer`, `ContiguousGroup`, `SameOffset`, `Bank`, ...) are defined in
`memplan.problem_parts` and exported here beside `Problem`: one import for the whole vocabulary.
"""

from __future__ import annotations

import html
import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from memplan.errors import ProblemError
from memplan.peak_bound import lower_bound
from memplan.problem_parts import (
    MAX_COORDINATE,
    Bank,
    Buffer,
    BufferKind,
    ContiguousGroup,
    Gap,
    SameOffset,
    Segment,
    checked_integer,
)

__all__ = [
    "MAX_COORDINATE",
    "Bank",
    "Buffer",
    "BufferKind",
    "ContiguousGroup",
    "Gap",
    "Problem",
    "SameOffset",
    "Segment",
]


@dataclass(frozen=True)
class Problem:
    """Buffers plus constraints. `capacity` bounds every pool's arena, if set.

    `banks` (in preference order, fastest first) declares capacity-bounded pools
    and their cost per byte accessed; a buffer whose `banks` lists several of
    them leaves the choice to the solver (see `place_in_banks`).
    `shared_objects` asks for the "shared objects" form ExecuTorch's
    `greedy(allow_overlapping_allocations=False)` makes for Vulkan, which reads
    a `mem_obj_id` as one allocation: any two group roots of one pool whose
    byte ranges intersect start at the same offset, so the roots at one offset
    form an object and objects lie side by side (group members stay inside
    their root, as ExecuTorch's aliases do).
    `pool_names` says what a pool is where its number alone does not (the
    device of an ExecuTorch device arena: `{2: "cuda:0"}`); solvers ignore it,
    plots and reports name the pool by it (`pool_label`).
    """

    buffers: tuple[Buffer, ...]
    groups: tuple[ContiguousGroup, ...] = ()
    same_offsets: tuple[SameOffset, ...] = ()
    capacity: int | None = None
    name: str = ""
    banks: tuple[Bank, ...] = ()
    shared_objects: bool = False
    pool_names: Mapping[int, str] = field(default_factory=dict, hash=False)
    _by_id: dict[str, Buffer] = field(init=False, repr=False, compare=False)
    _parent_of: dict[str, tuple[str, int]] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "buffers", tuple(self.buffers))
        object.__setattr__(self, "groups", tuple(self.groups))
        object.__setattr__(self, "same_offsets", tuple(self.same_offsets))
        self._check_banks()
        self._check_pool_names()
        by_id: dict[str, Buffer] = {}
        for buf in self.buffers:
            if buf.id in by_id:
                raise ProblemError(f"buffer id {buf.id!r} appears twice")
            by_id[buf.id] = buf
        object.__setattr__(self, "_by_id", by_id)
        if self.capacity is not None:
            object.__setattr__(self, "capacity", checked_integer("capacity", self.capacity))
            if self.capacity <= 0:
                raise ProblemError(f"capacity must be positive, got {self.capacity}")
        object.__setattr__(self, "_parent_of", self._check_groups())
        self._check_nested_alignment()
        self._check_same_offsets()
        self._check_magnitude()
        self._check_bank_choices()
        self._check_shared_objects()

    # -- views -------------------------------------------------------------
    def __repr__(self) -> str:
        """One line, whatever the size (the field-by-field form of a big problem floods a notebook)."""
        parts = [
            f"{len(self.buffers):,} buffers",
            f"{len(self.groups):,} groups",
            f"{len(self.same_offsets):,} same-offset sets",
            f"pools [{', '.join(self._pool_with_name(p) for p in self.pools)}]",
            f"lower bound {lower_bound(self):,} B",
        ]
        if self.capacity is not None:
            parts.append(f"capacity {self.capacity:,} B")
        if self.banks:
            parts.append(f"{len(self.banks)} banks")
        if self.shared_objects:
            parts.append("shared objects")
        return f"Problem({self.name!r}, {', '.join(parts)})"

    def _pool_with_name(self, pool: int) -> str:
        return f"{pool} ({self.pool_names[pool]})" if pool in self.pool_names else str(pool)

    def to_frame(self) -> Any:
        """The buffers as a pandas DataFrame, one row each (pandas is imported here, not at import)."""
        import pandas as pd

        rows = []
        for b in self.buffers:
            parent = self._parent_of.get(b.id)
            rows.append(
                {
                    **b.scalar_fields(),
                    "parent": parent[0] if parent else None,
                    "offset_in_parent": parent[1] if parent else None,
                }
            )
        return pd.DataFrame(rows).astype({"offset": "Int64", "offset_in_parent": "Int64"})

    def _repr_html_(self) -> str:
        frame = self.to_frame()
        more = f"<p>first 20 of {len(frame):,} buffers</p>" if len(frame) > 20 else ""
        return f"<p>{html.escape(repr(self))}</p>{more}" + frame.head(20).to_html(index=False)

    # -- lookups -----------------------------------------------------------
    def buffer(self, buffer_id: str) -> Buffer:
        try:
            return self._by_id[buffer_id]
        except KeyError:
            raise ProblemError(f"unknown buffer {buffer_id!r}") from None

    def __contains__(self, buffer_id: object) -> bool:
        return buffer_id in self._by_id

    def parent_of(self, buffer_id: str) -> tuple[str, int] | None:
        """(parent id, byte offset inside it) if the buffer is a group member."""
        return self._parent_of.get(buffer_id)

    def root_of(self, buffer_id: str) -> tuple[str, int]:
        """The outermost enclosing buffer and this buffer's byte offset inside it."""
        rel = 0
        while (link := self._parent_of.get(buffer_id)) is not None:
            buffer_id, step = link
            rel += step
        return buffer_id, rel

    def roots(self) -> list[Buffer]:
        """Buffers that are no group's member: the rectangles a solver places."""
        return [b for b in self.buffers if b.id not in self._parent_of]

    @property
    def pools(self) -> list[int]:
        return sorted({b.pool for b in self.buffers})

    def pool_label(self, pool: int) -> str:
        """How plots and reports name a pool: "mem_id 2 · cuda:0" (its name, else its bank's), or "mem_id 2"."""
        bank = self.bank(pool)
        name = self.pool_names.get(pool) or (bank.name if bank is not None else "")
        return f"mem_id {pool} · {name}" if name else f"mem_id {pool}"

    def bank(self, pool: int) -> Bank | None:
        """The declared bank of `pool`, or None if the pool is not a bank."""
        return next((bank for bank in self.banks if bank.pool == pool), None)

    @property
    def has_bank_choice(self) -> bool:
        """True if some buffer may go to more than one bank: the solver must choose."""
        return any(len(b.banks) > 1 for b in self.buffers)

    # -- checks ----------------------------------------------------------------
    def _check_banks(self) -> None:
        """Unique names and pools; a missing cost becomes the bank's preference position."""
        banks = tuple(self.banks)
        checks: tuple[tuple[str, list[Any]], ...] = (
            ("name", [b.name for b in banks]),
            ("pool", [b.pool for b in banks]),
        )
        for kind, values in checks:
            twice = sorted({v for v in values if values.count(v) > 1})
            if twice:
                raise ProblemError(f"banks share the {kind} {twice}; each bank needs its own")
        banks = tuple(b if b.cost is not None else replace(b, cost=float(i)) for i, b in enumerate(banks))
        object.__setattr__(self, "banks", banks)

    def _check_pool_names(self) -> None:
        """Integer pools, non-empty one-line names; kept as a dict in pool order."""
        if not isinstance(self.pool_names, Mapping):
            raise ProblemError(f"pool_names must map pools to names, got {self.pool_names!r}")
        names = {}
        for pool, name in self.pool_names.items():
            number = checked_integer("pool_names: pool", pool)
            if not isinstance(name, str) or not name.strip() or "\n" in name:
                raise ProblemError(
                    f"pool_names: the name of pool {number} must be a one-line string, got {name!r}"
                )
            names[number] = name
        object.__setattr__(self, "pool_names", dict(sorted(names.items())))

    def _check_bank_choices(self) -> None:
        declared = {b.pool for b in self.banks}
        for buf in self.buffers:
            unknown = [p for p in buf.banks if p not in declared]
            if unknown:
                raise ProblemError(
                    f"buffer {buf.id!r}: banks {unknown} are not declared banks of the problem"
                    f" (declared: {sorted(declared)})"
                )
        for buf in self.buffers:
            if buf.offset is not None:
                self._check_fixed_in_banks(buf)
        for member, (parent, _) in self._parent_of.items():
            if self._by_id[member].banks != self._by_id[parent].banks:
                raise ProblemError(
                    f"group member {member!r} may go to banks {list(self._by_id[member].banks)} but its"
                    f" parent {parent!r} to {list(self._by_id[parent].banks)}; a group moves as one"
                )
        for sset in self.same_offsets:
            choices = {self._by_id[b].banks for b in sset.buffers}
            if len(choices) > 1:
                raise ProblemError(
                    f"same-offset set {sset.buffers}: members may go to different banks"
                    f" {sorted(list(c) for c in choices)}; buffers sharing an offset share a bank"
                )

    def _check_fixed_in_banks(self, fixed: Buffer) -> None:
        """Some pool the root of a fixed buffer may go to keeps its offset aligned (a bank's
        alignment applies to the roots placed in it)."""
        root_id, rel = self.root_of(fixed.id)
        root = self._by_id[root_id]
        at = fixed.offset - rel if fixed.offset is not None else 0
        refusing = {}
        for pool in root.choices:
            bank = self.bank(pool)
            alignment = root.alignment if bank is None else math.lcm(root.alignment, bank.alignment)
            if at % alignment == 0:
                return
            refusing[bank.name if bank else f"mem_id {pool}"] = alignment
        raise ProblemError(
            f"buffer {fixed.id!r} pins {root_id!r} at offset {at}, which no bank it may go to keeps"
            f" aligned: {', '.join(f'{name!r} needs a multiple of {a}' for name, a in refusing.items())}"
        )

    def _check_groups(self) -> dict[str, tuple[str, int]]:
        parent_of: dict[str, tuple[str, int]] = {}
        for group in self.groups:
            parent = self._known(group.parent, "contiguous group parent")
            if not group.members:
                raise ProblemError(f"contiguous group of {parent.id!r} has no members")
            if parent.gaps:
                raise ProblemError(
                    f"contiguous group of {parent.id!r}: a group parent cannot have lifetime gaps"
                )
            for member_id, rel in group.members:
                member = self._known(member_id, f"member of the group of {parent.id!r}")
                where = f"group member {member.id!r} inside {parent.id!r}"
                if member.gaps:
                    raise ProblemError(f"{where}: a group member cannot have lifetime gaps")
                if member.id == parent.id:
                    raise ProblemError(f"{where}: a buffer cannot be its own member")
                if member.id in parent_of:
                    raise ProblemError(
                        f"{where}: already a member of the group of {parent_of[member.id][0]!r}"
                    )
                if rel < 0 or rel + member.size > parent.size:
                    raise ProblemError(
                        f"{where}: bytes [{rel}, {rel + member.size}) do not fit in the"
                        f" parent's {parent.size} bytes"
                    )
                if member.start < parent.start or member.end > parent.end:
                    raise ProblemError(
                        f"{where}: lifetime [{member.start}, {member.end}) is not inside the"
                        f" parent's [{parent.start}, {parent.end}); extend the parent's lifetime"
                    )
                if member.pool != parent.pool:
                    raise ProblemError(f"{where}: pool {member.pool} differs from the parent's {parent.pool}")
                if rel % member.alignment:
                    raise ProblemError(
                        f"{where}: offset {rel} inside the parent breaks the member's alignment"
                        f" {member.alignment}"
                    )
                parent_of[member.id] = (parent.id, rel)
        for start in parent_of:  # reject cycles
            seen = {start}
            node = start
            while node in parent_of:
                node = parent_of[node][0]
                if node in seen:
                    raise ProblemError(f"contiguous groups form a cycle through {node!r}")
                seen.add(node)
        return parent_of

    def _check_nested_alignment(self) -> None:
        """Solvers align only the outermost parent, so every member must be aligned relative to it."""
        for member_id in self._parent_of:
            root, rel = self.root_of(member_id)
            alignment = self._by_id[member_id].alignment
            if rel % alignment:
                raise ProblemError(
                    f"nested group member {member_id!r} sits {rel} bytes into its outermost parent"
                    f" {root!r}, not a multiple of its alignment {alignment}"
                )

    def _check_same_offsets(self) -> None:
        for sset in self.same_offsets:
            if len(sset.buffers) < 2:
                raise ProblemError(f"same-offset set {sset.buffers} needs at least two buffers")
            members = [self._known(b, "same-offset set member") for b in sset.buffers]
            for buf in members:
                if buf.id in self._parent_of:
                    raise ProblemError(
                        f"same-offset set {sset.buffers}: {buf.id!r} is a group member; put its"
                        " group's parent in the set instead"
                    )
            fixed = {b.offset for b in members if b.offset is not None}
            if len(fixed) > 1:
                raise ProblemError(
                    f"same-offset set {sset.buffers}: members have different fixed offsets {sorted(fixed)}"
                )
            for i, a in enumerate(members):
                for b in members[i + 1 :]:
                    if a.pool == b.pool and a.lives_with(b):
                        raise ProblemError(
                            f"same-offset set {sset.buffers}: {a.id!r} and {b.id!r} are live at the"
                            f" same time in pool {a.pool}, so they cannot share an offset"
                        )
        self._check_joined_same_offsets()

    def _check_joined_same_offsets(self) -> None:
        """Sets sharing a member are one set: all their members get one offset, so members of
        different sets must not be live together in a pool nor pinned at different offsets."""
        for ids in self.joined_same_offsets():
            sets = [s.buffers for s in self.same_offsets if s.buffers[0] in ids]
            if len(sets) < 2:
                continue
            members = [self._by_id[b] for b in ids]
            fixed = {b.offset for b in members if b.offset is not None}
            if len(fixed) > 1:
                raise ProblemError(
                    f"same-offset sets {sets} share members, so all of {ids} need one offset, but they"
                    f" are pinned at different offsets {sorted(fixed)}"
                )
            for i, a in enumerate(members):
                for b in members[i + 1 :]:
                    if a.pool == b.pool and a.lives_with(b):
                        raise ProblemError(
                            f"same-offset sets {sets} share members, so {a.id!r} and {b.id!r} would"
                            f" share an offset, but they are live at the same time in pool {a.pool}"
                        )

    def joined_same_offsets(self) -> list[list[str]]:
        """The same-offset sets, those sharing a member joined into one (ids in first-seen order)."""
        clusters = [list(s.buffers) for s in self.same_offsets]
        parent = list(range(len(clusters)))

        def find(i: int) -> int:
            while parent[i] != i:
                parent[i] = parent[parent[i]]
                i = parent[i]
            return i

        owner: dict[str, int] = {}
        for i, cluster in enumerate(clusters):
            for b in cluster:
                if b in owner:
                    parent[find(i)] = find(owner[b])
                else:
                    owner[b] = i
        merged: dict[int, list[str]] = {}
        for i, cluster in enumerate(clusters):
            bucket = merged.setdefault(find(i), [])
            bucket.extend(b for b in cluster if b not in bucket)
        return list(merged.values())

    def _check_shared_objects(self) -> None:
        """In the shared-objects form, pinned roots of one pool whose bytes intersect share their offset
        (a root in a same-offset set with a pinned one is pinned too)."""
        if not isinstance(self.shared_objects, bool):
            raise ProblemError(f"shared_objects must be True or False, got {self.shared_objects!r}")
        if not self.shared_objects:
            return
        at: dict[str, int] = {}  # pinned roots: by a fixed buffer inside, or through a same-offset set
        for buf in self.buffers:
            if buf.offset is not None:
                root_id, rel = self.root_of(buf.id)
                at[root_id] = buf.offset - rel
        for _ in self.same_offsets:  # a set may pin another through a shared member: at most once each
            for sset in self.same_offsets:
                found = next((at[b] for b in sset.buffers if b in at), None)
                if found is not None:
                    at.update({b: found for b in sset.buffers})
        pinned: dict[int, list[tuple[int, int, str]]] = {}
        for root_id, offset in at.items():
            root = self._by_id[root_id]
            if not root.banks and root.size > 0:
                pinned.setdefault(root.pool, []).append((offset, root.size, root_id))
        for pool, roots in pinned.items():
            ordered = sorted(set(roots))
            for (base, size, rid), (other_at, _, other) in zip(ordered, ordered[1:]):
                if base < other_at < base + size:
                    raise ProblemError(
                        f"shared objects: {rid!r} is pinned at {base} and {other!r} at {other_at} in pool"
                        f" {pool}; their bytes intersect, so they would have to start at the same offset"
                    )

    def _check_magnitude(self) -> None:
        """The worst arena (every buffer stacked, each padded to its alignment) must fit MAX_COORDINATE."""
        worst = sum(b.size + b.alignment for b in self.buffers) + max(
            [b.offset + b.size for b in self.buffers if b.offset is not None], default=0
        )
        if worst > MAX_COORDINATE:
            biggest = sorted(self.buffers, key=lambda b: -b.size)[:3]
            raise ProblemError(
                f"the buffers together need up to {worst} bytes, beyond 2^62, more than solvers can"
                f" represent; the largest: {', '.join(f'{b.id!r} ({b.size})' for b in biggest)}"
            )

    def _known(self, buffer_id: str, role: str) -> Buffer:
        if buffer_id not in self._by_id:
            raise ProblemError(f"{role} {buffer_id!r} is not a buffer of this problem")
        return self._by_id[buffer_id]
