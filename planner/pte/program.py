"""A built ExecuTorch program (`.pte`) read back into memplan's problem model, without its Python source.

Per method: the arenas (`non_const_buffer_sizes`), every memory-planned tensor (a Tensor value with an
`allocation_info`), and lifetimes derived from the instruction stream: a tensor lives from the first
instruction that names it to the last (graph inputs from the start, graph outputs to the end), kernel and
delegate calls alike. What each instruction reads and writes decides what must stay together:

* a kernel call's arguments follow its operator's schema (the arguments, then the results); `out`
  arguments are written, other `(a!)` arguments are read and written, the rest read;
* a delegate call's arguments are its inputs followed by its outputs (the emitter's layout), so the
  trailing arguments no earlier instruction named are its outputs;
* a tensor read before it is written reads bytes some other value wrote (an elided view, a fused cat):
  it is tied to the last writers of those bytes, as one block with their combined lifetime. Nothing
  wrote them: it is state carried between calls, live for the whole method. It may move when no other
  method plans tensors in its arena (the runtime copies initial values to wherever the file puts the
  state, at load); otherwise it stays where it is and every other method keeps off those bytes, since
  host methods share arenas;
* tensors whose bytes and lifetimes overlap in the file are aliases and stay together;
* a planned tensor no instruction names (and that is no input or output) stays where it is, for the
  whole method: nothing says when it is used. Zero-byte tensors are not in the problem.

The layout in the file must then be a valid plan of the derived problem; if it is not, or the method
has control flow (jumps, moves, several chains), an operator without a known schema or an element
type of unknown size, the method's problem is not derived and `MethodLayout.cannot` says why.
"""

from __future__ import annotations

import math
import stat
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from executorch.exir import schema
from executorch.exir.scalar_type import ScalarType

from memplan.arith import align_up
from memplan.bounds import lower_bound
from memplan.errors import ProblemError
from memplan.plan import Plan
from memplan.planner.compat import PTEFile, deserialize_pte_binary
from memplan.planner.memory.devices import device_name
from memplan.planner.memory.instruction_traffic import ELEMENT_BYTES
from memplan.planner.pte.structure import PteError, check_method
from memplan.problem import Buffer, BufferKind, ContiguousGroup, Problem
from memplan.solvers import DEFAULT_ALIGNMENT
from memplan.validate import validate

READ, WRITE, READ_WRITE = "r", "w", "rw"
VIEW_OPS = ("executorch_prim::et_view",)  # out shares self's data pointer at run time


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
    alignment: int = DEFAULT_ALIGNMENT
    cannot: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    overlaps: list[LiveOverlap] = field(default_factory=list)
    state_placement: str = ""  # where the method's state may go when re-planned, in one sentence
    devices: dict[int, str] = field(default_factory=dict)  # arena -> its device ("cuda:0"), off the host

    @property
    def lower_bound(self) -> int | None:
        """Most bytes live at once for this instruction order (None when not derivable)."""
        return None if self.problem is None else lower_bound(self.problem)

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


def read_program(source: str | Path | bytes, alignment: int = DEFAULT_ALIGNMENT) -> ProgramLayout:
    """Read a `.pte` (a path or its bytes) and derive each method's problem at `alignment`."""
    data, path = _bytes_of(source)
    where = path or "data"
    try:
        pte = deserialize_pte_binary(data)
    except Exception as exc:  # noqa: BLE001 - any parse failure is "not a program"
        raise PteError(f"{where}: not an ExecuTorch program ({type(exc).__name__}: {exc})") from None
    try:
        for plan in pte.program.execution_plan:
            check_method(plan, ELEMENT_BYTES, where)
        scans = [_scan(plan) for plan in pte.program.execution_plan]
        for scan in scans:
            scan.shared_arenas = {m for other in scans if other is not scan for m in other.arenas_used()}
        pinned = {scan.layout.name: scan.pinned_ranges() for scan in scans}
        methods = {}
        for scan in scans:
            others = [r for name, ranges in pinned.items() if name != scan.layout.name for r in ranges]
            methods[scan.layout.name] = scan.build(others, alignment)
    except PteError:
        raise
    except (ArithmeticError, AttributeError, LookupError, TypeError, ValueError) as exc:
        # Damage check_method does not look for (a field of an unexpected type, a clash of names): the
        # file is still at fault, and the message says where the reading stopped.
        raise PteError(f"{where}: a malformed program ({type(exc).__name__}: {exc})") from None
    return ProgramLayout(pte, methods, path, data)


