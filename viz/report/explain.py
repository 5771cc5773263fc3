"""What memplan did, or could not do, for each tensor, in plain words; and the tensors at the peak.

The words come from the pass's own records (`results[method].cat_report`, `.state_report`,
`.slice_noops`): a fused cat's output and inputs, a state written in place or why its write-back copy
stays, a slice that became a no-op or why it is still a copy. Reason codes become words
("inner_dim" -> "inner dim") followed by the pass's own detail sentence.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any

from memplan.viz.report.model import LeverTry, MethodReport, TensorInfo
from memplan.viz.style import format_bytes


def _why(reasons: Iterable[Enum], detail: str) -> str:
    words = ", ".join(str(r.value).replace("_", " ") for r in reasons)
    if words and detail:
        return f"{words} ({detail})"
    return words or detail or "no reason recorded"


def actions_of(result: Any) -> dict[str, list[str]]:
    """Tensor name (buffer id) -> what each of memplan's levers did to it, one sentence each."""
    said: dict[str, list[str]] = {}

    def say(name: str, text: str) -> None:
        if name:
            said.setdefault(name, []).append(text)

    _cats(getattr(result, "cat_report", None), say)
    _states(getattr(result, "state_report", None), say)
    _slices(getattr(result, "slice_noops", None), say)
    return said


def _cats(report: Any, say) -> None:
    if report is None:
        return
    from memplan.planner.levers.cat.decisions import CatStatus

    for d in report.decisions:
        if d.status is CatStatus.REFUSED:
            say(
                d.output,
                f"cat {d.cat} not fused, it still copies {format_bytes(d.nbytes)}: {_why(d.reasons, d.detail)}",
            )
            for i in d.inputs:
                if i.reason is not None:
                    say(i.buffer, f"input of cat {d.cat}, not placed inside it: {_why([i.reason], i.detail)}")
            continue
        saved = format_bytes(d.copy_bytes_removed)
        inputs = ", ".join(i.node for i in d.inputs if i.placement in ("member", "placed")) or "none"
        verb = "fused" if d.status is CatStatus.FUSED else d.status.value
        say(
            d.output,
            f"cat {d.cat} {verb}: its inputs ({inputs}) are written inside it, {saved} less copied per call",
        )
        for i in d.inputs:
            if i.placement in ("member", "placed"):
                say(i.buffer, f"written in place inside the output of cat {d.cat}, at byte {i.offset:,}")
            elif i.placement == "copy":
                say(
                    i.buffer,
                    f"copied into its slice of cat {d.cat}: {_why([i.reason] if i.reason else [], i.detail)}",
                )


def _states(report: Any, say) -> None:
    if report is None:
        return
    from memplan.planner.levers.state_in_place import StateStatus

    for d in report.decisions:
        if d.status is StateStatus.IN_PLACE:
            text = (
                f"state {d.fqn} updated in place by {d.producer or d.value}: the write-back copy of"
                f" {format_bytes(d.nbytes)} is gone"
            )
        else:
            moved = f", moved to right after {d.moved_after}" if d.moved_after else ""
            text = (
                f"state {d.fqn}: write-back copy of {format_bytes(d.nbytes)} kept{moved}:"
                f" {_why(d.reasons, d.detail)}"
            )
        say(d.state, text)
        say(d.value, text)


def _slices(noops: Any, say) -> None:
    if noops is None:
        return
    for d in noops.decisions:
        if d.removed:
            say(
                d.output,
                f"{d.op} {d.node} is a no-op: it sits inside {d.input} at byte {d.offset:,}, no copy",
            )
        else:
            say(
                d.output,
                f"{d.op} {d.node} still copies {format_bytes(d.nbytes)}: {_why(d.reasons, d.detail)}",
            )


def lever_notes(levers: Mapping[str, bool], result: Any) -> list[str]:
    """One sentence per lever that was off, since then no tensor says what it could have done."""
    notes = []
    if not levers.get("cat fusion", True):
        notes.append("cat fusion was off: no cat was considered (memplan plan --cat-fusion on)")
    if not levers.get("state in place", True):
        notes.append("state in place was off: every write-back copy stays")
    if getattr(result, "slice_noops", None) is None:
        notes.append("slice no-ops were off (PlannerPass(slice_noop=True)): every slice keeps its copy")
    return notes


@dataclass(frozen=True)
class PeakRow:
    """One tensor live at the peak of memplan's plan, and what memplan did or could not do to it."""

    tensor: TensorInfo
    share: float  # of the peak's bytes
    holds: tuple[str, ...]  # tensors placed inside it
    actions: tuple[str, ...]


TRANSPOSE_OPS = ("permute_copy", "t_copy", "transpose_copy")  # how a plain to_edge writes W.T of a linear
LOWERING_FLAGS = ("--const-prop", "--convert-linear")  # the lowerings that fold or keep it out


def _lowering_said(t: TensorInfo, tries: Sequence[LeverTry]) -> str:
    """For a transpose copy (a linear's weight, under plain to_edge): what the lowerings that remove
    such copies measured for the program, when one was tried and saved bytes; else ""."""
    if not t.op.startswith(TRANSPOSE_OPS):
        return ""
    saved = [x for x in tries if x.flag in LOWERING_FLAGS and x.saving > 0]
    if not saved:
        return ""
    best = max(saved, key=lambda x: x.saving)
    return (
        f"a transpose copy: if it is a weight's, {best.flag} removes such copies; measured for the whole"
        f" program: {best.baseline:,} -> {best.arena:,} B with {best.solver} (see the levers not used)"
    )


def peak_rows(
    method: MethodReport, limit: int | None = None, tries: Sequence[LeverTry] = ()
) -> tuple[int, int, list[PeakRow]]:
    """(peak bytes, peak step, the roots live there, largest first, with what memplan did to each;
    `tries`, the levers not used as measured, name the lowering that removes a weight transpose)."""
    plan = method.primary
    peak, step = plan.peak()
    rows = []
    for t in plan.live_at(step)[:limit]:
        members = plan.members_of(t.name)
        said = list(method.actions.get(t.name, []))
        for m in members:
            said += [
                f"{m.name}: {a}" for a in method.actions.get(m.name, []) if "written in place inside" not in a
            ]
        if not said:
            said = [_nothing(t)] + [x for x in (_lowering_said(t, tries),) if x]
        rows.append(PeakRow(t, t.nbytes / peak if peak else 0.0, tuple(m.name for m in members), tuple(said)))
    return peak, step, rows


def _nothing(t: TensorInfo) -> str:
    """Why no lever applied to a tensor no record names."""
    if t.kind == "graph_input":
        return "a graph input: the caller fills it, so it lives from the first step"
    if t.kind == "graph_output":
        return "a graph output: it lives to the end, where the caller reads it"
    if t.kind == "mutable_state":
        return "mutable state: it keeps its bytes across calls"
    return "no lever applies: its op writes a tensor of its own (no cat, slice or state write-back made it)"
