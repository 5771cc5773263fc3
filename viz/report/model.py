"""What a report shows, as plain data: tensors, the plans of them, the methods of a program.

The figures and the page (viz.report.figures, viz.report.page) read only these classes, so a report
looks the same whether it was built from a lowering (viz.report.sources.from_lowered) or from a
`.pte` file (viz.report.sources.from_pte). Steps are the planner's: positions in the method's
instruction order, lifetimes half-open `[start, end)`.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable
from dataclasses import dataclass, field

from memplan.timeline import peak, profile


@dataclass(frozen=True)
class TensorInfo:
    """One planned tensor: what it is (for hover and tables) and when it is live."""

    name: str
    op: str  # the op that writes it ("input", "state", ...)
    shape: str
    dtype: str
    nbytes: int
    start: int
    end: int
    kind: str  # memplan.problem.BufferKind value
    source: str = ""  # "file.py:12 in forward: code" of the user's line, "" if unknown
    parent: str = ""  # the tensor it sits inside (a fused cat's output, an alias's base)
    shared: bool = False  # state shared across methods (one offset in every method)

    @property
    def lifetime(self) -> str:
        return f"[{self.start}, {self.end})"


@dataclass
class PlanView:
    """One plan of one method: where each tensor sits, and the arena each lane (mem_id) needs."""

    label: str  # "memplan (cpsat)", "ExecuTorch (stock)", "this file"
    tensors: dict[str, TensorInfo]
    offsets: dict[str, tuple[int, int]]  # name -> (mem_id, byte offset)
    arenas: dict[int, int]  # mem_id -> bytes
    lanes: dict[int, str] = field(default_factory=dict)  # mem_id -> "mem_id 1 · sram"
    lower_bound: int | None = None  # None: not known for this plan (then the live peak stands in)
    proven: bool | None = None  # proven optimal (None: not said of this plan)
    not_proven_because: str = ""  # why not, in one line

    @property
    def arena_bytes(self) -> int:
        return sum(self.arenas.values())

    def roots(self) -> list[TensorInfo]:
        """Tensors that hold their own bytes (members sit inside a parent and add none)."""
        return [t for t in self.tensors.values() if not t.parent]

    def lane(self, mem_id: int) -> str:
        return self.lanes.get(mem_id, f"mem_id {mem_id}")

    def live_profile(self) -> tuple[list[int], list[int]]:
        """(steps, bytes live from each step on) over the roots: a step function."""
        return profile((t.start, t.end, t.nbytes) for t in self.roots())

    def live_bytes(self, steps: Iterable[int]) -> list[int]:
        """Bytes of the roots live at each of `steps` (start <= step < end)."""
        changes, levels = self.live_profile()
        at = (bisect.bisect_right(changes, s) - 1 for s in steps)
        return [levels[i] if i >= 0 else 0 for i in at]

    def peak(self) -> tuple[int, int]:
        """(most bytes live at once, the first step where that is reached)."""
        return peak([(t.start, t.end, t.nbytes) for t in self.roots()])

    def live_at(self, step: int) -> list[TensorInfo]:
        """Roots live at `step`, largest first (ties by name)."""
        live = [t for t in self.roots() if t.start <= step < t.end]
        return sorted(live, key=lambda t: (-t.nbytes, t.name))

    def members_of(self, name: str) -> list[TensorInfo]:
        return [t for t in self.tensors.values() if t.parent == name]


@dataclass(frozen=True)
class Instruction:
    """One instruction of the emitted method (viz.report.instructions): where it sits in the program
    (chain, index), what it calls, the graph node it runs ("" for a `.pte`), the step it runs at in
    each plan of the report (None: not known) and the tensors it writes, by name."""

    chain: int
    index: int
    op: str
    node: str
    steps: tuple[int | None, ...]  # per plan of MethodReport.plans, in their order
    outputs: tuple[str, ...]


@dataclass
class MethodReport:
    """One method: memplan's plan first, then what it is compared with; what memplan did per tensor."""

    method: str
    plans: list[PlanView]
    actions: dict[str, list[str]] = field(default_factory=dict)  # tensor name -> sentences
    notes: list[str] = field(default_factory=list)
    emitted: list[int] = field(default_factory=list)  # non_const_buffer_sizes the program holds
    state_bytes: int = 0  # mutable state planned in the arenas
    delegates: list[str] = field(default_factory=list)
    instructions: list[Instruction] = field(default_factory=list)  # the emitted program's, in order

    @property
    def primary(self) -> PlanView:
        return self.plans[0]


@dataclass(frozen=True)
class BankUse:
    """What memplan's plan across a memory map puts in one bank, over the whole program."""

    name: str
    capacity: int
    bytes: int  # the bank's arena: per method as written into the program, the largest method's
    traffic: int  # bytes the emitted instructions move through it per call (every method's, summed)
    tensors: tuple[str, ...]  # the tensors placed in it (shared state and group members left out)


@dataclass(frozen=True)
class BankedPlan:
    """memplan's plan of the program across a memory map's banks (`PlannerPass(memory_map=...)`), or,
    when no plan fits, the bank its best plan overfills and by how much."""

    banks: tuple[BankUse, ...] = ()  # in the map's order, fastest first; empty when it does not fit
    short_bank: str = ""  # the bank memplan's best plan overfills ("" when it fits)
    short_by: int = 0  # bytes that bank lacks
    proven: bool = False  # the shortfall is proven (no plan across the banks fits), not only not found

    @property
    def fits(self) -> bool:
        return not self.short_bank


@dataclass
class ProgramReport:
    """Every method of one program, plus what the file holds outside the arenas."""

    name: str
    methods: list[MethodReport]
    constant_bytes: int | None = None  # weights and other constants in the .pte (None: not known)
    delegate_bytes: int = 0  # delegate blobs in the .pte
    levers: dict[str, bool] = field(default_factory=dict)  # memplan's levers and whether they were on
    source: str = ""  # how the program was made: "zoo model", ".pte file", ...
    banked: BankedPlan | None = None  # memplan's plan across the budget's or map's banks, when made
    pte: bytes = field(default=b"", repr=False)  # the program the report describes, as built (a .pte)

    def method(self, name: str) -> MethodReport:
        for m in self.methods:
            if m.method == name:
                return m
        raise KeyError(name)

    def program_arenas(self) -> dict[int, int]:
        """Bytes per mem_id the program needs: host methods share the arenas, so the largest method's."""
        need: dict[int, int] = {}
        for m in self.methods:
            for mem_id, size in enumerate(m.emitted):
                if mem_id and size:
                    need[mem_id] = max(need.get(mem_id, 0), size)
        return need

    def lanes(self) -> dict[int, str]:
        named: dict[int, str] = {}
        for m in self.methods:
            for plan in m.plans[:1]:
                named.update(plan.lanes)
        return named
