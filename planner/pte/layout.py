"""What reading a built program (`.pte`) finds: per method its tensors, lifetimes, live overlaps and
derived problem (`MethodLayout`), per program its methods (`ProgramLayout`); pte.program reads them."""

from __future__ import annotations

from dataclasses import dataclass, field

from memplan.peak_bound import lower_bounds
from memplan.plan import Plan
from memplan.planner.compat import PTEFile
from memplan.problem import Problem
from memplan.solvers import DEFAULT_ALIGNMENT


@dataclass(frozen=True)
class PlannedTensor:
    """One memory-planned tensor value of a method, where the file puts it and when it is used."""

    value: int
    mem_id: int
    offset: int
    nbytes: int
    shape: tuple[int, ...]
    dtype: str
    role: str  # input, output, input+output, state, activation, unused
    first: int | None  # instruction index of the first / last mention (None: never named)
    last: int | None
    writer: str  # what first writes it: an operator, a delegate, "input", "initial state"


@dataclass(frozen=True)
class LiveOverlap:
    """Tensor `reader` read bytes that `writer`, neither a view nor an alias of it, overwrote while it was live."""

    reader: int
    writer: int
    instruction: int
    mem_id: int
    lo: int
    hi: int

    def __str__(self) -> str:
        return (
            f"v{self.reader} is read at instruction {self.instruction} after v{self.writer} wrote over its"
            f" bytes [{self.lo:,}, {self.hi:,}) of arena {self.mem_id}; neither is a view or alias of the other"
        )


@dataclass
class MethodLayout:
    """One method of a program: its arenas, planned tensors and, when derivable, its `Problem`.

    `layout` is the file's own placement as a plan of `problem`; `members` maps each buffer id of the
    problem to the tensor values it holds and their byte offset inside it; `slack` is what each arena
    has beyond its last tensor (e.g. XNNPACK's padding), kept when re-planning.
    """

    name: str
    arenas: list[int]
    num_instructions: int
    inputs: list[int]
    outputs: list[int]
    tensors: list[PlannedTensor]
    delegates: list[str]
    problem: Problem | None = None
    layout: Plan | None = None
    members: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    slack: dict[int, int] = field(default_factory=dict)
    zero_size: list[int] = field(default_factory=list)  # planned values of 0 bytes: any offset in the arena
    # Planned values no instruction names: never read or written, so in no buffer of the problem; their
    # bytes may be any in the arena (at least as large as the largest of them: the runtime checks that)
    dead: list[int] = field(default_factory=list)
    alignment: int = DEFAULT_ALIGNMENT
    cannot: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    overlaps: list[LiveOverlap] = field(default_factory=list)
    state_placement: str = ""  # where the method's state may go when re-planned, in one sentence
    devices: dict[int, str] = field(default_factory=dict)  # arena -> its device ("cuda:0"), off the host

    @property
    def lower_bound(self) -> int | None:
        """Most bytes live at once for this instruction order, per arena at least its largest dead
        tensor (None when not derivable)."""
        if self.problem is None:
            return None
        bounds = lower_bounds(self.problem)
        for mem_id, nbytes in self.dead_floor().items():
            bounds[mem_id] = max(bounds.get(mem_id, 0), nbytes)
        return sum(bounds.values())

    def dead_floor(self) -> dict[int, int]:
        """Per arena the bytes of its largest dead tensor: the runtime wants every tensor inside its arena."""
        floor: dict[int, int] = {}
        dead = set(self.dead)
        for t in self.tensors:
            if t.value in dead:
                floor[t.mem_id] = max(floor.get(t.mem_id, 0), t.nbytes)
        return floor

    @property
    def planned_bytes(self) -> int:
        return sum(self.arenas)


@dataclass
class ProgramLayout:
    """Every method of a `.pte`, in the order the file lists them, plus the file itself."""

    pte: PTEFile
    methods: dict[str, MethodLayout]
    path: str = ""
    data: bytes = b""  # the file's bytes, as read