def _bytes_of(source: str | Path | bytes) -> tuple[bytes, str]:
    """The bytes of a program given as bytes or a path; a path must name a regular file.

    Reading a device or a pipe (`/dev/zero`, `/dev/stdin`) would never end, so only regular files are read.
    """
    if isinstance(source, (bytes, bytearray)):
        return bytes(source), ""
    path = Path(source)
    try:
        mode = path.stat().st_mode
        if not stat.S_ISREG(mode):
            what = "a directory" if stat.S_ISDIR(mode) else "a device, pipe or socket"
            raise PteError(f"cannot read {str(path)!r}: it is {what}, not a file")
        return path.read_bytes(), str(path)
    except OSError as exc:
        raise PteError(f"cannot read {str(path)!r}: {exc.strerror or exc}") from None
    except RuntimeError as exc:  # a symbolic link loop, on some Python versions
        raise PteError(f"cannot read {str(path)!r}: {exc}") from None


# -- what each instruction reads and writes ---------------------------------------------


def _schema(name: str, overload: str) -> Any | None:
    """The torch schema of operator `ns::name.overload`, or None if torch does not know it."""
    import torch

    if "::" not in name:
        return None
    namespace, op = name.split("::", 1)
    try:
        packet = getattr(getattr(torch.ops, namespace), op)
        return getattr(packet, overload or "default")._schema
    except Exception:  # noqa: BLE001 - a name from a damaged file may break torch's lookup in any way
        return None


def _kernel_access(name: str, overload: str, n_args: int) -> list[str] | str:
    """Access per argument position of a kernel call, or the reason it cannot be known."""
    if name in VIEW_OPS:
        return [READ, READ, WRITE][:n_args] if n_args == 3 else f"{name} with {n_args} arguments"
    found = _schema(name, overload)
    if found is None:
        return f"operator {name}.{overload or 'default'} has no schema torch knows"
    access = []
    for arg in found.arguments:
        writes = arg.alias_info is not None and arg.alias_info.is_write
        access.append((WRITE if arg.is_out else READ_WRITE) if writes else READ)
    # The emitter appends the results after the arguments: one value, or one list of the outs.
    extra = n_args - len(access)
    if extra < min(1, len(found.returns)):
        return (
            f"operator {name}.{overload or 'default'} is called with {n_args} arguments,"
            f" its schema has {len(access)} and {len(found.returns)} results"
        )
    access += [WRITE] * extra
    return access


def _tensors_in(values: list[schema.EValue], index: int) -> list[int]:
    """The tensor values an argument names (list arguments expanded)."""
    val = values[index].val
    if isinstance(val, schema.Tensor):
        return [index]
    if isinstance(val, (schema.TensorList, schema.OptionalTensorList)):
        return [i for i in val.items if i >= 0 and isinstance(values[i].val, schema.Tensor)]
    return []


