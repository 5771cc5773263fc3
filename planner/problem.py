"""The one representation of a memory-planning problem and its solution.

Every source (ExecuTorch programs, MiniMalloc CSV, generators) produces a
`Problem`; every solver returns a `Plan`; plots, sweeps and CSV interop read
them. Lifetimes are half-open `[start, end)` everywhere in here: two buffers
conflict only if their lifetimes intersect under that reading. Conversion from
other conventions happens at the edges (extraction, file readers).

This module imports nothing heavy (no torch), so pure solvers can use it.
"""

from __future__ import annotations

import html
import math
from collections import defaultdict
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field, replace
from enum import Enum
from typing import Any

from sortedcontainers import SortedList

import memplan.planner.timeline as timeline
from memplan.planner.errors import (
    BankCapacityError,
    InfeasibleError,
    InvalidPlanError,
    ProblemError,
    SolverOptionError,
    UnsupportedProblemError,
)

__all__ = [  # the error types are re-exported: most callers know them from here
    "Buffer",
    "BankCapacityError",
    "BufferKind",
    "ContiguousGroup",
    "InfeasibleError",
    "InvalidPlanError",
    "Outcome",
    "Plan",
    "Problem",
    "ProblemError",
    "SameOffset",
    "SolverOptionError",
    "UnsupportedProblemError",
    "Violation",
    "ViolationKind",
    "align_up",
    "arena_sizes_of",
    "ceil_div",
    "check_plan",
    "common_divisor",
    "lower_bound",
    "lower_bounds",
    "validate",
]


MAX_COORDINATE = 1 << 62
"""Largest magnitude of a time, size, offset or alignment, and of the biggest arena a problem can
need (all sizes stacked): solvers compute in 64-bit integers (CP-SAT, numpy), and sums of such
values must not wrap."""


class BufferKind(str, Enum):
    """What a buffer is in its program; drives colours in plots and reports."""

    ACTIVATION = "activation"
    GRAPH_INPUT = "graph_input"
    GRAPH_OUTPUT = "graph_output"
    MUTABLE_STATE = "mutable_state"
    SUBMODULE = "submodule"  # space reserved for a control-flow submodule
    OTHER = "other"


@dataclass(frozen=True)
class Gap:
    """A time `[start, end)` inside a buffer's lifetime when it holds fewer bytes, or none.

    MiniMalloc's `gaps`: without `window` the buffer is absent; with
    `window=(low, high)` it occupies only bytes `[offset + low, offset + high)`.
    """

    start: int
    end: int
    window: tuple[int, int] | None = None

    def __post_init__(self) -> None:
        for name in ("start", "end"):
            object.__setattr__(self, name, _integer(f"gap {name}", getattr(self, name)))
        if self.window is not None:
            low, high = self.window
            object.__setattr__(self, "window", (_integer("gap window", low), _integer("gap window", high)))


@dataclass(frozen=True)
class Segment:
    """A stretch `[start, end)` of a buffer's life with the bytes `[low, high)` above its offset in use."""

    start: int
    end: int
    low: int
    high: int


