"""One-line captions for plans, shared by figures, notebooks and reports."""

from __future__ import annotations

from memplan.peak_bound import lower_bound
from memplan.plan import Plan
from memplan.problem import Problem
from memplan.viz.style import format_bytes


def describe(problem: Problem, plan: Plan) -> str:
    """'arena 96.9 KiB, +9.4% over the lower bound' or 'arena 88.6 KiB = lower bound'."""
    bound = lower_bound(problem)
    arena = f"arena {format_bytes(plan.arena_size)}"
    if plan.arena_size == bound:
        return f"{arena} = lower bound"
    return f"{arena}, {plan.arena_size / bound - 1:+.1%} over the lower bound"
