"""Reading and writing problems and plans: MiniMalloc CSV and exact JSON.

CSV is MiniMalloc's interchange format (github.com/google/minimalloc): one
buffer per row, half-open `[lower, upper)` lifetimes, optional `alignment`
and `offset` columns, a solution being the same file with `offset` filled
in. It has no groups, pools or same-offset sets, so it is lossy. JSON keeps
everything, with a `"type"` field saying whether it holds a problem or a plan.

Every error names the file, and for CSV the line, and what is wrong.
"""

from __future__ import annotations

import csv
import io
import json
import re
import sys
from pathlib import Path
from typing import Any

from memplan.errors import ProblemError
from memplan.plan import Outcome, Plan
from memplan.problem import (
    MAX_COORDINATE,
    Bank,
    Buffer,
    BufferKind,
    ContiguousGroup,
    Gap,
    Problem,
    SameOffset,
)

# MiniMalloc's loader accepts these spellings; `end` is an inclusive end.
_ALIASES = {"begin": "lower", "start": "lower", "buffer": "id", "buffer_id": "id", "end": "upper"}
_REQUIRED = ("id", "lower", "upper", "size")
_OPTIONAL = ("alignment", "offset", "gaps", "hint")  # MiniMalloc's `hint` (a solver hint) is read and ignored
_JSON_VERSION = 1


class FormatError(ProblemError):
    """A file is malformed; the message names the file (and line) and the fault."""


# -- MiniMalloc CSV ------------------------------------------------------------------


def read_minimalloc_csv(path: str | Path, capacity_from_name: bool = False) -> Problem:
    """A Problem from a MiniMalloc CSV (buffers in file order; an `offset` column pins them).

    With `capacity_from_name`, a name like `A.1048576.csv` sets the capacity
    to 1048576. A `gaps` column gives times when a buffer is absent ('a-b') or
    holds only some of its bytes ('a-b@low:high'), as MiniMalloc reads it;
    sizes may be 0 (zero-byte tensors, which overlap nothing).
    """
    path = Path(path)
    capacity = _capacity_from_name(path) if capacity_from_name else None
    rows = _csv_rows(path)
    if not rows:
        raise FormatError(f"{path}: empty file; expected a header {','.join(_REQUIRED)}")
    columns, inclusive_end = _columns(path, rows[0])

    buffers: list[Buffer] = []
    line_of: dict[str, int] = {}
    for line, row in enumerate(rows[1:], start=2):
        if not any(field.strip() for field in row):
            continue
        where = f"{path}:{line}"
        if len(row) != len(columns):
            raise FormatError(f"{where}: {len(row)} fields, but the header has {len(columns)}")
        fields = dict(zip(columns, (field.strip() for field in row)))
        buffer_id = fields["id"]
        if not buffer_id:
            raise FormatError(f"{where}: empty id")
        if buffer_id in line_of:
            raise FormatError(f"{where}: duplicate id {buffer_id!r} (first on line {line_of[buffer_id]})")
        line_of[buffer_id] = line
        lower = _int(where, fields, "lower")
        upper = _int(where, fields, "upper") + inclusive_end
        size = _int(where, fields, "size")
        if size < 0:
            raise FormatError(f"{where}: buffer {buffer_id!r} has size {size}; sizes must not be negative")
        if upper <= lower:
            raise FormatError(
                f"{where}: buffer {buffer_id!r} has upper {upper} <= lower {lower}; lifetimes are"
                " half-open [lower, upper) and must not be empty"
            )
        gaps: tuple[Gap, ...] = ()
        if fields.get("gaps"):
            lower, upper, gaps = _gaps(where, buffer_id, fields["gaps"], lower, upper, inclusive_end)
        alignment = _int(where, fields, "alignment") if fields.get("alignment") else 1
        offset = _int(where, fields, "offset") if fields.get("offset") else None
        try:
            buffers.append(
                Buffer(buffer_id, lower, upper, size, alignment=alignment, offset=offset, gaps=gaps)
            )
        except ProblemError as e:
            raise FormatError(f"{where}: {e}") from None
    try:
        return Problem(tuple(buffers), capacity=capacity, name=path.stem)
    except ProblemError as e:
        raise FormatError(f"{path}: {e}") from None