@dataclass(frozen=True)
class Buffer:
    """One block of bytes that lives over `[start, end)` and needs an offset.

    `offset` pins the buffer (a fixed, pre-assigned offset); `pool` is the
    memory arena it goes into (ExecuTorch's `mem_id`); `alignment` means the
    offset must be a multiple of it. `gaps` are times inside the lifetime
    when the buffer holds fewer bytes or none (sorted, disjoint); a size of 0
    (ExecuTorch has zero-byte tensors) overlaps nothing.
    """

    id: str
    start: int
    end: int
    size: int
    alignment: int = 1
    offset: int | None = None
    pool: int = 0
    kind: BufferKind = BufferKind.ACTIVATION
    label: str = ""
    gaps: tuple[Gap, ...] = ()
    # The bank pools the buffer may go to (a choice for the solver); () means it stays in `pool`.
    banks: tuple[int, ...] = ()
    # How often the program reads or writes the buffer: its traffic is size x accesses.
    accesses: int = 1

    def scalar_fields(self) -> dict[str, Any]:
        """The fields every buffer has, as plain values (the kind by its value), in field order.

        One row shape for the JSON writer and `Problem.to_frame`; gaps, banks and accesses are
        added by each where they mean something.
        """
        return {
            "id": self.id,
            "start": self.start,
            "end": self.end,
            "size": self.size,
            "alignment": self.alignment,
            "offset": self.offset,
            "pool": self.pool,
            "kind": self.kind.value,
            "label": self.label,
        }

    def __post_init__(self) -> None:
        if not isinstance(self.id, str) or not self.id:
            raise ProblemError(f"buffer id must be a non-empty string, got {self.id!r}")
        for name in ("start", "end", "size", "alignment", "offset", "pool"):
            value = getattr(self, name)
            if value is not None or name != "offset":
                object.__setattr__(self, name, _integer(f"buffer {self.id!r}: {name}", value))
        if self.size < 0:
            raise ProblemError(f"buffer {self.id!r}: size must not be negative, got {self.size}")
        if self.end <= self.start:
            raise ProblemError(
                f"buffer {self.id!r}: lifetime [start={self.start}, end={self.end}) is empty"
                " (end must be greater than start; lifetimes are half-open)"
            )
        if self.alignment < 1:
            raise ProblemError(f"buffer {self.id!r}: alignment must be >= 1, got {self.alignment}")
        if self.offset is not None:
            if self.offset < 0:
                raise ProblemError(f"buffer {self.id!r}: fixed offset {self.offset} is negative")
            if self.offset % self.alignment:
                raise ProblemError(
                    f"buffer {self.id!r}: fixed offset {self.offset} is not a multiple of"
                    f" its alignment {self.alignment}"
                )
        if not isinstance(self.kind, BufferKind):
            object.__setattr__(self, "kind", BufferKind(self.kind))
        object.__setattr__(self, "banks", tuple(_integer(f"buffer {self.id!r}: bank", p) for p in self.banks))
        object.__setattr__(self, "accesses", _integer(f"buffer {self.id!r}: accesses", self.accesses))
        if self.banks and self.pool not in self.banks:
            raise ProblemError(
                f"buffer {self.id!r}: pool {self.pool} is not one of its banks {list(self.banks)}"
                " (give the first bank it may go to as its pool)"
            )
        if len(set(self.banks)) != len(self.banks):
            raise ProblemError(f"buffer {self.id!r}: banks {list(self.banks)} repeat a pool")
        if self.accesses < 0:
            raise ProblemError(f"buffer {self.id!r}: accesses must be >= 0, got {self.accesses}")
        self._check_gaps()

    @property
    def choices(self) -> tuple[int, ...]:
        """The pools this buffer may be placed in (just its pool unless it has banks)."""
        return self.banks or (self.pool,)

    def _check_gaps(self) -> None:
        gaps = tuple(g if isinstance(g, Gap) else Gap(*g) for g in self.gaps)
        object.__setattr__(self, "gaps", gaps)
        previous_end = self.start
        for gap in gaps:
            where = f"buffer {self.id!r}: gap [{gap.start}, {gap.end})"
            if not (previous_end <= gap.start < gap.end <= self.end):
                raise ProblemError(
                    f"{where} must be non-empty, inside the lifetime [{self.start}, {self.end}) and after"
                    " the previous gap (gaps are sorted and disjoint)"
                )
            if gap.window is not None and not 0 <= gap.window[0] <= gap.window[1] <= self.size:
                raise ProblemError(
                    f"{where}: window {list(gap.window)} is not within the buffer's {self.size} bytes"
                )
            previous_end = gap.end

    def segments(self) -> list[Segment]:
        """The buffer's life in pieces, each with the bytes in use; gaps without a window are left out."""
        pieces: list[Segment] = []
        at = self.start
        for gap in self.gaps:
            if at < gap.start:
                pieces.append(Segment(at, gap.start, 0, self.size))
            if gap.window is not None and gap.window[0] < gap.window[1]:
                pieces.append(Segment(gap.start, gap.end, *gap.window))
            at = gap.end
        if at < self.end:
            pieces.append(Segment(at, self.end, 0, self.size))
        return pieces

    def lives_with(self, other: Buffer) -> bool:
        """True if the two buffers are ever present at the same time (half-open lifetimes, gaps left out)."""
        if not (self.start < other.end and other.start < self.end):
            return False
        if not self.gaps and not other.gaps:
            return True
        return any(a.start < b.end and b.start < a.end for a in self.segments() for b in other.segments())


