"""Bank costs as integer weights for an integer objective, exact when they can be.

A bank's cost is read as the decimal it prints as (0.0001 is one ten-thousandth,
not the binary float nearest it), so costs written in a memory map or JSON
mean what they say. Scaling every cost by the least common denominator and
dividing by the weights' common divisor keeps the objective exact: a plan
optimal for the weights is optimal for the costs. When the weighted traffic
would not fit CP-SAT's integers, the weights are rounded instead and say so:
a plan optimal for them proves nothing about the costs.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction

MAX_OBJECTIVE = 1 << 62
"""The most weighted traffic one objective may sum to (CP-SAT refuses sums that may pass int64)."""

ROUNDED_TOP = 1 << 40
"""The largest weight when costs must be rounded: fine-grained, and far from overflowing with traffic."""


def exact_cost(cost: float | None) -> Fraction:
    """The cost as the decimal it prints as (None, a pool that is no bank: free)."""
    return Fraction(repr(float(cost))) if cost else Fraction(0)


@dataclass(frozen=True)
class Weights:
    """One integer weight per pool; `exact`: proportional to the costs without rounding."""

    per_pool: dict[int, int]
    exact: bool

    def of(self, pool: int) -> int:
        return self.per_pool.get(pool, 0)


def weights(costs: Mapping[int, float | None], traffics: Sequence[int]) -> Weights:
    """Integer weights for `costs` (per pool) such that a weight times any unit's traffic, summed
    over `traffics` (one per unit, each in its dearest pool), stays within `MAX_OBJECTIVE`."""
    fractions = {pool: exact_cost(c) for pool, c in costs.items()}
    denominator = math.lcm(*(f.denominator for f in fractions.values()), 1)
    scaled = {pool: int(f * denominator) for pool, f in fractions.items()}
    divisor = math.gcd(*scaled.values())
    if divisor > 1:
        scaled = {pool: w // divisor for pool, w in scaled.items()}
    dearest = max(scaled.values(), default=0)
    if dearest * sum(traffics) <= MAX_OBJECTIVE:
        return Weights(scaled, exact=True)
    top = max(fractions.values())
    room = min(ROUNDED_TOP, MAX_OBJECTIVE // max(1, sum(traffics)))
    rounded = {pool: round(f / top * room) for pool, f in fractions.items()}
    return Weights(rounded, exact=False)