class _LastWriters:
    """Per arena, which tensor value last wrote each byte range."""

    def __init__(self) -> None:
        self.segments: dict[int, list[tuple[int, int, int]]] = defaultdict(list)

    def write(self, mem_id: int, lo: int, hi: int, value: int) -> None:
        kept = []
        for a, b, v in self.segments[mem_id]:
            if b <= lo or a >= hi:
                kept.append((a, b, v))
                continue
            if a < lo:
                kept.append((a, lo, v))
            if b > hi:
                kept.append((hi, b, v))
        kept.append((lo, hi, value))
        self.segments[mem_id] = kept

    def of(self, mem_id: int, lo: int, hi: int) -> list[tuple[int, int, int]]:
        return [(a, b, v) for a, b, v in self.segments[mem_id] if a < hi and lo < b]


class _Union:
    def __init__(self) -> None:
        self.parent: dict[int, int] = {}

    def find(self, x: int) -> int:
        self.parent.setdefault(x, x)
        while self.parent[x] != x:
            self.parent[x] = self.parent[self.parent[x]]
            x = self.parent[x]
        return x

    def join(self, a: int, b: int) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self.parent[max(ra, rb)] = min(ra, rb)


@dataclass
class _Tensor:
    value: int
    mem_id: int
    offset: int
    nbytes: int
    shape: tuple[int, ...]
    dtype: str
    initial_state: bool
    first: int | None = None
    last: int | None = None
    first_access: str = ""
    writer: str = ""
    pinned: bool = False

    @property
    def hi(self) -> int:
        return self.offset + self.nbytes