def _integer(what: str, value: object) -> int:
    """`value` as an int if it is one (numpy integers too, not bools or floats) within MAX_COORDINATE."""
    if isinstance(value, bool) or not hasattr(value, "__index__"):
        raise ProblemError(f"{what} must be an integer, got {value!r}")
    number = value.__index__()
    if abs(number) > MAX_COORDINATE:
        raise ProblemError(f"{what} is {number}, beyond 2^62, more than solvers can represent")
    return number


@dataclass(frozen=True)
class ContiguousGroup:
    """Members placed at fixed byte offsets inside a parent buffer.

    Used for cat fusion (inputs back to back inside the output) and aliases
    (a view inside its base). The parent's bytes and lifetime must cover every
    member, so the group occupies exactly the parent's rectangle.
    """

    parent: str
    members: tuple[tuple[str, int], ...]

    def __post_init__(self) -> None:
        object.__setattr__(
            self,
            "members",
            tuple(
                (m, _integer(f"group member {m!r} inside {self.parent!r}: offset", o))
                for m, o in self.members
            ),
        )


@dataclass(frozen=True)
class SameOffset:
    """Buffers that must share one offset (e.g. one state tensor seen by several methods)."""

    buffers: tuple[str, ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "buffers", tuple(self.buffers))


@dataclass(frozen=True)
class Bank:
    """A memory the planner may fill: pool `pool` (ExecuTorch's mem_id) of at most `capacity` bytes.

    `cost` weighs a byte accessed in this bank against the others (None: its
    position in the problem's preference order, fastest first = 0).
    `alignment` tightens the alignment of every buffer placed in it, and rounds
    its size up to a multiple of it, as ExecuTorch's `Bank.alignment` does.
    """

    name: str
    pool: int
    capacity: int
    cost: float | None = None
    alignment: int = 1

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ProblemError(f"bank of pool {self.pool}: name must be a non-empty string")
        for name in ("pool", "capacity", "alignment"):
            object.__setattr__(self, name, _integer(f"bank {self.name!r}: {name}", getattr(self, name)))
        if self.capacity < 0:
            raise ProblemError(f"bank {self.name!r}: capacity must be >= 0, got {self.capacity}")
        if self.alignment < 1:
            raise ProblemError(f"bank {self.name!r}: alignment must be >= 1, got {self.alignment}")
        if self.cost is not None and self.cost < 0:
            raise ProblemError(f"bank {self.name!r}: cost must be >= 0, got {self.cost}")


@dataclass(frozen=True)
class Problem:
    """Buffers plus constraints. `capacity` bounds every pool's arena, if set.

    `banks` (in preference order, fastest first) declares capacity-bounded pools
    and their cost per byte accessed; a buffer whose `banks` lists several of
    them leaves the choice to the solver (see `place_in_banks`).
    """

    buffers: tuple[Buffer, ...]
    groups: tuple[ContiguousGroup, ...] = ()
    same_offsets: tuple[SameOffset, ...] = ()
    capacity: int | None = None
    name: str = ""
    banks: tuple[Bank, ...] = ()
    _by_id: dict[str, Buffer] = field(init=False, repr=False, compare=False)
    _parent_of: dict[str, tuple[str, int]] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "buffers", tuple(self.buffers))
        object.__setattr__(self, "groups", tuple(self.groups))
        object.__setattr__(self, "same_offsets", tuple(self.same_offsets))
        self._check_banks()
        by_id: dict[str, Buffer] = {}
        for buf in self.buffers:
            if buf.id in by_id:
                raise ProblemError(f"buffer id {buf.id!r} appears twice")
            by_id[buf.id] = buf
        object.__setattr__(self, "_by_id", by_id)
        if self.capacity is not None:
            object.__setattr__(self, "capacity", _integer("capacity", self.capacity))
            if self.capacity <= 0:
                raise ProblemError(f"capacity must be positive, got {self.capacity}")
        object.__setattr__(self, "_parent_of", self._check_groups())
        self._check_nested_alignment()
        self._check_same_offsets()
        self._check_magnitude()
        self._check_bank_choices()

    # -- views -------------------------------------------------------------
    def __repr__(self) -> str:
        """One line, whatever the size (the field-by-field form of a big problem floods a notebook)."""
        parts = [
            f"{len(self.buffers):,} buffers",
            f"{len(self.groups):,} groups",
            f"{len(self.same_offsets):,} same-offset sets",
            f"pools {self.pools}",
            f"lower bound {lower_bound(self):,} B",
        ]
        if self.capacity is not None:
            parts.append(f"capacity {self.capacity:,} B")
        if self.banks:
            parts.append(f"{len(self.banks)} banks")
        return f"Problem({self.name!r}, {', '.join(parts)})"

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

    def _check_bank_choices(self) -> None:
        declared = {b.pool for b in self.banks}
        for buf in self.buffers:
            unknown = [p for p in buf.banks if p not in declared]
            if unknown:
                raise ProblemError(
                    f"buffer {buf.id!r}: banks {unknown} are not declared banks of the problem"
                    f" (declared: {sorted(declared)})"
                )
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


