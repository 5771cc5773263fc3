"""The alignment-padded lower bound: its numpy shortcut (no size needs padding) equals the sweep."""

from __future__ import annotations

import random

from memplan.solvers.exact import arena_bounds


def test_the_padded_peak_without_padding_is_the_plain_peak_the_sweep_finds() -> None:
    shortcut_taken = 0
    for seed in range(600):
        rng = random.Random(seed)
        rects = []
        for _ in range(rng.randint(0, 20)):
            alignment, start = rng.choice([1, 2, 4, 8, 16]), rng.randint(0, 20)
            size = alignment * rng.randint(0, 6) if seed % 2 else rng.randint(0, 60)
            rects.append((start, start + rng.randint(1, 8), size, alignment))
        shortcut_taken += all(size % alignment == 0 for _, _, size, alignment in rects)
        assert arena_bounds._padded_peak(rects) == arena_bounds._padded_peak_swept(rects), rects
    assert shortcut_taken >= 300


def test_the_padded_peak_of_one_alignment_with_numpy_is_the_one_the_sweep_finds() -> None:
    for seed in range(600):
        rng = random.Random(seed)
        alignment = rng.choice([2, 4, 16, 64])
        rects = []
        for _ in range(rng.randint(1, 20)):
            start = rng.randint(0, 20)
            rects.append((start, start + rng.randint(1, 8), rng.randint(0, 70), alignment))
        found = arena_bounds._padded_peak_one_alignment(rects, alignment)
        assert found == arena_bounds._padded_peak_swept(rects), rects
