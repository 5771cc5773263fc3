"""Integer arithmetic every floor shares: rounding up, alignment, common divisors."""

from __future__ import annotations

import math
from collections.abc import Iterable

__all__ = ["align_up", "ceil_div", "common_divisor"]


def ceil_div(value: int, divisor: int) -> int:
    """`value / divisor` rounded up (integers, `divisor` > 0)."""
    return -(-value // divisor)


def align_up(value: int, alignment: int) -> int:
    """The smallest multiple of `alignment` that is >= `value`."""
    return ceil_div(value, alignment) * alignment


def common_divisor(values: Iterable[int]) -> int:
    """The greatest common divisor of the values (1 if none)."""
    g = 0
    for v in values:
        g = math.gcd(g, v)
    return g or 1
