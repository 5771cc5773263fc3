"""One pass over a method's instructions (`MethodScan`): what each reads and writes, the planned
tensors' lifetimes, the aliases the file relies on and the state carried between calls (the rules are
pte.program's docstring)."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from executorch.exir import schema
from executorch.exir.scalar_type import ScalarType

from memplan.planner.memory.devices import device_name
from memplan.planner.memory.instruction_traffic import ELEMENT_BYTES
from memplan.planner.pte.layout import LiveOverlap, MethodLayout, PlannedTensor

READ, WRITE, READ_WRITE = "r", "w", "rw"
VIEW_OPS = ("executorch_prim::et_view",)  # out shares self's data pointer at run time


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
class ScannedTensor:
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


class MethodScan:
    """One pass over a method's instructions: what each reads and writes, lifetimes, aliases, state."""

    def __init__(self, plan: schema.ExecutionPlan) -> None:
        self.plan = plan
        self.tensors: dict[int, ScannedTensor] = {}
        self.zero_size: list[int] = []
        self.union = _Union()
        self.cannot: list[str] = []
        self.notes: list[str] = []
        self.foreign_reads: list[LiveOverlap] = []  # reads of bytes another tensor wrote last
        # (instruction, output, w): a delegate wrote `output` over exactly the bytes `w` wrote last
        self.same_bytes: list[tuple[int, int, int]] = []
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
        # A tensor no instruction names is never read or written at run time: it takes no bytes, and
        # leaves `tensors` (which the problem is built from) for `dead` (the runtime still wants its
        # bytes inside the arena). A split output the slice no-op lever left without a copy is one (its
        # views read the input's bytes), and so is a cat fused into the cat it feeds.
        self.dead = {v: t for v, t in self.tensors.items() if self.role(t) == "unused"}
        for t in self.dead.values():
            t.writer = "nothing: no instruction names it (dead)"
        self.tensors = {v: t for v, t in self.tensors.items() if v not in self.dead}
        self.layout.tensors = self._public_tensors()
        self.layout.zero_size = list(self.zero_size)
        self.layout.dead = sorted(self.dead)

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
            self.tensors[index] = ScannedTensor(
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
        self._join_renamed()

    def _join_renamed(self) -> None:
        """Join each delegate output with the tensor whose bytes it took when that tensor is read afterwards.

        A later read of `w` sees the output's bytes: `w` is the output under another name. A `w` never
        read again is a dead tensor (or what is left of one) whose bytes the file reuses: not joined, or
        the block would span both lifetimes over bytes the file gives to others in between.
        """
        for k, output, w in self.same_bytes:
            last = self.tensors[w].last
            if last is not None and last > k:
                self.union.join(output, w)

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
            return self._delegate_accesses(k, instr, writers)
        return []  # FreeCall and friends touch no planned bytes

    def _delegate_accesses(
        self, k: int, instr: schema.DelegateCall, writers: _LastWriters
    ) -> list[tuple[int, str]]:
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
                # Bytes last written by another tensor `w` exactly where this output goes: `v` may be
                # `w` under another name (an elided view), known only once the walk sees `w` read again.
                for a, b, w in writers.of(t.mem_id, t.offset, t.hi):
                    if (a, b) == (t.offset, t.hi) and w != v:
                        self.same_bytes.append((k, v, w))
                found.append((v, WRITE))
            else:
                found.append((v, READ))
        return found

    def _read_before_write(self, t: ScannedTensor, writers: _LastWriters) -> None:
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
    def role(self, t: ScannedTensor) -> str:
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

    def _public(self, t: ScannedTensor) -> PlannedTensor:
        return PlannedTensor(
            t.value, t.mem_id, t.offset, t.nbytes, t.shape, t.dtype, self.role(t), t.first, t.last, t.writer
        )

    def _public_tensors(self) -> list[PlannedTensor]:
        """Every planned tensor of the method, dead ones too, in the order of the values table."""
        every = sorted([*self.tensors.values(), *self.dead.values()], key=lambda t: t.value)
        return [self._public(t) for t in every]

    def lifetime(self, t: ScannedTensor) -> tuple[int, int]:
        end_of_method = max(self.num_instructions, 1)
        role = self.role(t)
        if t.pinned:
            return 0, end_of_method
        start = 0 if role.startswith("input") or t.first is None else t.first
        end = end_of_method if "output" in role else (t.last if t.last is not None else 0) + 1
        return start, max(end, start + 1)

    def arenas_used(self) -> set[int]:
        """The mem_ids this method plans tensors in."""
        return {t.mem_id for t in self.tensors.values()}

    def adopt_state(self, other_state: list[tuple[int, int, int]]) -> None:
        """Tensors written over bytes another method keeps as state are that state's new value.

        Host methods share arenas, so a method that writes there (an encoder filling the caches a
        decoder reads, with the new value written in place) updates the other method's state: the
        tensor is state here too, live for the whole method and kept at its offset.
        """
        adopted = False
        for t in self.tensors.values():
            if not t.pinned and any(
                m == t.mem_id and lo < t.hi and t.offset < hi for m, lo, hi in other_state
            ):
                t.pinned, adopted = True, True
                t.writer = f"state of another method, written by {t.writer}"
        if adopted:
            self.layout.tensors = self._public_tensors()  # their role is now state

    def fixed(self, t: ScannedTensor) -> bool:
        """Stays at its offset: state in an arena another method plans tensors in."""
        return t.pinned and t.mem_id in self.shared_arenas

    def pinned_ranges(self) -> list[tuple[int, int, int]]:
        """(mem_id, lo, hi) of the bytes this method keeps at their place for the whole method."""
        if self.cannot:
            return []
        return [(t.mem_id, t.offset, t.hi) for t in self.tensors.values() if self.fixed(t)]


def _devices(plan: schema.ExecutionPlan) -> dict[int, str]:
    """The device of each arena `non_const_buffer_device` puts off the host (CPU:0, the default, left out)."""
    return {
        entry.buffer_idx: device_name(entry.device_type, entry.device_index)
        for entry in plan.non_const_buffer_device or ()
        if (entry.device_type, entry.device_index) != (schema.DeviceType.CPU, 0)
    }
