"""The parts a `Problem` is made of: buffers (with their gaps and live segments), contiguous groups,
same-offset sets and banks. Each part checks its own fields when built; `memplan.problem` checks how
they fit together."""

from __future__ import annotations

import numbers
from dataclasses import dataclass
from enum import Enum
from typing import Any

from memplan.errors import ProblemError

__all__ = [
    "MAX_COORDINATE",
    "Bank",
    "Buffer",
    "BufferKind",
    "ContiguousGroup",
    "Gap",
    "SameOffset",
    "Segment",
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
            object.__setattr__(self, name, checked_integer(f"gap {name}", getattr(self, name)))
        if self.window is not None:
            low, high = self.window
            object.__setattr__(
                self, "window", (checked_integer("gap window", low), checked_integer("gap window", high))
            )


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
                object.__setattr__(self, name, checked_integer(f"buffer {self.id!r}: {name}", value))
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
        object.__setattr__(
            self, "banks", tuple(checked_integer(f"buffer {self.id!r}: bank", p) for p in self.banks)
        )
        object.__setattr__(self, "accesses", checked_integer(f"buffer {self.id!r}: accesses", self.accesses))
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


def checked_integer(what: str, value: object) -> int:
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
                (m, checked_integer(f"group member {m!r} inside {self.parent!r}: offset", o))
                for m, o in self.members
            ),
        )


@dataclass(frozen=True)
class SameOffset:
    """Buffers that must share one offset (e.g. one state tensor seen by several methods)."""

    buffers: tuple[str, ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "buffers", tuple(self.buffers))


MAX_BANK_COST = 1e6
"""The largest bank cost: costs weigh banks against each other (the fastest often 0 or 1), and
bytes x accesses x cost must stay an ordinary float."""


def _bank_cost(bank: str, value: object) -> float:
    """A bank's cost as a float: a real number (not a bool), from 0 to `MAX_BANK_COST`."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ProblemError(f"bank {bank!r}: cost must be a number, got {value!r}")
    number = value if isinstance(value, int) else float(value)  # huge ints compared exactly, not as inf
    if not 0 <= number <= MAX_BANK_COST:  # NaN fails both comparisons
        shown = (
            "an integer of more than 60 digits"
            if isinstance(value, int) and value > 1 << 200
            else repr(value)
        )
        raise ProblemError(
            f"bank {bank!r}: cost must be between 0 and {MAX_BANK_COST:g} (costs weigh banks against"
            f" each other), got {shown}"
        )
    return float(number)


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
            object.__setattr__(
                self, name, checked_integer(f"bank {self.name!r}: {name}", getattr(self, name))
            )
        if self.capacity < 0:
            raise ProblemError(f"bank {self.name!r}: capacity must be >= 0, got {self.capacity}")
        if self.alignment < 1:
            raise ProblemError(f"bank {self.name!r}: alignment must be >= 1, got {self.alignment}")
        if self.cost is not None:
            object.__setattr__(self, "cost", _bank_cost(self.name, self.cost))
