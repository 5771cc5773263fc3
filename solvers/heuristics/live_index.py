"""Which already-placed rectangles of one pool live at the same time as a new one.

Heuristic placers ask this once per unit; scanning every placed rectangle
would make them quadratic. All lifetimes are known up front, so rectangles
are grouped into classes by lifetime length (factor 16 apart) and sorted by
start inside each class. A rectangle of lifetime at most L that overlaps
`[start, end)` must start in `(start - L, end)`: a contiguous slice of its
class. Slices are scanned in Python when short and with numpy when long, so
a query costs about the number of rectangles starting near it, plus the
long-lived ones, not the number placed so far.

Each placed rectangle carries a pair of ints `(a, b)` with `b > 0` (best-fit
stores its address range, greedy its shared object and top); queries return
those pairs, which saves the caller a second lookup per hit.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

_CLASS_BITS = 4  # lifetime classes are a factor 2**4 apart
_NUMPY_FROM = 256  # slices longer than this are filtered with numpy


class _LifetimeClass:
    """Rectangles whose lifetimes have similar lengths, sorted by start.

    `lo_at[k]`/`hi_at[k]`: the slice of ranks that can meet a lifetime
    starting/ending at the k-th distinct time, precomputed so that a query
    does two list lookups instead of two binary searches. `b[r] == 0` means
    rank r is not placed.
    """

    def __init__(self, ids: list[int], starts: Sequence[int], ends: Sequence[int], times: np.ndarray) -> None:
        ids.sort(key=starts.__getitem__)
        self.ids = ids
        self.ends = [ends[i] for i in ids]
        max_len = max(ends[i] - starts[i] for i in ids)
        sorted_starts = np.asarray([starts[i] for i in ids], dtype=np.int64)
        self.lo_at = np.searchsorted(sorted_starts, times - max_len, side="right").tolist()
        self.hi_at = np.searchsorted(sorted_starts, times, side="left").tolist()
        self.ends_np = np.asarray(self.ends, dtype=np.int64)
        self.a = [0] * len(ids)
        self.b = [0] * len(ids)
        self.a_np = np.zeros(len(ids), dtype=np.int64)
        self.b_np = np.zeros(len(ids), dtype=np.int64)

    def clear(self) -> None:
        self.a[:] = self.b[:] = [0] * len(self.ids)
        self.a_np[:] = 0
        self.b_np[:] = 0


class LiveIndex:
    """Rectangles 0..n-1 with known lifetimes; placed ones are found by lifetime.

    `add(i, a, b)` places rectangle i with payload (a, b), b > 0;
    `overlapping(start, end)` returns the payloads of placed rectangles whose
    half-open lifetime meets `[start, end)`: a list of pairs, or, when the
    answer may be long, a pair of numpy arrays (callers then vectorise).
    Query bounds must be times some rectangle (or `extra_times`) starts or ends at.
    """

    def __init__(self, starts: Sequence[int], ends: Sequence[int], extra_times: Sequence[int] = ()) -> None:
        times = np.unique(np.asarray([*starts, *ends, *extra_times], dtype=np.int64))
        self._time_rank = {t: k for k, t in enumerate(times.tolist())}
        by_class: dict[int, list[int]] = {}
        for i, (s, e) in enumerate(zip(starts, ends)):
            by_class.setdefault((e - s).bit_length() // _CLASS_BITS, []).append(i)
        self._classes = [_LifetimeClass(ids, starts, ends, times) for _, ids in sorted(by_class.items())]
        # What a query reads from each class, unpacked once per class instead of attribute by attribute.
        self._tables = [(c.lo_at, c.hi_at, c.a, c.b, c.ends, c) for c in self._classes]
        self._where: list[tuple[_LifetimeClass, int]] = [None] * len(starts)  # type: ignore[list-item]
        for cls in self._classes:
            for rank, i in enumerate(cls.ids):
                self._where[i] = (cls, rank)

    def add(self, i: int, a: int, b: int) -> None:
        cls, rank = self._where[i]
        cls.a[rank] = cls.a_np[rank] = a
        cls.b[rank] = cls.b_np[rank] = b

    def clear(self) -> None:
        """Forget every placement (to run another ordering on the same rectangles)."""
        for cls in self._classes:
            cls.clear()

    def overlapping(self, start: int, end: int) -> list[tuple[int, int]] | tuple[np.ndarray, np.ndarray]:
        k_start, k_end = self._time_rank[start], self._time_rank[end]
        found: list[tuple[int, int]] = []
        big: list[tuple[np.ndarray, np.ndarray]] | None = None
        for lo_at, hi_at, a, b, ends, cls in self._tables:
            lo, hi = lo_at[k_start], hi_at[k_end]
            if hi - lo > _NUMPY_FROM:
                b_np = cls.b_np[lo:hi]
                keep = (b_np > 0) & (cls.ends_np[lo:hi] > start)
                big = (big or []) + [(cls.a_np[lo:hi][keep], b_np[keep])]
            elif hi > lo:
                found += [(a[r], b[r]) for r in range(lo, hi) if b[r] and ends[r] > start]
        if big is None:
            return found
        rest = np.asarray(found, dtype=np.int64).reshape(-1, 2)
        return (
            np.concatenate([a for a, _ in big] + [rest[:, 0]]),
            np.concatenate([b for _, b in big] + [rest[:, 1]]),
        )