def _csv_rows(path: Path) -> list[list[str]]:
    """The rows of a UTF-8 CSV file (a byte-order mark is skipped); any fault names the file and line."""
    try:
        data = path.read_bytes()
    except OSError as e:
        raise FormatError(f"{path}: cannot read: {e.strerror or e}") from None
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        raise FormatError(
            f"{path}:{line}: not UTF-8 text (byte {data[e.start]:#04x} at offset {e.start}); MiniMalloc CSV"
            " is plain text"
        ) from None
    if "\x00" in text:
        line = text.count("\n", 0, text.index("\x00")) + 1
        raise FormatError(f"{path}:{line}: contains a NUL byte; MiniMalloc CSV is plain text")
    reader = csv.reader(io.StringIO(text, newline=""))
    try:
        return list(reader)
    except csv.Error as e:  # e.g. a field over the csv module's size limit
        raise FormatError(f"{path}:{reader.line_num}: not readable as CSV: {e}") from None


def write_minimalloc_csv(problem: Problem, path: str | Path, plan: Plan | None = None) -> None:
    """Write `problem` as MiniMalloc CSV; with `plan`, append its offsets as the `offset` column.

    Without a plan, fixed offsets are written in an `offset` column (blank
    for unpinned buffers). Groups, same-offset sets and several pools have no
    CSV form and are refused.
    """
    path = Path(path)
    _check_csv_representable(problem, path)
    if plan is not None:
        missing = [b.id for b in problem.buffers if b.id not in plan.offsets]
        if missing:
            raise ProblemError(f"{path}: the plan has no offset for {missing[:10]}")
    header = ["id", "lower", "upper", "size"]
    with_alignment = any(b.alignment != 1 for b in problem.buffers)
    with_offset = plan is not None or any(b.offset is not None for b in problem.buffers)
    with_gaps = any(b.gaps for b in problem.buffers)
    header += ["alignment"] * with_alignment + ["offset"] * with_offset + ["gaps"] * with_gaps
    with path.open("w", newline="") as f:
        out = csv.writer(f, lineterminator="\n")
        out.writerow(header)
        for b in problem.buffers:
            row: list[Any] = [b.id, b.start, b.end, b.size]
            if with_alignment:
                row.append(b.alignment)
            if with_offset:
                offset = plan.offsets[b.id] if plan is not None else b.offset
                row.append("" if offset is None else offset)
            if with_gaps:
                row.append(" ".join(_gap_text(g) for g in b.gaps))
            out.writerow(row)


def _gap_text(gap: Gap) -> str:
    text = f"{gap.start}-{gap.end}"
    return text if gap.window is None else f"{text}@{gap.window[0]}:{gap.window[1]}"


def _capacity_from_name(path: Path) -> int:
    match = re.fullmatch(r".+\.([0-9]+)\.csv", path.name)
    capacity = _short_int(match.group(1)) if match else None
    if capacity is None or not 0 < capacity <= MAX_COORDINATE:
        raise FormatError(
            f"{path}: capacity_from_name needs a file name like 'A.1048576.csv' (capacity before .csv,"
            " from 1 to 2^62)"
        )
    return capacity


def _columns(path: Path, header: list[str]) -> tuple[list[str], int]:
    """Canonical column names and 1 if the end column is inclusive (`end`), else 0."""
    names = [field.strip() for field in header]
    inclusive_end = int("end" in names)
    columns = [_ALIASES.get(name, name) for name in names]
    where = f"{path}:1"
    for name in columns:
        if name not in _REQUIRED + _OPTIONAL:
            raise FormatError(
                f"{where}: unknown column {name!r}; expected {','.join(_REQUIRED)}"
                f" and optionally {','.join(_OPTIONAL)}"
            )
    duplicates = sorted({c for c in columns if columns.count(c) > 1})
    if duplicates:
        raise FormatError(f"{where}: column {duplicates[0]!r} appears twice (aliases included)")
    missing = [c for c in _REQUIRED if c not in columns]
    if missing:
        raise FormatError(f"{where}: missing column {missing[0]!r}; the header needs {','.join(_REQUIRED)}")
    return columns, inclusive_end


