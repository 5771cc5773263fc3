"""Half-open lifetimes as a timeline: the sweep over start and end events, written once.

Lifetimes are `[start, end)`: at equal times every end comes before every
start, so a buffer ending at t and one starting at t never live together.
Bounds, the validator and the solvers all walk lifetimes this way. Part of
the problem model: imports nothing of memplan.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np


def events(spans: Iterable[tuple[int, int]]) -> list[tuple[int, bool, int]]:
    """`(time, is_start, index)` for every `(start, end)` span, in sweep order.

    By time; at equal times ends (`is_start` False) before starts, then by index.
    """
    found: list[tuple[int, bool, int]] = []
    for index, (start, end) in enumerate(spans):
        found.append((start, True, index))
        found.append((end, False, index))
    found.sort()
    return found


def profile(spans: Iterable[tuple[int, int, int]]) -> tuple[list[int], list[int]]:
    """`(times, weight live from each time on)` over `(start, end, weight)` spans: a step function
    that changes only at the times listed."""
    change: dict[int, int] = {}
    for start, end, weight in spans:
        change[start] = change.get(start, 0) + weight
        change[end] = change.get(end, 0) - weight
    times, live, levels = sorted(change), 0, []
    for t in times:
        live += change[t]
        levels.append(live)
    return times, levels


def peak(spans: Sequence[tuple[int, int, int]]) -> tuple[int, int]:
    """`(most weight live at once, first time it is reached)` over `(start, end, weight)` spans.

    `(0, 0)` without spans. Summed with numpy over the sorted events when the
    weights are non-negative and their total fits int64 (a million spans in a
    fraction of a second), else event by event; the two agree.
    """
    if not spans:
        return 0, 0
    try:
        columns = np.array(spans, dtype=np.int64).reshape(-1, 3)
    except OverflowError:
        return _peak_one_by_one(spans)
    weights = columns[:, 2]
    if weights.min() < 0 or float(weights.sum(dtype=np.float64)) >= _INT64_ROOM:
        return _peak_one_by_one(spans)
    times = np.concatenate((columns[:, 0], columns[:, 1]))
    is_start = np.concatenate((np.ones(len(spans), dtype=np.int8), np.zeros(len(spans), dtype=np.int8)))
    order = np.lexsort((is_start, times))  # stable: by time, ends first, then by span
    live = np.cumsum(np.concatenate((weights, -weights))[order])
    at = int(np.argmax(live))
    best = int(live[at])
    return (best, int(times[order[at]])) if best > 0 else (0, 0)


_INT64_ROOM = float(1 << 62)


def _peak_one_by_one(spans: Sequence[tuple[int, int, int]]) -> tuple[int, int]:
    live = best = when = 0
    for time, is_start, index in events((start, end) for start, end, _ in spans):
        weight = spans[index][2]
        live += weight if is_start else -weight
        if live > best:
            best, when = live, time
    return best, when
