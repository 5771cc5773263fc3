"""Two programs compared: which methods, arenas and tensors grew or shrank, matched by name.

Each side is a `ProgramReport`; its program's arenas (`non_const_buffer_sizes`) and memplan's (or the
file's) plan are compared. Tensors are matched by name: node names for a lowering, value numbers
("v12") for a `.pte`, which stay put when the same model is exported again. `worst_growth` is the
largest relative growth of a method's arenas, what `memplan diff --max-growth` checks.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from memplan.viz.report.model import ProgramReport


@dataclass(frozen=True)
class Change:
    kind: str  # "method", "arena", "tensor"
    name: str
    before: int | None  # None: not in that program
    after: int | None

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
        if self.before is None:
            return f"{self.kind} {self.name}: new, {self.after:,} B"
        if self.after is None:
            return f"{self.kind} {self.name}: gone (was {self.before:,} B)"
        verb = "grew" if self.delta > 0 else "shrank"
        pct = f" ({self.growth:+.1%})" if self.growth is not None else ""
        return f"{self.kind} {self.name}: {verb} by {abs(self.delta):,} B{pct}, {self.before:,} -> {self.after:,} B"


@dataclass
class ProgramDiff:
    before: str
    after: str
    changes: list[Change] = field(default_factory=list)

    @property
    def worst_growth(self) -> float:
        """Largest relative growth of a method's total arena bytes (a new method counts as infinite)."""
        growths = [c.growth for c in self.changes if c.kind == "method" and c.delta > 0]
        return max((float("inf") if g is None else g for g in growths), default=0.0)

    def text(self) -> str:
        lines = [f"# {self.before} -> {self.after}"]
        moved = [c for c in self.changes if c.delta or c.before is None or c.after is None]
        lines += [c.sentence() for c in moved] or ["no method, arena or tensor changed size"]
        return "\n".join(lines) + "\n"


def diff_programs(before: ProgramReport, after: ProgramReport) -> ProgramDiff:
    """Every method (total arena bytes), arena (per method and mem_id) and tensor (per method, by name)."""
    found = ProgramDiff(before.name, after.name)
    old = {m.method: m for m in before.methods}
    new = {m.method: m for m in after.methods}
    for name in list(old) + [n for n in new if n not in old]:
        a, b = old.get(name), new.get(name)
        found.changes.append(
            Change("method", name, sum(a.emitted) if a else None, sum(b.emitted) if b else None)
        )
        if a is None or b is None:
            continue
        for mem_id in range(1, max(len(a.emitted), len(b.emitted))):
            sizes = [m.emitted[mem_id] if mem_id < len(m.emitted) else None for m in (a, b)]
            found.changes.append(Change("arena", f"{name} mem_id {mem_id}", *sizes))
        ta, tb = a.primary.tensors, b.primary.tensors
        tensors = [
            Change(
                "tensor",
                f"{name}/{t} ({(tb.get(t) or ta[t]).op})",
                ta[t].nbytes if t in ta else None,
                tb[t].nbytes if t in tb else None,
            )
            for t in list(ta) + [t for t in tb if t not in ta]
        ]
        found.changes += sorted(tensors, key=lambda c: -abs(c.delta))
    return found
