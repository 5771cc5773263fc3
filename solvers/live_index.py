"""Which already-placed rectangles of one pool live at the same time as a new one.

Heuristic placers ask this once per unit; scanning every placed rectangle
would make them quadratic. All lifetimes are known up front, so rectangles
are grouped into classes by lifetime length (factor 8 apart) and sorted by
start inside each class. A rectangle of lifetime at most L that overlaps
`[start, end)` must start in `(start - L, end)`: a contiguous slice of its
class. Slices are scanned in Python when short and with numpy when long, so
a query costs about the number of rectangles starting near it, plus the
long-lived ones, not the number placed so far.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

_CLASS_BITS = 3  # lifetime classes are a factor 2**3 apart
_NUMPY_FROM = 256  # slices longer than this are filtered with numpy


class _LifetimeClass:
    """Rectangles whose lifetimes have similar lengths, sorted by start.

    `lo_at[k]`/`hi_at[k]`: the slice of ranks that can meet a lifetime
    starting/ending at the k-th distinct time, precomputed so that a query
    does two list lookups instead of two binary searches.
    """

    def __init__(self, ids: list[int], starts: Sequence[int], ends: Sequence[int], times: np.ndarray) -> None:
        ids.sort(key=starts.__getitem__)
        self.ids = ids
        self.ends = [ends[i] for i in ids]
        max_len = max(ends[i] - starts[i] for i in ids)
        sorted_starts = np.asarray([starts[i] for i in ids], dtype=np.int64)
        self.lo_at = np.searchsorted(sorted_starts, times - max_len, side="right").tolist()
        self.hi_at = np.searchsorted(sorted_starts, times, side="left").tolist()
        self.ids_np = np.asarray(ids, dtype=np.int64)
        self.ends_np = np.asarray(self.ends, dtype=np.int64)
        self.placed = [False] * len(ids)
        self.placed_np = np.zeros(len(ids), dtype=bool)


class LiveIndex:
    """Placed rectangles (ids 0..n-1 with the given lifetimes), queried by lifetime.

    `add(i)` marks rectangle i placed; `overlapping(start, end)` returns the
    placed rectangles whose half-open lifetime meets `[start, end)`, as a list,
    or as a numpy array when the answer may be long (callers then vectorise).
    Query bounds must be times some rectangle (or `extra_times`) starts or ends at.
    """

    def __init__(self, starts: Sequence[int], ends: Sequence[int], extra_times: Sequence[int] = ()) -> None:
        times = np.unique(np.asarray([*starts, *ends, *extra_times], dtype=np.int64))
        self._time_rank = {t: k for k, t in enumerate(times.tolist())}
        by_class: dict[int, list[int]] = {}
        for i, (s, e) in enumerate(zip(starts, ends)):
            by_class.setdefault((e - s).bit_length() // _CLASS_BITS, []).append(i)
        self._classes = [_LifetimeClass(ids, starts, ends, times) for _, ids in sorted(by_class.items())]
        self._where: list[tuple[_LifetimeClass, int]] = [None] * len(starts)  # type: ignore[list-item]
        for cls in self._classes:
            for rank, i in enumerate(cls.ids):
                self._where[i] = (cls, rank)

    def add(self, i: int) -> None:
        cls, rank = self._where[i]
        cls.placed[rank] = True
        cls.placed_np[rank] = True

    def clear(self) -> None:
        """Forget every placement (to run another ordering on the same rectangles)."""
        for cls in self._classes:
            cls.placed = [False] * len(cls.ids)
            cls.placed_np[:] = False

    def overlapping(self, start: int, end: int) -> list[int] | np.ndarray:
        k_start, k_end = self._time_rank[start], self._time_rank[end]
        found: list[int] = []
        big: list[np.ndarray] | None = None
        for cls in self._classes:
            lo, hi = cls.lo_at[k_start], cls.hi_at[k_end]
            if hi - lo > _NUMPY_FROM:
                keep = cls.placed_np[lo:hi] & (cls.ends_np[lo:hi] > start)
                big = (big or []) + [cls.ids_np[lo:hi][keep]]
            elif hi > lo:
                placed, ends, ids = cls.placed, cls.ends, cls.ids
                found += [ids[r] for r in range(lo, hi) if placed[r] and ends[r] > start]
        if big is not None:
            return np.concatenate([*big, np.asarray(found, dtype=np.int64)])
        return found
