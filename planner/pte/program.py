"""A built ExecuTorch program (`.pte`) read back into memplan's problem model, without its Python source.

Per method: the arenas (`non_const_buffer_sizes`), every memory-planned tensor (a Tensor value with an
`allocation_info`), and lifetimes derived from the instruction stream: a tensor lives from the first
instruction that names it to the last (graph inputs from the start, graph outputs to the end), kernel and
delegate calls alike. What each instruction reads and writes decides what must stay together:

* a kernel call's arguments follow its operator's schema (the arguments, then the results); `out`
  arguments are written, other `(a!)` arguments are read and written, the rest read;
* a delegate call's arguments are its inputs followed by its outputs (the emitter's layout), so the
  trailing arguments no earlier instruction named are its outputs; an output written exactly over the
  bytes another tensor wrote last is that tensor under another name only if it is read afterwards (else
  the file merely reuses a dead tensor's bytes);
* a tensor read before it is written reads bytes some other value wrote (an elided view, a fused cat):
  it is tied to the last writers of those bytes, as one block with their combined lifetime. Nothing
  wrote them: it is state carried between calls, live for the whole method. It may move when no other
  method plans tensors in its arena (the runtime copies initial values to wherever the file puts the
  state, at load); otherwise it stays where it is and every other method keeps off those bytes, since
  host methods share arenas. A tensor written over those bytes by another method is that state's new
  value (state in place: an encoder filling the caches a decoder reads): state there too;
* tensors whose bytes and lifetimes overlap in the file are aliases and stay together;
* a planned tensor no instruction names (and that is no input or output) is dead: the runtime never
  reads or writes it (a split whose copy the slice no-op lever removed leaves its outputs so, their
  views reading the input's bytes; so does a cat fused into the cat it feeds, Inception's). It is not
  in the problem; re-planned, it goes to offset 0, and
  each arena stays at least as large as its largest dead tensor (the runtime checks every tensor lies
  inside its arena), which the lower bound counts. Zero-byte tensors are not in the problem either.

The layout in the file must then be a valid plan of the derived problem; if it is not, or the method
has control flow (jumps, moves, several chains), an operator without a known schema or an element
type of unknown size, the method's problem is not derived and `MethodLayout.cannot` says why.
"""

from __future__ import annotations

import stat
from pathlib import Path

from memplan.planner.compat import deserialize_pte_binary
from memplan.planner.memory.instruction_traffic import ELEMENT_BYTES
from memplan.planner.pte.accesses import MethodScan
from memplan.planner.pte.layout import ProgramLayout
from memplan.planner.pte.method_problem import method_layout
from memplan.planner.pte.structure import PteError, check_method
from memplan.solvers import DEFAULT_ALIGNMENT


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
        scans = [MethodScan(plan) for plan in pte.program.execution_plan]
        for scan in scans:
            scan.shared_arenas = {m for other in scans if other is not scan for m in other.arenas_used()}
        pinned = {scan.layout.name: scan.pinned_ranges() for scan in scans}
        methods = {}
        for scan in scans:
            others = [r for name, ranges in pinned.items() if name != scan.layout.name for r in ranges]
            methods[scan.layout.name] = method_layout(scan, others, alignment)
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