class Outcome(str, Enum):
    """How a plan came about: what a caller may conclude from it (`Plan.status` adds the detail)."""

    OPTIMAL = "optimal"  # proven: no plan with a smaller arena exists
    FEASIBLE = "feasible"  # fits the capacity of a decision run; smaller plans were not looked for
    TIME_LIMIT = "time_limit"  # an exact search stopped at its time limit: best plan found, not proven
    GAP_LIMIT = "gap_limit"  # an exact search stopped within the optimality gap the caller allowed
    NOT_PROVEN = "not_proven"  # an exact search ended without a proof for this plan (e.g. rounding)
    SOLVER_FAILED = "solver_failed"  # the exact backend failed; the heuristic plan it started from
    HEURISTIC = "heuristic"  # a heuristic's plan, with no claim of optimality


@dataclass(frozen=True)
class Plan:
    """Offsets for every buffer and the arena each pool needs.

    `outcome` says what the plan is (proven optimal, feasible, cut short by a
    time limit, a heuristic's ...), `status` says it in words with the detail.
    `proven_optimal` is `outcome is Outcome.OPTIMAL`: True only when the solver
    proved no smaller arena exists (for a capacity/decision run: that the plan
    is feasible and minimal is not claimed). Left out, `outcome` follows from
    `proven_optimal` (OPTIMAL or HEURISTIC). `lower_bound` is the bound it was
    compared against.
    """

    offsets: Mapping[str, int]
    arena_sizes: Mapping[int, int]
    solver: str
    seconds: float = 0.0
    proven_optimal: bool = False
    lower_bound: int = 0
    status: str = ""
    # The bank chosen for each buffer that had a choice (problem with banks); others stay in their pool.
    pools: Mapping[str, int] = field(default_factory=dict)
    outcome: Outcome | None = None

    def __post_init__(self) -> None:
        if self.outcome is None:
            object.__setattr__(self, "outcome", Outcome.OPTIMAL if self.proven_optimal else Outcome.HEURISTIC)
        elif self.outcome is Outcome.OPTIMAL and not self.proven_optimal:  # a proof withdrawn (replace)
            object.__setattr__(self, "outcome", Outcome.NOT_PROVEN)
        elif self.proven_optimal and self.outcome is not Outcome.OPTIMAL:
            raise ProblemError(
                f"plan from {self.solver!r}: outcome {self.outcome.value} contradicts proven_optimal=True"
            )

    @property
    def arena_size(self) -> int:
        """Bytes over all pools together."""
        return sum(self.arena_sizes.values())

    def __repr__(self) -> str:
        """One line: solver, arena (per pool when several), proof, time, how many offsets."""
        pools = "" if len(self.arena_sizes) <= 1 else f" {dict(sorted(self.arena_sizes.items()))}"
        proof = "proven optimal" if self.proven_optimal else (self.status or "not proven optimal")
        return (
            f"Plan({self.solver!r}, arena {self.arena_size:,} B{pools}, {proof},"
            f" {self.seconds:.3f} s, {len(self.offsets):,} offsets)"
        )

    def to_frame(self, problem: Problem | None = None) -> Any:
        """Offsets as a pandas DataFrame; with `problem`, each buffer's lifetime, size and pool too."""
        import pandas as pd

        rows = []
        for buffer_id, offset in self.offsets.items():
            row: dict[str, Any] = {"id": buffer_id, "offset": offset}
            if problem is not None and buffer_id in problem:
                b = problem.buffer(buffer_id)
                row.update(start=b.start, end=b.end, size=b.size, pool=b.pool, kind=b.kind.value)
            rows.append(row)
        return pd.DataFrame(rows)

    def _repr_html_(self) -> str:
        return f"<p>{html.escape(repr(self))}</p>" + self.to_frame().head(20).to_html(index=False)


