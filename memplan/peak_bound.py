"""The simplest lower bound on an arena: the most bytes live at one moment (solvers hold stronger ones)."""

from __future__ import annotations

from collections import defaultdict
from typing import Protocol

import memplan.timeline as timeline
from memplan.problem_parts import Buffer


class Placeable(Protocol):
    """What the bound reads of a `memplan.problem.Problem` (which prints its bound, so this module
    cannot import it): the pools and the buffers a solver places."""

    @property
    def pools(self) -> list[int]: ...

    def roots(self) -> list[Buffer]: ...


__all__ = ["lower_bound", "lower_bounds"]


def lower_bounds(problem: Placeable) -> dict[int, int]:
    """Per pool: the most bytes live at one moment (a group counted once).

    Also at least the end of every fixed buffer. A sweep over start/end events
    (`timeline.peak`): O(n log n).
    """
    spans: dict[int, list[tuple[int, int, int]]] = defaultdict(list)
    bounds: dict[int, int] = {pool: 0 for pool in problem.pools}
    for buf in problem.roots():
        if not buf.gaps:  # one segment, every byte: the common case, read without building it
            spans[buf.pool].append((buf.start, buf.end, buf.size))
        else:
            spans[buf.pool].extend((seg.start, seg.end, seg.high - seg.low) for seg in buf.segments())
        if buf.offset is not None:
            bounds[buf.pool] = max(bounds[buf.pool], buf.offset + buf.size)
    for pool, pool_spans in spans.items():
        bounds[pool] = max(bounds[pool], timeline.peak(pool_spans)[0])
    return bounds


def lower_bound(problem: Placeable) -> int:
    """The most bytes live at any one moment, summed over pools."""
    return sum(lower_bounds(problem).values())
