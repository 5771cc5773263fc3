"""What elementwise in place did to one method: `pass_.results[method].reports["elementwise in place"]`."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from memplan.planner.levers.elementwise_in_place.analysis import InPlace
from memplan.planner.levers.refusals import Refusal


@dataclass(frozen=True)
class InPlaceReport:
    """Every elementwise instruction of the method and whether it writes over its input."""

    decisions: tuple[InPlace, ...]
    instructions_shared: int  # what the rewrite carried out (equals len(shared))

    @property
    def shared(self) -> list[InPlace]:
        return [d for d in self.decisions if d.shared]

    @property
    def refused(self) -> list[InPlace]:
        return [d for d in self.decisions if not d.shared]

    def refusals(self) -> dict[Refusal, int]:
        """How many instructions that keep their own output name each reason."""
        return dict(Counter(r for d in self.refused for r in d.reasons))

    def summary(self) -> str:
        """One line per elementwise instruction, then the totals."""
        lines = []
        for d in self.decisions:
            verdict = (
                f"over {d.input}"
                if d.shared
                else f"own buffer  [{', '.join(r.value for r in d.reasons)}] {d.detail}"
            )
            lines.append(f"{d.instruction:40s} {d.nbytes:>10,d} B  {verdict}")
        lines.append(
            f"elementwise instructions {len(self.decisions)}: written over an input {len(self.shared)},"
            f" own buffer {len(self.refused)}"
        )
        return "\n".join(lines)