def arena_sizes_of(problem: Problem, offsets: Mapping[str, int]) -> dict[int, int]:
    """The bytes each pool needs for these offsets: its highest end address."""
    sizes: dict[int, int] = {pool: 0 for pool in problem.pools}
    for buf in problem.buffers:
        sizes[buf.pool] = max(sizes[buf.pool], offsets[buf.id] + buf.size)
    return sizes


# -- banks -----------------------------------------------------------------------


def place_in_banks(problem: Problem, pools: Mapping[str, int]) -> Problem:
    """The problem with every bank choice made: an ordinary multi-pool problem.

    `pools` gives the chosen pool of each group root or same-offset set member
    with a choice (members follow their root; a buffer absent from `pools`
    stays in its `pool`). Every root placed in a declared bank takes the bank's
    alignment and is rounded up to it. The banks stay declared (capacities,
    costs); no buffer has a choice left. Raises `ProblemError` naming the
    buffer if a choice is not one of its banks.
    """
    if not problem.banks:
        return problem
    bank_of = {b.pool: b for b in problem.banks}
    buffers = []
    for buf in problem.buffers:
        root, _ = problem.root_of(buf.id)
        pool = pools.get(root, problem.buffer(root).pool)
        if pool not in buf.choices:
            raise ProblemError(
                f"buffer {buf.id!r} is placed in pool {pool}, not one of its banks {list(buf.choices)}"
            )
        alignment, size = buf.alignment, buf.size
        bank = bank_of.get(pool)
        if bank is not None and root == buf.id:
            alignment = math.lcm(alignment, bank.alignment)
            size = align_up(size, alignment)
        buffers.append(replace(buf, pool=pool, banks=(), alignment=alignment, size=size))
    return replace(problem, buffers=tuple(buffers))


def bank_part(placed: Problem, keep: Collection[str]) -> Problem:
    """The buffers `keep` of a problem whose bank choices are made (`place_in_banks`), with their
    groups and same-offset sets, as an ordinary problem: no banks, no capacity (one bank's packing)."""
    return replace(
        placed,
        buffers=tuple(b for b in placed.buffers if b.id in keep),
        groups=tuple(g for g in placed.groups if g.parent in keep),
        same_offsets=tuple(s for s in placed.same_offsets if s.buffers[0] in keep),
        banks=(),
        capacity=None,
    )


def chosen_pools(problem: Problem, plan: Plan) -> dict[str, int]:
    """Every buffer's pool under `plan` (its chosen bank, members following their root)."""
    out = {}
    for buf in problem.buffers:
        root, _ = problem.root_of(buf.id)
        out[buf.id] = plan.pools.get(root, problem.buffer(root).pool)
    return out


def traffic(problem: Problem, pools: Mapping[str, int] | None = None) -> dict[int, int]:
    """Bytes accessed per pool: every buffer's size x accesses, in the pool it is placed in."""
    out: dict[int, int] = defaultdict(int)
    for buf in problem.buffers:
        root, _ = problem.root_of(buf.id)
        pool = buf.pool if pools is None else pools.get(root, problem.buffer(root).pool)
        out[pool] += buf.size * buf.accesses
    return dict(out)


