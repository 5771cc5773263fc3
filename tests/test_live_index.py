"""LiveIndex answers exactly what a scan over every placed rectangle would."""

from __future__ import annotations

import random

import pytest

from solvers.live_index import LiveIndex


@pytest.mark.parametrize("seed", range(5))
def test_matches_a_full_scan(seed: int) -> None:
    rng = random.Random(seed)
    n = 3000  # enough rectangles per lifetime class to take the numpy path too
    starts, ends = [], []
    for _ in range(n):
        s = rng.randrange(2000)
        length = rng.choice((1, 2, 3, rng.randint(1, 40), rng.randint(1, 600), 2000))
        starts.append(s)
        ends.append(s + length)
    index = LiveIndex(starts, ends)
    placed: set[int] = set()
    for i in rng.sample(range(n), n):
        got = sorted(int(j) for j in index.overlapping(starts[i], ends[i]))
        want = sorted(j for j in placed if starts[j] < ends[i] and starts[i] < ends[j])
        assert got == want
        index.add(i)
        placed.add(i)
    index.clear()
    assert len(index.overlapping(min(starts), max(ends))) == 0


def test_touching_lifetimes_do_not_overlap() -> None:
    index = LiveIndex([0, 5, 3], [5, 9, 6])
    index.add(0)
    index.add(1)
    assert list(index.overlapping(5, 9)) == [1]
    assert sorted(index.overlapping(3, 6)) == [0, 1]
