"""The peak of live weight: numpy over sorted events, equal to the event-by-event sum (also its time)."""

from __future__ import annotations

import random

import memplan.timeline as timeline


def test_the_numpy_peak_is_the_event_by_event_peak_and_when_it_is_first_reached() -> None:
    for seed in range(400):
        rng = random.Random(seed)
        spans = []
        for _ in range(rng.randint(0, 25)):
            start = rng.randint(0, 20)
            spans.append((start, start + rng.randint(1, 8), rng.choice([0, 0, 1, 5, 16, 1000])))
        assert timeline.peak(spans) == timeline._peak_one_by_one(spans), spans


def test_ends_come_before_starts_and_weights_past_int64_are_summed_exactly() -> None:
    assert timeline.peak([(0, 2, 5), (2, 4, 7)]) == (7, 2)  # half-open: never live together
    assert timeline.peak([]) == (0, 0) and timeline.peak([(1, 3, 0)]) == (0, 0)
    huge = [(0, 5, 1 << 62), (1, 6, 1 << 62), (2, 3, 1 << 62)]
    assert timeline.peak(huge) == (3 << 62, 2)
