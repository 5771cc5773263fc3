"""What a solver returns: a `Plan` (offsets, arena per pool) and its `Outcome` (what it proves)."""

from __future__ import annotations

import html
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from memplan.problem import Problem

__all__ = ["Outcome", "Plan", "arena_sizes_of"]


class Outcome(str, Enum):
    """How a plan came about: what a caller may conclude from it (`Plan.status` adds the detail)."""

    OPTIMAL = "optimal"  # proven: no plan with a smaller arena exists
    FEASIBLE = "feasible"  # fits the capacity of a decision run; smaller plans were not looked for
    TIME_LIMIT = "time_limit"  # an exact search stopped at its time limit: best plan found, not proven
    GAP_LIMIT = "gap_limit"  # an exact search stopped within the optimality gap the caller allowed
    NOT_PROVEN = "not_proven"  # an exact search ended without a proof for this plan (e.g. rounding)
    SOLVER_FAILED = "solver_failed"  # the exact backend failed; the heuristic plan it started from
    HEURISTIC = "heuristic"  # a heuristic's plan, with no claim of optimality


@dataclass(frozen=True)
class Plan:
    """Offsets for every buffer and the arena each pool needs.

    `outcome` says what the plan is (proven optimal, feasible, cut short by a
    time limit, a heuristic's ...), `status` says it in words with the detail.
    `proven_optimal` is read off it: True only for `Outcome.OPTIMAL`, when the
    solver proved no smaller arena exists (for a capacity/decision run: that the
    plan is feasible and minimal is not claimed). `lower_bound` is the bound it
    was compared against. `seconds_over_limit` is how long the call ran past its
    time limit (0.0: it finished inside it, or had none) and `over_limit_stages`
    which stages that time went to, largest first (`status` says it in words):
    the work a valid, validated plan needed after the limit had passed.
    """

    offsets: Mapping[str, int]
    arena_sizes: Mapping[int, int]
    solver: str
    seconds: float = 0.0
    outcome: Outcome = Outcome.HEURISTIC
    lower_bound: int = 0
    status: str = ""
    # The bank chosen for each buffer that had a choice (problem with banks); others stay in their pool.
    pools: Mapping[str, int] = field(default_factory=dict)
    seconds_over_limit: float = 0.0
    over_limit_stages: Mapping[str, float] = field(default_factory=dict)

    @property
    def proven_optimal(self) -> bool:
        """True when the solver proved that no smaller arena exists (`Outcome.OPTIMAL`)."""
        return self.outcome is Outcome.OPTIMAL

    @property
    def overran_in(self) -> str:
        """The stage that took the most time past the limit ("" when the call kept to it)."""
        return next(iter(self.over_limit_stages), "")

    @property
    def arena_size(self) -> int:
        """Bytes over all pools together."""
        return sum(self.arena_sizes.values())

    def __repr__(self) -> str:
        """One line: solver, arena (per pool when several), proof, time, how many offsets."""
        pools = "" if len(self.arena_sizes) <= 1 else f" {dict(sorted(self.arena_sizes.items()))}"
        proof = "proven optimal" if self.proven_optimal else (self.status or "not proven optimal")
        return (
            f"Plan({self.solver!r}, arena {self.arena_size:,} B{pools}, {proof},"
            f" {self.seconds:.3f} s, {len(self.offsets):,} offsets)"
        )

    def to_frame(self, problem: Problem | None = None) -> Any:
        """Offsets as a pandas DataFrame; with `problem`, each buffer's lifetime, size and pool too."""
        import pandas as pd

        rows = []
        for buffer_id, offset in self.offsets.items():
            row: dict[str, Any] = {"id": buffer_id, "offset": offset}
            if problem is not None and buffer_id in problem:
                b = problem.buffer(buffer_id)
                row.update(start=b.start, end=b.end, size=b.size, pool=b.pool, kind=b.kind.value)
            rows.append(row)
        return pd.DataFrame(rows)

    def _repr_html_(self) -> str:
        return f"<p>{html.escape(repr(self))}</p>" + self.to_frame().head(20).to_html(index=False)


def arena_sizes_of(problem: Problem, offsets: Mapping[str, int]) -> dict[int, int]:
    """The bytes each pool needs for these offsets: its highest end address."""
    sizes: dict[int, int] = {pool: 0 for pool in problem.pools}
    for buf in problem.buffers:
        sizes[buf.pool] = max(sizes[buf.pool], offsets[buf.id] + buf.size)
    return sizes
