"""Executors: every task once, affinity keeps a key on one worker, a dying worker is a result."""

from __future__ import annotations

import os

import pytest

from memplan.experiments.sweep.executors import AffinityQueue, run_all


def _die_on_13(n: int) -> int:
    if n == 13:
        os._exit(3)  # like a segfault in native code: no exception, the process is gone
    return n * n


def test_inline_and_pool_run_every_task_once():
    tasks = list(range(-3, 4))
    assert sorted(run_all(abs, tasks, jobs=1)) == sorted((t, abs(t)) for t in tasks)
    assert sorted(run_all(abs, tasks, jobs=2)) == sorted((t, abs(t)) for t in tasks)


def test_a_worker_that_dies_becomes_a_result_and_the_rest_still_run():
    results = dict(run_all(_die_on_13, [1, 13, 2, 3], jobs=2, crashed=lambda n, exc: f"died on {n}"))
    assert results == {1: 1, 13: "died on 13", 2: 4, 3: 9}


def test_a_dying_worker_is_an_error_when_no_one_handles_it():
    with pytest.raises(Exception, match="terminated abruptly"):
        dict(run_all(_die_on_13, [13, 1], jobs=2))


def test_affinity_queue_keeps_keys_on_their_worker_then_steals_the_longest():
    tasks = ["a1", "a2", "b1", "b2", "b3", "c1"]
    queue = AffinityQueue(tasks, lambda t: t[0], workers=2)
    assert queue.take(0) == "a1"  # worker 0 starts on key a
    assert queue.take(1) == "b1"  # worker 1 takes the next key nobody is on
    assert queue.take(0) == "a2"  # stays on a while a has tasks
    assert queue.take(0) == "c1"  # a is done: the free key c
    assert queue.take(0) == "b2"  # nothing free: steals from the longest queue (b)
    assert queue.take(1) == "b3"
    assert queue.take(0) is None and queue.take(1) is None