def traffic_cost(problem: Problem, pools: Mapping[str, int] | None = None) -> float:
    """The objective after fitting: traffic weighted by each bank's cost (pools that are not banks cost 0)."""
    cost = {b.pool: b.cost or 0.0 for b in problem.banks}
    return sum(bytes_ * cost.get(pool, 0.0) for pool, bytes_ in traffic(problem, pools).items())


@dataclass(frozen=True)
class BankUsage:
    """What a plan puts in one bank (or undeclared pool): arena bytes, peak live bytes, traffic."""

    name: str
    pool: int
    capacity: int | None
    bytes: int
    peak: int
    traffic: int
    buffers: int

    @property
    def missing(self) -> int:
        """Bytes over capacity (0 when it fits)."""
        return 0 if self.capacity is None else max(0, self.bytes - self.capacity)


def bank_report(problem: Problem, plan: Plan) -> list[BankUsage]:
    """Per bank (preference order), then per other pool: bytes, peak live bytes and traffic."""
    placed = place_in_banks(problem, plan.pools)
    peaks = lower_bounds(placed)
    moved = traffic(placed)
    counts: dict[int, int] = defaultdict(int)
    for buf in placed.buffers:
        counts[buf.pool] += 1
    declared = [b.pool for b in problem.banks]
    others = sorted((set(plan.arena_sizes) | set(placed.pools)) - set(declared))
    rows = []
    for pool in declared + others:
        bank = problem.bank(pool)
        rows.append(
            BankUsage(
                name=bank.name if bank else f"mem_id {pool}",
                pool=pool,
                capacity=bank.capacity if bank else problem.capacity,
                bytes=plan.arena_sizes.get(pool, 0),
                peak=peaks.get(pool, 0),
                traffic=moved.get(pool, 0),
                buffers=counts.get(pool, 0),
            )
        )
    return rows


def format_bank_report(rows: Iterable[BankUsage]) -> str:
    """The per-bank report as a small text table."""
    rows = list(rows)
    total = sum(r.traffic for r in rows) or 1
    lines = [f"{'bank':<12}{'mem_id':>7}{'bytes':>12}{'capacity':>12}{'peak':>12}{'traffic':>14}{'share':>8}"]
    for r in rows:
        cap = "-" if r.capacity is None else str(r.capacity)
        lines.append(
            f"{r.name:<12}{r.pool:>7}{r.bytes:>12}{cap:>12}{r.peak:>12}{r.traffic:>14}{r.traffic / total:>8.1%}"
        )
    return "\n".join(lines)


# -- lower bound ---------------------------------------------------------------


def lower_bounds(problem: Problem) -> dict[int, int]:
    """Per pool: the most bytes live at one moment (a group counted once).

    Also at least the end of every fixed buffer. A sweep over start/end events:
    O(n log n).
    """
    spans: dict[int, list[tuple[int, int, int]]] = defaultdict(list)
    bounds: dict[int, int] = {pool: 0 for pool in problem.pools}
    for buf in problem.roots():
        for seg in buf.segments():
            spans[buf.pool].append((seg.start, seg.end, seg.high - seg.low))
        if buf.offset is not None:
            bounds[buf.pool] = max(bounds[buf.pool], buf.offset + buf.size)
    for pool, pool_spans in spans.items():
        bounds[pool] = max(bounds[pool], timeline.peak(pool_spans)[0])
    return bounds


def lower_bound(problem: Problem) -> int:
    """The most bytes live at any one moment, summed over pools."""
    return sum(lower_bounds(problem).values())


# -- validation ----------------------------------------------------------------


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


@dataclass(frozen=True)
class Violation:
    kind: ViolationKind
    buffers: tuple[str, ...]
    message: str

    def __str__(self) -> str:
        return f"{self.kind.value}: {self.message}"


