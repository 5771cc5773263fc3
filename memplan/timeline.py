"""Half-open lifetimes as a timeline: the sweep over start and end events, written once.

Lifetimes are `[start, end)`: at equal times every end comes before every
start, so a buffer ending at t and one starting at t never live together.
Bounds, the validator and the solvers all walk lifetimes this way. Part of
the problem model: imports nothing of memplan.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence


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


def peak(spans: Sequence[tuple[int, int, int]]) -> tuple[int, int]:
    """`(most weight live at once, first time it is reached)` over `(start, end, weight)` spans.

    `(0, 0)` without spans.
    """
    live = best = when = 0
    for time, is_start, index in events((start, end) for start, end, _ in spans):
        weight = spans[index][2]
        live += weight if is_start else -weight
        if live > best:
            best, when = live, time
    return best, when
