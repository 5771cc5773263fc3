"""The whole memory budget of a program, and a verdict per bank under `--budget "sram:256KiB,dram:8MiB"`.

Rows: the planned arenas per mem_id (host methods share them, so the largest method's), the mutable
state inside them, the constant data and delegate blobs of the `.pte`, and what the file does not
determine (delegate scratch, the runtime's temp and method allocators) as "unknown", never left out.

Which bank holds which arena: a plan made across banks names its pools after them ("mem_id 2 · dram");
otherwise every planned arena is in the first bank of the budget (where ExecuTorch's host arenas go)
and later banks hold nothing planned (`assumes_first_bank`; the page says so). The smallest change is
the first memplan knows of, in order: a lever or lowering the user did not use whose measured plan
fits (`ProgramReport.tries`, made by `memplan report`: the one that saves the most); when the report
carries memplan's plan across the banks (`ProgramReport.banked`, made with
`PlannerPass(memory_map=...)` across the budget's banks), that plan's figures, or by how much even it
falls short; move the smallest tensor live at the peak whose removal brings the live peak within the bank to a
bank with room for it (read off the live peak, not planned); close the gap between the plan and its
lower bound with an exact solver; nothing. Without a fitting lever, the best one tried is named too.
"""

from __future__ import annotations

from dataclasses import dataclass

from memplan.timeline import peak
from memplan.viz.report.model import BankedPlan, ProgramReport
from memplan.viz.style import format_bytes


@dataclass(frozen=True)
class BudgetBank:
    name: str
    capacity: int


def parse_budget(text: str) -> list[BudgetBank]:
    """`"sram:256KiB,dram:8MiB"` -> banks in that order (the memory-map syntax; ValueError names the fault)."""
    from memplan.planner.memory.bank_maps import parse_memory_map

    try:
        banks = parse_memory_map(text).banks
    except ValueError as exc:
        raise ValueError(str(exc).replace("memory map", "budget", 1)) from None
    return [BudgetBank(b.name, b.size) for b in banks]


@dataclass(frozen=True)
class BudgetRow:
    what: str
    bytes: int | None  # None: unknown
    where: str


def budget_rows(report: ProgramReport) -> list[BudgetRow]:
    """Everything the program needs in memory, the unknown parts named."""
    rows = []
    lanes = report.lanes()
    for mem_id, size in sorted(report.program_arenas().items()):
        owner = max(report.methods, key=lambda m: m.emitted[mem_id] if mem_id < len(m.emitted) else 0)
        rows.append(
            BudgetRow(
                f"planned arena {lanes.get(mem_id, f'mem_id {mem_id}')}",
                size,
                f"largest in method {owner.method}; methods share it",
            )
        )
    state = max((m.state_bytes for m in report.methods), default=0)
    if state:
        rows.append(
            BudgetRow("of which mutable state", state, "inside the planned arenas, kept across calls")
        )
    rows.append(
        BudgetRow(
            "constant data (weights)", report.constant_bytes, "in the .pte; loaded or mapped by the runtime"
        )
    )
    if report.delegate_bytes:
        rows.append(BudgetRow("delegate blobs", report.delegate_bytes, "in the .pte"))
    delegates = sorted({d for m in report.methods for d in m.delegates})
    if delegates:
        rows.append(
            BudgetRow(
                f"scratch of {', '.join(delegates)}", None, "unknown: the backend allocates it at run time"
            )
        )
    rows.append(BudgetRow("runtime temp allocator (kernel scratch)", None, "unknown: the file does not say"))
    rows.append(
        BudgetRow(
            "method allocator (EValues, tensor metadata)", None, "unknown: depends on the runtime build"
        )
    )
    return rows


@dataclass(frozen=True)
class Verdict:
    bank: str
    capacity: int
    needed: int
    change: str  # the smallest change memplan knows ("" when it fits)

    @property
    def fits(self) -> bool:
        return self.needed <= self.capacity

    def sentence(self) -> str:
        if self.fits:
            return f"{self.bank}: fits, {format_bytes(self.capacity - self.needed)} ({self.capacity - self.needed:,} B) to spare"
        short = self.needed - self.capacity
        return f"{self.bank}: does not fit by {format_bytes(short)} ({short:,} B)"


def verdicts(report: ProgramReport, budget: list[BudgetBank]) -> list[Verdict]:
    """One verdict per bank of the budget, with the smallest change for each bank that does not fit."""
    need = _needs(report, budget)
    spare = {b.name: b.capacity - need[b.name] for b in budget}
    banked = report.banked
    found = []
    for b in budget:
        if need[b.name] <= b.capacity:
            change = ""
        elif measured := _measured(report, b, budget):
            change = measured  # a switch the user did not use beats moving tensors across banks
        elif banked is not None:
            change = across_banks(banked) + _best_try(report)
        else:
            change = _change(report, b, need[b.name], spare) + _best_try(report)
        found.append(Verdict(b.name, b.capacity, need[b.name], change))
    return found


