"""What cat fusion did to one method, in numbers: `CatReport`."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from memplan.peak_bound import lower_bound
from memplan.plan import Plan
from memplan.planner.levers.cat.decisions import CatDecision, CatFusion, CatStatus
from memplan.planner.levers.refusals import Refusal


@dataclass(frozen=True)
class CatReport:
    """What cat fusion did to one method: decisions, copies saved, arena and bound with and without.

    "Without" is the same solver on the problem without the fusion groups.
    """

    decisions: tuple[CatDecision, ...]
    arena_with: int
    arena_without: int | None  # None: without fusion no plan fit the capacity
    lower_bound_with: int
    lower_bound_without: int
    instructions_removed: int

    @classmethod
    def of(
        cls, fusion: CatFusion, plan_with: Plan, plan_without: Plan | None, instructions_removed: int
    ) -> CatReport:
        return cls(
            decisions=tuple(fusion.decisions),
            arena_with=plan_with.arena_size,
            arena_without=None if plan_without is None else plan_without.arena_size,
            lower_bound_with=lower_bound(fusion.problem),
            lower_bound_without=lower_bound(fusion.problem_without),
            instructions_removed=instructions_removed,
        )

    def count(self, status: CatStatus) -> int:
        return sum(d.status is status for d in self.decisions)

    @property
    def copy_bytes_removed(self) -> int:
        return sum(d.copy_bytes_removed for d in self.decisions)

    def refusals(self) -> dict[Refusal, int]:
        """How many refused cats name each reason."""
        refused = (d for d in self.decisions if d.status is CatStatus.REFUSED)
        return dict(Counter(r for d in refused for r in d.reasons))

    def summary(self) -> str:
        """One line per cat, then the totals."""
        lines = []
        for d in self.decisions:
            why = f"  [{', '.join(r.value for r in d.reasons)}] {d.detail}" if d.reasons else ""
            lines.append(
                f"{d.cat:32s} {d.status.value:8s} {d.nbytes:>9d} B  removed {d.copy_bytes_removed:>9d} B{why}"
            )
        without = "no fitting plan" if self.arena_without is None else f"{self.arena_without} B"
        lines.append(
            f"cats {len(self.decisions)}: fused {self.count(CatStatus.FUSED)}, aliased {self.count(CatStatus.ALIASED)},"
            f" partial {self.count(CatStatus.PARTIAL)}, refused {self.count(CatStatus.REFUSED)};"
            f" copy bytes removed {self.copy_bytes_removed}; arena {self.arena_with} B with fusion, {without}"
            f" without; lower bound {self.lower_bound_with} / {self.lower_bound_without} B"
        )
        return "\n".join(lines)
