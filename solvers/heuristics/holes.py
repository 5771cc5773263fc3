"""The best-fit rule: where a unit goes among the address ranges it must avoid.

One rule, three forms, all giving the same offset: `best_gap` (a Python
scan, for the few ranges a typical unit meets), `best_gap_np` (numpy, for a
unit that meets very many) and `wave_placer` (numpy, for many units at once).
"""

from __future__ import annotations

import numpy as np

from memplan.arith import align_up


def merged(intervals: list[tuple[int, int]], low: int, high: int) -> list[tuple[int, int]]:
    """Sorted disjoint intervals with [low, high) added; touching ones are joined."""
    out = []
    for a, b in intervals:
        if b < low or a > high:
            out.append((a, b))
        else:
            low, high = min(low, a), max(high, b)
    out.append((low, high))
    out.sort()
    return out


def best_gap(pairs: list[tuple[int, int]], size: int, alignment: int) -> int:
    """Lowest aligned offset in the tightest hole between occupied [low, high); else on top.

    `free` is the first byte above everything seen so far (sorted by low); a
    hole [free, low) takes the unit if its aligned start fits, and its slack
    (low - free - size) ranks it: the smallest slack wins, then the lowest hole.
    """
    free = 0
    best, best_slack = -1, 0
    for low, high in sorted(pairs):
        slack = low - size - free
        if slack >= 0 and (best < 0 or slack < best_slack):
            x = align_up(free, alignment)
            if x + size <= low:
                best, best_slack = x, slack
        if high > free:
            free = high
    return best if best >= 0 else align_up(free, alignment)


def best_gap_np(low: np.ndarray, high: np.ndarray, size: int, alignment: int) -> int:
    """`best_gap` vectorised, for units that live with very many placed ones."""
    order = np.argsort(low, kind="stable")
    low, high = low[order], high[order]
    free = np.maximum.accumulate(np.concatenate(([0], high)))[:-1]
    x = -(-free // alignment) * alignment  # align_up over an array
    fits = x + size <= low
    if fits.any():
        slack = np.where(fits, low - size - free, np.iinfo(np.int64).max)
        return int(x[np.argmin(slack)])
    return align_up(int(max(high.max(), 0)), alignment)