def assumes_first_bank(report: ProgramReport, budget: list[BudgetBank]) -> bool:
    """Whether no arena of the report's plan is named after a bank of the budget, so every arena counts
    against the first bank."""
    names = {f"· {b.name}" for b in budget}
    return not any(lane.endswith(tuple(names)) for lane in report.lanes().values())


MOVED_NAMED = 5  # tensors named in the sentence about a plan across banks; the rest are counted


def across_banks(banked: BankedPlan) -> str:
    """The verified change: memplan's plan across the banks fits (its figures), or how much it lacks."""
    if not banked.fits:
        how = "proven" if banked.proven else "memplan's best plan across them"
        return (
            f"does not fit even across the banks: short by {banked.short_by:,} B in {banked.short_bank}"
            f" ({how})"
        )
    where = " + ".join(f"{b.name} {format_bytes(b.capacity)}" for b in banked.banks)
    sizes = ", ".join(f"{b.name} {b.bytes:,} B" for b in banked.banks)
    moved = []
    for b in banked.banks[1:]:
        if b.tensors:
            named = ", ".join(b.tensors[:MOVED_NAMED])
            more = f" and {len(b.tensors) - MOVED_NAMED} more" if len(b.tensors) > MOVED_NAMED else ""
            moved.append(
                f"{len(b.tensors)} tensors moved to {b.name}: {named}{more};"
                f" {b.traffic:,} B of traffic per call through {b.name}"
            )
    return (
        f"planned across {where} it fits: {sizes}"
        + (f" ({'; '.join(moved)})" if moved else "")
        + "; give these banks as --memory-map to report that plan"
    )


def _measured(report: ProgramReport, bank: BudgetBank, budget: list[BudgetBank]) -> str:
    """The lever or lowering tried that brings the program within `bank` with the most to spare, when
    every arena is in that bank (the first, planned without a map); "" when none does."""
    if bank != budget[0] or not assumes_first_bank(report, budget):
        return ""
    fits = [t for t in report.tries if t.arena is not None and t.arena <= bank.capacity and t.saving > 0]
    if not fits:
        return ""
    best = max(fits, key=lambda t: t.saving)
    arena = best.baseline - best.saving
    return (
        f"{best.flag} ({best.what}): measured, the program's arenas drop from {best.baseline:,} to"
        f" {arena:,} B with {best.solver}, {format_bytes(bank.capacity - arena)} within {bank.name}"
    )


def _best_try(report: ProgramReport) -> str:
    """What the best lever tried saves, when none brings the bank within budget ("" without tries)."""
    saved = [t for t in report.tries if t.saving > 0]
    if not saved:
        return "; no lever or lowering memplan tried saves bytes" if report.tries else ""
    best = max(saved, key=lambda t: t.saving)
    return f"; of the levers tried, {best.flag} saves the most, {best.baseline:,} -> {best.arena:,} B: not enough"


def _bank_of(lane: str, budget: list[BudgetBank]) -> str:
    """The budget bank an arena is in: the one its lane names, else the first."""
    for b in budget:
        if lane.endswith(f"· {b.name}"):
            return b.name
    return budget[0].name


def _needs(report: ProgramReport, budget: list[BudgetBank]) -> dict[str, int]:
    need = {b.name: 0 for b in budget}
    lanes = report.lanes()
    for mem_id, size in report.program_arenas().items():
        need[_bank_of(lanes.get(mem_id, ""), budget)] += size
    return need


def _change(report: ProgramReport, bank: BudgetBank, needed: int, spare: dict[str, int]) -> str:
    short = needed - bank.capacity
    for method in sorted(report.methods, key=lambda m: -sum(m.emitted)):
        plan = method.primary
        roots = [t for t in plan.roots() if _bank_of(plan.lane(plan.offsets[t.name][0]), [bank]) == bank.name]
        live, step = peak([(t.start, t.end, t.nbytes) for t in roots])
        overhead = sum(method.emitted) - live  # what the plan and the program add above the live peak
        others = {name: room for name, room in spare.items() if name != bank.name}
        for t in sorted(plan.live_at(step), key=lambda t: (t.nbytes, t.name)):
            if t.kind == "mutable_state" or not others:
                continue
            target = next((name for name, room in others.items() if room >= t.nbytes), None)
            if target is None:
                continue
            rest = peak([(r.start, r.end, r.nbytes) for r in roots if r.name != t.name])[0]
            if rest + overhead <= bank.capacity:
                return (
                    f"move {t.name} ({format_bytes(t.nbytes)}, live at the peak, written by {t.op}) to {target}:"
                    f" the live peak of {bank.name} drops to {format_bytes(rest)}; plan across the banks with"
                    f" --memory-map to place it"
                )
        if (
            plan.lower_bound is not None
            and plan.lower_bound + (sum(method.emitted) - plan.arena_bytes) <= bank.capacity
        ):
            return (
                f"method {method.method} is {format_bytes(plan.arena_bytes - plan.lower_bound)} above its lower bound:"
                " an exact solver (--solver cpsat with a longer --time-limit) may close the gap"
            )
    return (
        f"memplan knows no change that saves {format_bytes(short)}: no tensor live at the peak can move to a"
        " bank with room enough to bring it within budget, and the lower bound plus what the program adds"
        " is above the budget"
    )