_INTEGER = re.compile(r"[+-]?[0-9]+")  # ASCII digits only: int() would also take '١٢' and '1_000'
_MAX_DIGITS = len(str(MAX_COORDINATE))
_BEYOND = "beyond 2^62, more than solvers can represent (they compute in 64-bit integers)"


def _short_int(text: str) -> int | None:
    """The integer an ASCII-digit string spells, or None if it has more digits than 2^62.

    Python refuses to convert more than 4,300 digits (a ValueError no reader here expects), and
    anything past 2^62 is refused anyway.
    """
    return int(text) if len(text.lstrip("+-").lstrip("0")) <= _MAX_DIGITS else None


def _shown(text: str) -> str:
    return repr(text) if len(text) <= 40 else f"{text[:20]!r}... ({len(text):,} characters)"


def _int(where: str, fields: dict[str, str], column: str) -> int:
    text = fields[column]
    if not _INTEGER.fullmatch(text):
        raise FormatError(f"{where}: column {column!r} is not an integer: {_shown(text)}")
    value = _short_int(text)
    if value is None or abs(value) > MAX_COORDINATE:
        buffer = f"buffer {fields['id']!r}: " if column != "id" else ""
        shown = value if value is not None else f"{text[:20]}... ({len(text):,} digits)"
        raise FormatError(f"{where}: {buffer}{column} {shown} is {_BEYOND}")
    return value


_GAP = re.compile(r"(-?[0-9]+)-(-?[0-9]+)(?:@([0-9]+):([0-9]+))?")


def _gaps(
    where: str, buffer_id: str, text: str, lower: int, upper: int, inclusive_end: int
) -> tuple[int, int, tuple[Gap, ...]]:
    """MiniMalloc gaps ('a-b' or 'a-b@low:high', space-separated): (lower, upper, the gaps inside).

    A gap without a window at either end of the lifetime just shortens it; the
    rest are kept, clipped to the lifetime (MiniMalloc's reading: outside its
    lifetime a buffer is absent anyway).
    """
    spans: list[tuple[int, int, tuple[int, int] | None]] = []
    for item in text.split():
        match = _GAP.fullmatch(item)
        if not match:
            raise FormatError(
                f"{where}: buffer {buffer_id!r} has gap {item!r}; a gap is 'lower-upper' or"
                " 'lower-upper@low:high' (the bytes in use during it), integers in ASCII digits"
            )
        numbers = [_short_int(g) for g in match.groups() if g is not None]
        if any(n is None or abs(n) > MAX_COORDINATE for n in numbers):
            raise FormatError(
                f"{where}: buffer {buffer_id!r} has gap {_shown(item)}, a number in it is {_BEYOND}"
            )
        if int(match.group(2)) < int(match.group(1)):
            raise FormatError(
                f"{where}: buffer {buffer_id!r} has gap {item!r}, which ends before it starts;"
                " a gap is 'lower-upper' with lower <= upper"
            )
        a, b = int(match.group(1)), int(match.group(2)) + inclusive_end
        window = (int(match.group(3)), int(match.group(4))) if match.group(3) is not None else None
        spans.append((max(a, lower), min(b, upper), window))
    spans = sorted(span for span in spans if span[0] < span[1])
    for a, b, window in spans:  # windowless gaps at the start move the start
        if window is None and a <= lower < b:
            lower = b
    for a, b, window in reversed(spans):
        if window is None and a < upper <= b:
            upper = a
    if upper <= lower:
        raise FormatError(f"{where}: buffer {buffer_id!r} has gaps {text!r} covering its whole lifetime")
    inside = [Gap(max(a, lower), min(b, upper), w) for a, b, w in spans if a < upper and lower < b]
    for first, second in zip(inside, inside[1:]):
        if second.start < first.end:
            raise FormatError(
                f"{where}: buffer {buffer_id!r} has overlapping gaps {first.start}-{first.end} and"
                f" {second.start}-{second.end}"
            )
    return lower, upper, tuple(inside)