def validate(problem: Problem, plan: Plan) -> list[Violation]:
    """Every way `plan` breaks `problem`; empty when the plan is valid.

    Independent of every solver. Overlaps are found by a sweep over time that
    keeps the live rectangles ordered by offset, so only neighbours are
    compared: O(n log n), not all pairs.
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
    for buffer_id in offsets:
        if buffer_id not in problem:
            add(
                ViolationKind.UNKNOWN_BUFFER,
                [buffer_id],
                f"plan places {buffer_id!r}, which the problem does not have",
            )
    missing = [b.id for b in problem.buffers if b.id not in offsets]
    for buffer_id in missing:
        add(ViolationKind.MISSING_OFFSET, [buffer_id], f"{buffer_id!r} has no offset")
    if missing:
        return found

    for buf in problem.buffers:
        off = offsets[buf.id]
        if off < 0:
            add(ViolationKind.NEGATIVE_OFFSET, [buf.id], f"{buf.id!r} is at negative offset {off}")
        if off % buf.alignment:
            add(
                ViolationKind.MISALIGNED,
                [buf.id],
                f"{buf.id!r} at {off} is not a multiple of {buf.alignment}",
            )
        if buf.offset is not None and off != buf.offset:
            add(
                ViolationKind.FIXED_OFFSET_MOVED,
                [buf.id],
                f"{buf.id!r} is fixed at {buf.offset} but placed at {off}",
            )

    for group in problem.groups:
        for member, rel in group.members:
            want = offsets[group.parent] + rel
            if offsets[member] != want:
                add(
                    ViolationKind.GROUP_BROKEN,
                    [group.parent, member],
                    f"{member!r} must sit {rel} bytes into {group.parent!r} (at {want}) but is at {offsets[member]}",
                )

    for sset in problem.same_offsets:
        placed = {offsets[b] for b in sset.buffers}
        if len(placed) > 1:
            add(
                ViolationKind.SAME_OFFSET_BROKEN,
                sset.buffers,
                f"buffers {list(sset.buffers)} must share one offset but are at {sorted(placed)}",
            )

    found.extend(_overlaps(problem, offsets))

    used = arena_sizes_of(problem, offsets)
    for pool, need in used.items():
        have = plan.arena_sizes.get(pool)
        if have is None or have < need:
            add(
                ViolationKind.WRONG_ARENA_SIZE,
                [],
                f"pool {pool} needs {need} bytes but the plan declares {have}",
            )
        if problem.capacity is not None and need > problem.capacity:
            top = [
                b.id for b in problem.buffers if b.pool == pool and offsets[b.id] + b.size > problem.capacity
            ]
            add(
                ViolationKind.OVER_CAPACITY,
                top,
                f"pool {pool} needs {need} bytes, over the capacity {problem.capacity}",
            )
        bank = problem.bank(pool)
        if bank is not None and need > bank.capacity:
            top = [b.id for b in problem.buffers if b.pool == pool and offsets[b.id] + b.size > bank.capacity]
            add(
                ViolationKind.OVER_BANK_CAPACITY,
                top,
                f"bank {bank.name!r} (pool {pool}) needs {need} bytes, {need - bank.capacity} over its"
                f" capacity {bank.capacity}",
            )
    return found


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
    comparing roots covers every pair across groups.
    """
    found: list[Violation] = []
    by_pool: dict[int, list[Buffer]] = defaultdict(list)
    for buf in problem.roots():
        by_pool[buf.pool].append(buf)
    for pool, bufs in by_pool.items():
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


def check_plan(problem: Problem, plan: Plan) -> None:
    """Raise `InvalidPlanError` listing the violations if `plan` is not valid."""
    violations = validate(problem, plan)
    if violations:
        shown = "\n  ".join(str(v) for v in violations[:20])
        more = f"\n  ... and {len(violations) - 20} more" if len(violations) > 20 else ""
        raise InvalidPlanError(f"plan from {plan.solver!r} is invalid:\n  {shown}{more}", violations)


def ceil_div(value: int, divisor: int) -> int:
    """`value / divisor` rounded up (integers, `divisor` > 0)."""
    return -(-value // divisor)


def align_up(value: int, alignment: int) -> int:
    """The smallest multiple of `alignment` that is >= `value`."""
    return ceil_div(value, alignment) * alignment


def common_divisor(values: Iterable[int]) -> int:
    """The greatest common divisor of the values (1 if none)."""
    g = 0
    for v in values:
        g = math.gcd(g, v)
    return g or 1