class _Scan:
    """One pass over a method's instructions: lifetimes, aliases, state."""

    def __init__(self, plan: schema.ExecutionPlan) -> None:
        self.plan = plan
        self.tensors: dict[int, _Tensor] = {}
        self.zero_size: list[int] = []
        self.union = _Union()
        self.cannot: list[str] = []
        self.notes: list[str] = []
        self.foreign_reads: list[LiveOverlap] = []  # reads of bytes another tensor wrote last
        self.shared_arenas: set[int] = set()  # mem_ids another method of the program plans tensors in
        self.num_instructions = sum(len(c.instructions) for c in plan.chains)
        self.layout = MethodLayout(
            name=plan.name,
            arenas=list(plan.non_const_buffer_sizes),
            num_instructions=self.num_instructions,
            inputs=list(plan.inputs),
            outputs=list(plan.outputs),
            tensors=[],
            delegates=[d.id for d in plan.delegates],
            devices=_devices(plan),
        )
        self._collect()
        if not self.cannot:
            self._walk()
        self.layout.tensors = [self._public(t) for t in self.tensors.values()]
        self.unused = {t.value for t in self.layout.tensors if t.role == "unused"}
        self.layout.zero_size = list(self.zero_size)

    # -- planned tensors --------------------------------------------------------------
    def _collect(self) -> None:
        dynamic = 0
        for index, evalue in enumerate(self.plan.values):
            t = evalue.val
            if not isinstance(t, schema.Tensor) or t.allocation_info is None:
                continue
            size = (
                ELEMENT_BYTES.get(ScalarType(t.scalar_type))
                if t.scalar_type in ScalarType._value2member_map_
                else None
            )
            if size is None:
                self.cannot.append(f"value {index}: element type {t.scalar_type} has no known byte size")
                continue
            nbytes = math.prod(t.sizes) * size
            info = t.allocation_info
            offset = info.memory_offset_low + (info.memory_offset_high << 32)
            if nbytes == 0:
                self.zero_size.append(index)
                continue
            if t.shape_dynamism != schema.TensorShapeDynamism.STATIC:
                dynamic += 1
            self.tensors[index] = _Tensor(
                index,
                info.memory_id,
                offset,
                nbytes,
                tuple(t.sizes),
                ScalarType(t.scalar_type).name.lower(),
                initial_state=t.data_buffer_idx > 0,
            )
        if dynamic:
            self.notes.append(
                f"{dynamic} tensors have dynamic shapes; planned at the upper-bound shape in the file"
            )

    # -- the instruction stream ---------------------------------------------------------
    def _instructions(self) -> Iterator[tuple[int, Any]]:
        if len(self.plan.chains) != 1:
            self.cannot.append(
                f"{len(self.plan.chains)} chains: the order in which they run is not in the file"
            )
            return
        yield from enumerate(ins.instr_args for ins in self.plan.chains[0].instructions)

    def _walk(self) -> None:
        writers = _LastWriters()
        inputs = set(self.plan.inputs)
        for t in self.tensors.values():
            if t.value in inputs or t.initial_state:
                writers.write(t.mem_id, t.offset, t.hi, t.value)
                t.writer = "input" if t.value in inputs else "initial state"
                t.pinned = t.initial_state
        for k, instr in self._instructions():
            if isinstance(instr, (schema.JumpFalseCall, schema.MoveCall)):
                self.cannot.append(
                    f"control flow ({type(instr).__name__} at instruction {k}): which instructions run,"
                    " and so the lifetimes, depend on the data"
                )
                return
            accesses = self._accesses(k, instr, writers)
            if accesses is None:
                return
            for value, access in accesses:
                t = self.tensors[value]
                if t.first is None:
                    t.first, t.first_access = k, access
                    if access != WRITE and value not in inputs and not t.initial_state:
                        self._read_before_write(t, writers)
                t.last = k
            self._note_foreign_reads(k, accesses, writers)
            for value, access in accesses:
                if access != READ:
                    t = self.tensors[value]
                    writers.write(t.mem_id, t.offset, t.hi, value)
                    if not t.writer:
                        t.writer = self._name(instr)

    def _note_foreign_reads(self, k: int, accesses: list[tuple[int, str]], writers: _LastWriters) -> None:
        """Record each read of bytes another tensor wrote last, earlier or by this very instruction.

        An argument the schema marks as written in place (`a!`) is the result itself: joined, not recorded.
        """
        written = [self.tensors[v] for v, access in accesses if access == WRITE]
        for value, access in accesses:
            if access == WRITE:
                continue
            t = self.tensors[value]
            for lo, hi, w in writers.of(t.mem_id, t.offset, t.hi):
                if w != value:
                    self.foreign_reads.append(LiveOverlap(value, w, k, t.mem_id, lo, hi))
            for o in written:
                if o.value == value or o.mem_id != t.mem_id or o.hi <= t.offset or t.hi <= o.offset:
                    continue
                if access == READ_WRITE:
                    self.union.join(value, o.value)
                else:
                    lo, hi = max(o.offset, t.offset), min(o.hi, t.hi)
                    self.foreign_reads.append(LiveOverlap(value, o.value, k, t.mem_id, lo, hi))

    def live_overlaps(self) -> list[LiveOverlap]:
        """The recorded foreign reads between tensors the walk found no aliasing for, one per pair."""
        found: dict[tuple[int, int], LiveOverlap] = {}
        for read in self.foreign_reads:
            if self.union.find(read.reader) != self.union.find(read.writer):
                found.setdefault((read.reader, read.writer), read)
        return list(found.values())

    def _accesses(self, k: int, instr: Any, writers: _LastWriters) -> list[tuple[int, str]] | None:
        values = self.plan.values
        if isinstance(instr, schema.KernelCall):
            op = self.plan.operators[instr.op_index]
            named = [(pos, v) for pos, arg in enumerate(instr.args) for v in _tensors_in(values, arg)]
            named = [(pos, v) for pos, v in named if v in self.tensors]
            if not named:
                return []
            access = _kernel_access(op.name, op.overload, len(instr.args))
            if isinstance(access, str):
                self.cannot.append(f"instruction {k}: {access}, so what it writes is unknown")
                return None
            if op.name in VIEW_OPS and len(named) == 2:
                self.union.join(named[0][1], named[1][1])
            return [(v, access[pos]) for pos, v in named]
        if isinstance(instr, schema.DelegateCall):
            return self._delegate_accesses(instr, writers)
        return []  # FreeCall and friends touch no planned bytes

    def _delegate_accesses(self, instr: schema.DelegateCall, writers: _LastWriters) -> list[tuple[int, str]]:
        """Inputs, then outputs: the trailing arguments nobody named before are the outputs."""
        values = self.plan.values
        seen = set(self.plan.inputs) | {t.value for t in self.tensors.values() if t.first is not None}
        args = [v for arg in instr.args for v in _tensors_in(values, arg)]
        outputs: set[int] = set()
        for v in reversed(args):
            if v not in self.tensors or v in seen:
                break
            outputs.add(v)
        found = []
        for v in args:
            if v not in self.tensors:
                continue
            if v in outputs:
                t = self.tensors[v]
                # The same bytes written just before may be the value itself under another name
                # (an elided view): keep them together, which is never wrong.
                for a, b, w in writers.of(t.mem_id, t.offset, t.hi):
                    if (a, b) == (t.offset, t.hi) and w != v:
                        self.union.join(v, w)
                found.append((v, WRITE))
            else:
                found.append((v, READ))
        return found

    def _read_before_write(self, t: _Tensor, writers: _LastWriters) -> None:
        """`t` is read before it is written: it reads what others wrote there, or it is state."""
        wrote = writers.of(t.mem_id, t.offset, t.hi)
        if wrote:
            for _, _, w in wrote:
                self.union.join(t.value, w)
            t.writer = "alias of " + ", ".join(f"v{w}" for w in sorted({w for _, _, w in wrote}))
        else:
            t.pinned = True
            t.writer = "state"

    def _name(self, instr: Any) -> str:
        if isinstance(instr, schema.KernelCall):
            op = self.plan.operators[instr.op_index]
            return f"{op.name}.{op.overload}" if op.overload else op.name
        if isinstance(instr, schema.DelegateCall):
            return f"delegate:{self.plan.delegates[instr.delegate_index].id}"
        return type(instr).__name__

    # -- roles and lifetimes ------------------------------------------------------------------
    def _role(self, t: _Tensor) -> str:
        is_in, is_out = t.value in self.plan.inputs, t.value in self.plan.outputs
        if is_in and is_out:
            return "input+output"
        if is_in:
            return "input"
        if is_out:
            return "output"
        if t.pinned:
            return "state"
        if self.cannot:
            return "unknown"
        return "activation" if t.first is not None else "unused"

    def _public(self, t: _Tensor) -> PlannedTensor:
        return PlannedTensor(
            t.value, t.mem_id, t.offset, t.nbytes, t.shape, t.dtype, self._role(t), t.first, t.last, t.writer
        )

    def _lifetime(self, t: _Tensor) -> tuple[int, int]:
        end_of_method = max(self.num_instructions, 1)
        role = self._role(t)
        if t.pinned or role == "unused":
            return 0, end_of_method
        start = 0 if role.startswith("input") or t.first is None else t.first
        end = end_of_method if "output" in role else (t.last if t.last is not None else 0) + 1
        return start, max(end, start + 1)

    def arenas_used(self) -> set[int]:
        """The mem_ids this method plans tensors in."""
        return {t.mem_id for t in self.tensors.values()}

    def _fixed(self, t: _Tensor) -> bool:
        """Stays at its offset: unused (nothing says when), or state in an arena another method uses."""
        return t.value in self.unused or (t.pinned and t.mem_id in self.shared_arenas)

    def pinned_ranges(self) -> list[tuple[int, int, int]]:
        """(mem_id, lo, hi) of the bytes this method keeps at their place for the whole method."""
        if self.cannot:
            return []
        return [(t.mem_id, t.offset, t.hi) for t in self.tensors.values() if self._fixed(t)]

    def _state_placement(self) -> str:
        state = [t for t in self.tensors.values() if t.pinned and t.value not in self.unused]
        if not state:
            return ""
        total = sum(t.nbytes for t in state)
        kept = sorted({t.mem_id for t in state if self._fixed(t)})
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

    # -- the problem ------------------------------------------------------------------------
    def build(self, other_state: list[tuple[int, int, int]], alignment: int) -> MethodLayout:
        layout = self.layout
        layout.cannot, layout.notes = list(self.cannot), list(self.notes)
        if self.cannot:
            return layout
        layout.overlaps = self.live_overlaps()
        if layout.overlaps:
            layout.cannot.append(
                f"{len(layout.overlaps)} live overlap(s): tensors read bytes another tensor wrote over while"
                " they were live; memplan cannot tell what the program relies on"
            )
            return layout
        layout.state_placement = self._state_placement()
        for t in self.tensors.values():
            if self._role(t) == "unused":
                t.pinned = True  # nothing says when it is used: it stays where it is
        lifetimes = {v: self._lifetime(t) for v, t in self.tensors.items()}
        self._join_overlapping(lifetimes)
        components: dict[int, list[_Tensor]] = defaultdict(list)
        for v, t in self.tensors.items():
            components[self.union.find(v)].append(t)
        roots = [
            min(c, key=lambda t: t.offset).offset for c in components.values() if not any(map(self._fixed, c))
        ]
        alignment = _usable_alignment(alignment, roots)
        if alignment < DEFAULT_ALIGNMENT:
            layout.notes.append(
                f"offsets in the file are multiples of {alignment} only; planning at that alignment"
            )
        layout.alignment = alignment
        end_of_method = max(self.num_instructions, 1)
        buffers: list[Buffer] = []
        groups: list[ContiguousGroup] = []
        offsets: dict[str, int] = {}
        try:  # sizes and offsets come from the file: a damaged one may give no valid buffer
            for members in components.values():
                self._component(
                    members, lifetimes, alignment, end_of_method, buffers, groups, offsets, layout
                )
            buffers += self._other_state(other_state, end_of_method, offsets)
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
        self, other_state: list[tuple[int, int, int]], end_of_method: int, offsets: dict[str, int]
    ) -> list[Buffer]:
        """Fixed buffers for the bytes other methods' state keeps that this method's own state does not."""
        found = []
        own = [(t.mem_id, t.offset, t.hi) for t in self.tensors.values() if self._fixed(t)]
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

    def _join_overlapping(self, lifetimes: dict[int, tuple[int, int]]) -> None:
        """Tensors that share bytes while both live are aliases in the file: one block."""
        events = sorted((lifetimes[v][0], v) for v in self.tensors)
        live: list[int] = []
        for start, v in events:
            t = self.tensors[v]
            live = [u for u in live if lifetimes[u][1] > start]
            for u in live:
                o = self.tensors[u]
                if o.mem_id == t.mem_id and o.offset < t.hi and t.offset < o.hi:
                    self.union.join(u, v)
            live.append(v)

    def _component(
        self, members, lifetimes, alignment, end_of_method, buffers, groups, offsets, layout
    ) -> None:
        pinned = any(t.pinned for t in members)  # live for the whole method
        stays = any(map(self._fixed, members))
        lo = min(t.offset for t in members)
        hi = max(t.hi for t in members)
        start = 0 if pinned else min(lifetimes[t.value][0] for t in members)
        end = end_of_method if pinned else max(lifetimes[t.value][1] for t in members)
        kind = _kind({self._role(t) for t in members}, pinned)
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


def _scan(plan: schema.ExecutionPlan) -> _Scan:
    return _Scan(plan)


def _devices(plan: schema.ExecutionPlan) -> dict[int, str]:
    """The device of each arena `non_const_buffer_device` puts off the host (CPU:0, the default, left out)."""
    return {
        entry.buffer_idx: device_name(entry.device_type, entry.device_index)
        for entry in plan.non_const_buffer_device or ()
        if (entry.device_type, entry.device_index) != (schema.DeviceType.CPU, 0)
    }


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
