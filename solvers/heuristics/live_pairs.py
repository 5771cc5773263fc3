"""Every pair of lifetimes that meet, found with numpy: sort by start, and each one's partners are a run.

Sorted by start, the lifetimes that start at or after one and meet it are
those right after it that start before its end: a run of consecutive
positions, found by one binary search. Building the pairs from the runs
costs numpy time per pair instead of a Python step per pair, which is what
a sweep with a set of live rectangles pays (the skyline's neighbour graph:
1.3 s at 100,000 buffers before).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def pairs_living_together(
    pools: Sequence[int], starts: Sequence[int], ends: Sequence[int]
) -> tuple[np.ndarray, np.ndarray]:
    """Positions (later, earlier) of every pair of non-empty half-open lifetimes in one pool that meet.

    `earlier` comes first in the sweep's order (by start, then by position),
    as a sweep over `timeline.events` would meet them. Times are replaced by
    their ranks, so any coordinates the problem allows keep int64 arithmetic.
    """
    n = len(starts)
    if n < 2:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    _, pool = np.unique(np.asarray(pools, dtype=np.int64), return_inverse=True)
    times, ranks = np.unique(np.asarray([*starts, *ends], dtype=np.int64), return_inverse=True)
    width = len(times) + 1  # a pool's keys stay below the next pool's
    start_key = pool.reshape(-1) * width + ranks.reshape(-1)[:n]
    end_key = pool.reshape(-1) * width + ranks.reshape(-1)[n:]
    order = np.argsort(start_key, kind="stable")
    runs = np.searchsorted(start_key[order], end_key[order], side="left") - np.arange(n) - 1
    runs = np.maximum(runs, 0)
    first = np.repeat(np.arange(n), runs)
    second = first + 1 + np.arange(len(first)) - np.repeat(np.cumsum(runs) - runs, runs)
    return order[second], order[first]