def _check_csv_representable(problem: Problem, path: Path) -> None:
    if problem.groups:
        raise ProblemError(
            f"{path}: MiniMalloc CSV cannot hold contiguous groups (parent {problem.groups[0].parent!r});"
            " use save_json"
        )
    if problem.same_offsets:
        raise ProblemError(
            f"{path}: MiniMalloc CSV cannot hold same-offset sets ({list(problem.same_offsets[0].buffers)});"
            " use save_json"
        )
    if problem.banks:
        raise ProblemError(
            f"{path}: MiniMalloc CSV has one pool and no banks, but the problem declares banks"
            f" {[b.name for b in problem.banks]}; the bank choices and capacities would be lost. Use save_json"
        )
    if problem.shared_objects:
        raise ProblemError(
            f"{path}: MiniMalloc CSV cannot say the problem asks for shared objects; use save_json"
        )
    if len(problem.pools) > 1:
        raise ProblemError(
            f"{path}: MiniMalloc CSV has one pool, the problem has pools {problem.pools}; use save_json"
        )


# -- JSON ----------------------------------------------------------------------------


def save_json(obj: Problem | Plan, path: str | Path) -> None:
    """Write a Problem or a Plan as JSON that `load_json` reads back equal."""
    if isinstance(obj, Problem):
        data = _problem_to_dict(obj)
    elif isinstance(obj, Plan):
        data = _plan_to_dict(obj)
    else:
        raise TypeError(f"save_json takes a Problem or a Plan, not {type(obj).__name__}")
    Path(path).write_text(json.dumps(data, indent=1) + "\n")


def load_json(path: str | Path) -> Problem | Plan:
    """The Problem or Plan saved by `save_json` (its `"type"` says which)."""
    path = Path(path)
    try:
        raw = path.read_bytes()
    except OSError as e:
        raise FormatError(f"{path}: cannot read: {e.strerror or e}") from None
    try:
        data = json.loads(raw.decode("utf-8-sig"), parse_constant=_no_constant, parse_int=_json_int)
    except UnicodeDecodeError as e:
        line = raw.count(b"\n", 0, e.start) + 1
        raise FormatError(
            f"{path}:{line}: not UTF-8 text (byte {raw[e.start]:#04x} at offset {e.start})"
        ) from None
    except json.JSONDecodeError as e:
        raise FormatError(f"{path}:{e.lineno}: not valid JSON: {e.msg}") from None
    except _ConstantError as e:
        raise FormatError(f"{path}: {e}") from None
    except RecursionError:  # the decoder recurses once per level of nesting
        raise FormatError(
            f"{path}: JSON nested too deeply to read (more than {sys.getrecursionlimit():,} levels);"
            " a problem or plan file is at most a few levels deep"
        ) from None
    kind = data.get("type") if isinstance(data, dict) else None
    if kind not in ("problem", "plan"):
        raise FormatError(f'{path}: expected an object with "type": "problem" or "plan", got {kind!r}')
    if data.get("version") != _JSON_VERSION:
        raise FormatError(
            f"{path}: unsupported version {data.get('version')!r}; this reader knows {_JSON_VERSION}"
        )
    try:
        return _problem_from_dict(data) if kind == "problem" else _plan_from_dict(data)
    except KeyError as e:
        raise FormatError(f"{path}: a {kind} is missing the field {e.args[0]!r}") from None
    except (TypeError, ValueError) as e:  # ProblemError is a ValueError: keep its buffer name
        raise FormatError(f"{path}: invalid {kind}: {e}") from None


class _ConstantError(ValueError):
    pass


def _no_constant(name: str) -> float:
    """JSON has no NaN or Infinity; Python's reader takes them unless told not to."""
    raise _ConstantError(f"{name} is not a JSON number (sizes, times and offsets are integers)")


def _json_int(text: str) -> int:
    """A JSON integer, refused before Python's own limit (4,300 digits, a bare ValueError) when past 2^62."""
    value = _short_int(text)
    if value is None:
        raise _ConstantError(f"the integer {text[:20]}... ({len(text):,} digits) is {_BEYOND}")
    return value


