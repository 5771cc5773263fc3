"""What updating state in place did to one method: `pass_.results[method].state_report`."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from memplan.planner.levers.refusals import Refusal
from memplan.planner.levers.state_in_place.analysis import StateStatus, WriteBack


@dataclass(frozen=True)
class StateReport:
    """Every write-back of the method, what became of it, and the copies saved per call."""

    decisions: tuple[WriteBack, ...]
    instructions_removed: int

    def count(self, status: StateStatus) -> int:
        return sum(d.status is status for d in self.decisions)

    @property
    def removed(self) -> list[WriteBack]:
        return [d for d in self.decisions if d.status is StateStatus.IN_PLACE]

    @property
    def refused(self) -> list[WriteBack]:
        return [d for d in self.decisions if d.status is not StateStatus.IN_PLACE]

    @property
    def copy_bytes_removed(self) -> int:
        """Bytes no longer copied per call."""
        return sum(d.copy_bytes_removed for d in self.decisions)

    @property
    def copies_left(self) -> int:
        return len(self.refused)

    @property
    def bytes_copied_per_call(self) -> int:
        """Bytes the write-back copies that stay still move per call."""
        return sum(d.nbytes for d in self.refused)

    def refusals(self) -> dict[Refusal, int]:
        """How many write-backs that stay name each reason."""
        return dict(Counter(r for d in self.refused for r in d.reasons))

    def summary(self) -> str:
        """One line per write-back, then the totals."""
        lines = []
        for d in self.decisions:
            where = f" after {d.moved_after}" if d.moved_after else ""
            why = f"  [{', '.join(r.value for r in d.reasons)}] {d.detail}" if d.reasons else ""
            lines.append(
                f"{d.fqn:40s} {d.status.value:8s}{where} {d.nbytes:>10d} B  via {d.producer or d.value}{why}"
            )
        lines.append(
            f"write-backs {len(self.decisions)}: in place {self.count(StateStatus.IN_PLACE)},"
            f" moved {self.count(StateStatus.MOVED)}, kept {self.count(StateStatus.KEPT)};"
            f" bytes no longer copied per call {self.copy_bytes_removed}, still copied {self.bytes_copied_per_call}"
        )
        return "\n".join(lines)
