"""Two programs compared: which methods, arenas and tensors grew or shrank, and which tensors are new
or gone.

Each side is a `ProgramReport`; its program's arenas (`non_const_buffer_sizes`) and memplan's (or the
file's) plan are compared. Tensors are matched by what computes them (`match_tensors`), never by a
number that only counts values: a `.pte` numbers its values in emission order, so one extra or fused
op shifts every later number, and the same value number in two programs is often an unrelated tensor.
`worst_growth` is the largest relative growth of a method's arenas, what `memplan diff --max-growth`
checks.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from difflib import SequenceMatcher

from memplan.viz.report.model import ProgramReport, TensorInfo


@dataclass(frozen=True)
class Change:
    kind: str  # "method", "arena", "tensor"
    name: str
    before: int | None  # None: not in that program
    after: int | None
    detail: str = ""  # a tensor's shape and dtype ("4x8 float32", "shape 2x16 -> 2x64 float32")

    @property
    def delta(self) -> int:
        return (self.after or 0) - (self.before or 0)

    @property
    def growth(self) -> float | None:
        """Relative change; None when it did not exist before."""
        if not self.before:
            return None if self.after else 0.0
        return self.delta / self.before

    def sentence(self) -> str:
        detail = f"; {self.detail}" if self.detail else ""
        if self.before is None:
            return f"{self.kind} {self.name}: new, {self.after:,} B{detail}"
        if self.after is None:
            return f"{self.kind} {self.name}: gone (was {self.before:,} B){detail}"
        verb = "grew" if self.delta > 0 else "shrank"
        pct = f" ({self.growth:+.1%})" if self.growth is not None else ""
        return f"{self.kind} {self.name}: {verb} by {abs(self.delta):,} B{pct}, {self.before:,} -> {self.after:,} B{detail}"


@dataclass
class ProgramDiff:
    before: str
    after: str
    changes: list[Change] = field(default_factory=list)
    matched: dict[str, tuple[int, int, int]] = field(default_factory=dict)  # method -> (matched, new, gone)

    @property
    def worst_growth(self) -> float:
        """Largest relative growth of a method's total arena bytes (a new method counts as infinite)."""
        growths = [c.growth for c in self.changes if c.kind == "method" and c.delta > 0]
        return max((float("inf") if g is None else g for g in growths), default=0.0)

    def text(self) -> str:
        lines = [f"# {self.before} -> {self.after}"]
        lines += [
            f"method {m}: {same:,} tensors matched by what computes them, {new:,} new, {gone:,} gone"
            for m, (same, new, gone) in self.matched.items()
        ]
        moved = [c for c in self.changes if c.delta or c.before is None or c.after is None]
        lines += [c.sentence() for c in moved] or ["no method, arena or tensor changed size"]
        return "\n".join(lines) + "\n"


Pair = tuple[TensorInfo | None, TensorInfo | None]
_VALUE = re.compile(r"\bv\d+\b")  # a .pte value number inside a writer ("alias of v172")


def match_tensors(old: list[TensorInfo], new: list[TensorInfo], by_name: bool) -> list[Pair]:
    """Each tensor of `old` paired with the tensor of `new` computed the same way, or with None (gone;
    new ones pair None with the tensor).

    `by_name` (tensors named after graph nodes): a name in both programs written by the same op is one
    tensor. The rest, in instruction order, are aligned as sequences of (op, shape, dtype)
    (difflib.SequenceMatcher): runs computed alike pair up in order; inside a stretch that differs,
    tensors pair only with one written by the same op (in order, so a resized layer still pairs), and
    what is left is new or gone. Two tensors of different ops are never one tensor.
    """
    pairs: list[Pair] = []
    if by_name:
        theirs = {t.name: t for t in new}
        same = {t.name for t in old if t.name in theirs and _op(theirs[t.name]) == _op(t)}
        pairs += [(t, theirs[t.name]) for t in old if t.name in same]
        old = [t for t in old if t.name not in same]
        new = [t for t in new if t.name not in same]
    old, new = sorted(old, key=_order), sorted(new, key=_order)
    keys = SequenceMatcher(None, [_key(t) for t in old], [_key(t) for t in new], autojunk=False)
    for tag, i1, i2, j1, j2 in keys.get_opcodes():
        if tag == "equal":
            pairs += list(zip(old[i1:i2], new[j1:j2]))
        else:
            pairs += _by_op(old[i1:i2], new[j1:j2])
    return pairs


def _order(t: TensorInfo) -> tuple[int, int, str]:
    return (t.start, t.end, t.name)


def _op(t: TensorInfo) -> str:
    """What writes the tensor, without value numbers ("alias of v172" -> "alias of v"): they count
    values, so they differ between programs that compute the same."""
    return _VALUE.sub("v", t.op)


def _key(t: TensorInfo) -> tuple[str, str, str, str]:
    return (_op(t), t.shape, t.dtype, t.kind)


def _by_op(old: list[TensorInfo], new: list[TensorInfo]) -> list[Pair]:
    """Inside a stretch that differs: the k-th tensor an op writes on one side with the k-th it writes on
    the other; the rest unpaired."""
    pairs: list[Pair] = []
    left = list(new)
    for t in old:
        match = next((n for n in left if _op(n) == _op(t)), None)
        if match is not None:
            left.remove(match)
        pairs.append((t, match))
    return pairs + [(None, n) for n in left]


def _tensor_change(method: str, a: TensorInfo | None, b: TensorInfo | None) -> Change:
    """One matched pair (or a tensor new or gone), named by both sides' names when they differ."""
    names = [t.name for t in (a, b) if t is not None]
    shown = names[0] if len(set(names)) == 1 else " -> ".join(names)
    t = b if b is not None else a
    assert t is not None
    shapes = [x.shape for x in (a, b) if x is not None]
    shape = shapes[0] if len(set(shapes)) == 1 else "shape " + " -> ".join(shapes)
    return Change(
        "tensor",
        f"{method}/{shown} ({t.op or 'unknown writer'})",
        a.nbytes if a is not None else None,
        b.nbytes if b is not None else None,
        f"{shape} {t.dtype}".strip(),
    )


def diff_programs(before: ProgramReport, after: ProgramReport) -> ProgramDiff:
    """Every method (total arena bytes), arena (per method and mem_id) and tensor (per method, matched by
    what computes it)."""
    found = ProgramDiff(before.name, after.name)
    old = {m.method: m for m in before.methods}
    new = {m.method: m for m in after.methods}
    by_name = before.names_nodes and after.names_nodes
    for name in list(old) + [n for n in new if n not in old]:
        a, b = old.get(name), new.get(name)
        found.changes.append(
            Change("method", name, sum(a.emitted) if a else None, sum(b.emitted) if b else None)
        )
        if a is None or b is None:
            continue
        for mem_id in range(1, max(len(a.emitted), len(b.emitted))):
            sizes = [m.emitted[mem_id] if mem_id < len(m.emitted) else None for m in (a, b)]
            found.changes.append(Change("arena", f"{name} mem_id {mem_id}", sizes[0], sizes[1]))
        pairs = match_tensors(list(a.primary.tensors.values()), list(b.primary.tensors.values()), by_name)
        found.matched[name] = (
            sum(1 for x, y in pairs if x and y),
            sum(1 for x, _ in pairs if x is None),
            sum(1 for _, y in pairs if y is None),
        )
        tensors = [_tensor_change(name, x, y) for x, y in pairs]
        found.changes += sorted(tensors, key=lambda c: -abs(c.delta))
    return found
