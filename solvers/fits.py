"""Whether a plan fits its capacities: the errors `solve` raises for one that does not, naming the buffers above."""

from __future__ import annotations

from memplan.errors import BankCapacityError, InfeasibleError
from memplan.plan import Plan
from memplan.problem import Problem


def check_capacity(problem: Problem, plan: Plan, solver: str) -> None:
    """Raise `InfeasibleError` naming the buffers above the capacity, if the plan does not fit."""
    if problem.capacity is None:
        return
    over = {p: s for p, s in plan.arena_sizes.items() if s > problem.capacity}
    if over:
        top = sorted(
            b.id for b in problem.buffers if b.pool in over and plan.offsets[b.id] + b.size > problem.capacity
        )
        raise InfeasibleError(
            f"{solver}: no plan within capacity {problem.capacity} found (best needs"
            f" {max(over.values())} bytes); buffers above the capacity: {', '.join(top[:10])}"
            + (" ..." if len(top) > 10 else ""),
            top,
        )


def check_banks_fit(solver: str, placed: Problem, plan: Plan) -> None:
    """Raise `BankCapacityError` for the first bank the plan overfills."""
    for bank in placed.banks:
        need = plan.arena_sizes.get(bank.pool, 0)
        if need > bank.capacity:
            top = sorted(
                b.id
                for b in placed.buffers
                if b.pool == bank.pool and plan.offsets.get(b.id, 0) + b.size > bank.capacity
            )
            raise BankCapacityError(
                f"{solver}: bank {bank.name!r} (pool {bank.pool}) needs {need} bytes but holds"
                f" {bank.capacity}: {need - bank.capacity} bytes missing; buffers above its capacity:"
                f" {', '.join(top[:10])}" + (" ..." if len(top) > 10 else ""),
                bank.name,
                need - bank.capacity,
                top,
            )