def _problem_to_dict(problem: Problem) -> dict[str, Any]:
    return {
        "type": "problem",
        "version": _JSON_VERSION,
        "name": problem.name,
        "capacity": problem.capacity,
        "buffers": [
            {
                **b.scalar_fields(),
                **(
                    {"gaps": [[g.start, g.end, g.window and list(g.window)] for g in b.gaps]}
                    if b.gaps
                    else {}
                ),
                **({"banks": list(b.banks)} if b.banks else {}),
                **({"accesses": b.accesses} if b.accesses != 1 else {}),
            }
            for b in problem.buffers
        ],
        **(
            {
                "banks": [
                    {
                        "name": k.name,
                        "pool": k.pool,
                        "capacity": k.capacity,
                        "cost": k.cost,
                        "alignment": k.alignment,
                    }
                    for k in problem.banks
                ]
            }
            if problem.banks
            else {}
        ),
        **(
            {"pool_names": {str(pool): name for pool, name in problem.pool_names.items()}}
            if problem.pool_names
            else {}
        ),
        "groups": [{"parent": g.parent, "members": [list(m) for m in g.members]} for g in problem.groups],
        "same_offsets": [list(s.buffers) for s in problem.same_offsets],
        **({"shared_objects": True} if problem.shared_objects else {}),
    }


def _problem_from_dict(data: dict[str, Any]) -> Problem:
    for number, b in enumerate(_listed(data, "buffers", "the problem"), 1):
        if not isinstance(b, dict):
            raise ProblemError(f'buffer {number} of "buffers" must be an object, got {_brief(b)}')
    buffers = tuple(
        Buffer(
            b["id"],
            b["start"],
            b["end"],
            b["size"],
            alignment=b["alignment"],
            offset=b["offset"],
            pool=b["pool"],
            kind=BufferKind(b["kind"]),
            label=b["label"],
            gaps=tuple(
                Gap(start, end, None if w is None else tuple(w)) for start, end, w in b.get("gaps", ())
            ),
            banks=_bank_choices(b),
            accesses=b.get("accesses", 1),
        )
        for b in data["buffers"]
    )
    banks = tuple(_bank_from(k, number) for number, k in enumerate(_listed(data, "banks", "the problem"), 1))
    groups = tuple(
        ContiguousGroup(g["parent"], tuple((m, rel) for m, rel in g["members"])) for g in data["groups"]
    )
    same = tuple(SameOffset(tuple(s)) for s in data["same_offsets"])
    return Problem(
        buffers,
        groups,
        same,
        capacity=data["capacity"],
        name=data["name"],
        banks=banks,
        pool_names=_pool_names(data),
        shared_objects=data.get("shared_objects", False),
    )


def _pool_names(data: dict[str, Any]) -> dict[int, str]:
    """The problem's "pool_names" (absent: none): JSON keys are strings, pools are integers."""
    names = data.get("pool_names", {})
    if not isinstance(names, dict):
        raise ProblemError(f'the problem: "pool_names" must be an object {{"pool": "name"}}, got {names!r}')
    try:
        return {int(pool): name for pool, name in names.items()}
    except ValueError:
        raise ProblemError(
            f'the problem: "pool_names" has a key that is not a pool number: {list(names)}'
        ) from None


def _mapping(data: dict[str, Any], key: str, owner: str, shape: str) -> dict[str, Any]:
    """`data[key]` if it is a JSON object; otherwise a `ProblemError` naming it and the `shape` wanted."""
    value = data[key]
    if not isinstance(value, dict):
        raise ProblemError(f'{owner}: "{key}" must be an object {shape}, got {_brief(value)}')
    return value


def _brief(value: Any) -> str:
    """`value`'s repr, cut short: a wrong field may hold a whole file's worth of data."""
    text = repr(value)
    return text if len(text) <= 80 else f"{text[:77]}..."


def _listed(data: dict[str, Any], key: str, owner: str) -> list[Any]:
    """`data[key]` (absent: empty) if it is a JSON list; otherwise a `ProblemError` naming it."""
    value = data.get(key, [])
    if not isinstance(value, list):
        raise ProblemError(f'{owner}: "{key}" must be a list, got {value!r}')
    return value


