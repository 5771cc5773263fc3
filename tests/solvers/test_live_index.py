"""LiveIndex answers exactly what a scan over every placed rectangle would."""

from __future__ import annotations

import random

import numpy as np
import pytest

from memplan.solvers.heuristics.live_index import LiveIndex


def as_sorted_pairs(found) -> list[tuple[int, int]]:
    if isinstance(found, list):
        return sorted(found)
    return sorted(zip(np.asarray(found[0]).tolist(), np.asarray(found[1]).tolist()))


@pytest.mark.parametrize("seed", range(5))
def test_matches_a_full_scan(seed: int) -> None:
    rng = random.Random(seed)
    n = 3000  # enough long-lived rectangles to take the numpy path too
    starts, ends = [], []
    for _ in range(n):
        s = rng.randrange(2000)
        length = rng.choice((1, 2, 3, rng.randint(1, 40), rng.randint(1, 600), 2000))
        starts.append(s)
        ends.append(s + length)
    index = LiveIndex(starts, ends)
    placed: dict[int, tuple[int, int]] = {}
    took_numpy = False
    for i in rng.sample(range(n), n):
        found = index.overlapping(starts[i], ends[i])
        took_numpy |= not isinstance(found, list)
        want = sorted(p for j, p in placed.items() if starts[j] < ends[i] and starts[i] < ends[j])
        assert as_sorted_pairs(found) == want
        placed[i] = (rng.randrange(100), i + 1)  # payload: anything, second part > 0
        index.add(i, *placed[i])
    assert took_numpy
    index.clear()
    assert as_sorted_pairs(index.overlapping(min(starts), max(ends))) == []


def test_touching_lifetimes_do_not_overlap() -> None:
    index = LiveIndex([0, 5, 3], [5, 9, 6])
    index.add(0, 0, 10)
    index.add(1, 1, 11)
    assert index.overlapping(5, 9) == [(1, 11)]
    assert sorted(index.overlapping(3, 6)) == [(0, 10), (1, 11)]
