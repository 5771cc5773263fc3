"""What slice no-ops did to one method, in numbers: `pass_.results[method].slice_report`."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from memplan.planner.levers.refusals import Refusal
from memplan.planner.levers.slice_noop.decisions import SliceDecision, SliceNoops


@dataclass(frozen=True)
class SliceReport:
    """Every slice/select/split output's decision, the instructions removed and the copies saved."""

    noops: SliceNoops
    instructions_removed: int

    @property
    def decisions(self) -> list[SliceDecision]:
        return self.noops.decisions

    @property
    def copy_bytes_removed(self) -> int:
        """Bytes no longer copied per call."""
        return self.noops.copy_bytes_removed

    def refusals(self) -> dict[Refusal, int]:
        """How many refused outputs name each reason."""
        return dict(Counter(r for d in self.noops.decisions if not d.removed for r in d.reasons))

    def summary(self) -> str:
        """One line per output, then the totals."""
        lines = []
        for d in self.noops.decisions:
            status = "no-op" if d.node in self.noops.nodes_removed else "refused" if not d.removed else "kept"
            why = f"  [{', '.join(r.value for r in d.reasons)}] {d.detail}" if d.reasons else ""
            lines.append(f"{d.node:32s} {d.op:7s} {status:8s} {d.nbytes:>9d} B at +{d.offset}{why}")
        lines.append(
            f"{len(self.noops.nodes_removed)} of {len({d.node for d in self.noops.decisions})} ops removed,"
            f" {self.noops.copy_bytes_removed} B of copies per call"
        )
        return "\n".join(lines)