def _bank_choices(buffer: dict[str, Any]) -> tuple[int, ...]:
    """A buffer's "banks": a list of pool numbers (each checked as an integer by `Buffer`)."""
    return tuple(_listed(buffer, "banks", f"buffer {buffer.get('id')!r}"))


def _bank_from(entry: Any, number: int) -> Bank:
    """Bank `number` (from 1) of the "banks" list; its field types are checked here or by `Bank`."""
    if not isinstance(entry, dict):
        raise ProblemError(
            f'bank {number} of "banks" must be an object with name, pool and capacity, got {entry!r}'
        )
    missing = [key for key in ("name", "pool", "capacity") if key not in entry]
    if missing:
        raise ProblemError(f'bank {number} of "banks" lacks {", ".join(missing)}')
    name = entry["name"]
    if not isinstance(name, str):
        raise ProblemError(f'bank {number} of "banks": name must be a string, got {name!r}')
    return Bank(
        name, entry["pool"], entry["capacity"], cost=entry.get("cost"), alignment=entry.get("alignment", 1)
    )


def _plan_to_dict(plan: Plan) -> dict[str, Any]:
    return {
        "type": "plan",
        "version": _JSON_VERSION,
        "solver": plan.solver,
        "seconds": plan.seconds,
        "proven_optimal": plan.proven_optimal,
        "lower_bound": plan.lower_bound,
        "status": plan.status,
        "outcome": plan.outcome.value,
        "arena_sizes": {str(pool): size for pool, size in plan.arena_sizes.items()},
        "offsets": dict(plan.offsets),
        **({"pools": dict(plan.pools)} if plan.pools else {}),
        **(
            {"seconds_over_limit": plan.seconds_over_limit, "over_limit_stages": dict(plan.over_limit_stages)}
            if plan.seconds_over_limit
            else {}
        ),
    }


def _outcome_of(data: dict[str, Any]) -> Outcome:
    """The plan's outcome as written; files older than `outcome` have only `proven_optimal`."""
    if data.get("outcome") is not None:
        return Outcome(data["outcome"])
    return Outcome.OPTIMAL if data["proven_optimal"] else Outcome.HEURISTIC


def _plan_from_dict(data: dict[str, Any]) -> Plan:
    offsets = _mapping(data, "offsets", "the plan", '{"buffer": offset}')
    arena_sizes = _mapping(data, "arena_sizes", "the plan", '{"pool": bytes}')
    pools = _mapping(data, "pools", "the plan", '{"buffer": bank}') if "pools" in data else {}
    for what, values in (("offset of", offsets), ("arena size of pool", arena_sizes)):
        for key, value in values.items():
            if isinstance(value, bool) or not isinstance(value, int):
                raise ProblemError(f"{what} {key!r} must be an integer, got {value!r}")
    over, stages = _overrun_of(data)
    return Plan(
        offsets=dict(offsets),
        arena_sizes={int(pool): size for pool, size in arena_sizes.items()},
        solver=data["solver"],
        seconds=data["seconds"],
        lower_bound=data["lower_bound"],
        status=data["status"],
        outcome=_outcome_of(data),
        pools=dict(pools),
        seconds_over_limit=over,
        over_limit_stages=stages,
    )


def _overrun_of(data: dict[str, Any]) -> tuple[float, dict[str, float]]:
    """How long the solve ran past its limit and in which stages (written only when it did)."""
    over = data.get("seconds_over_limit", 0.0)
    stages = (
        _mapping(data, "over_limit_stages", "the plan", '{"stage": seconds}')
        if "over_limit_stages" in data
        else {}
    )
    for name, seconds in (
        ("seconds_over_limit", over),
        *((f"over_limit_stages[{k!r}]", v) for k, v in stages.items()),
    ):
        if isinstance(seconds, bool) or not isinstance(seconds, int | float) or seconds < 0:
            raise ProblemError(f"the plan's {name} must be a number of seconds >= 0, got {seconds!r}")
    return float(over), {str(k): float(v) for k, v in stages.items()}
