"""WavePlacer gives exactly the offsets of best-fit placing one unit at a time.

The reference is best-fit at its plainest: for each unit in order, scan every
placed unit, keep those of its pool whose lifetimes meet it, take
`holes.best_gap`. Random problems mix one-op and long lifetimes, units over
the whole horizon (the floor), pools, alignments and equal sizes; both of the
placer's modes (numpy waves, one unit at a time) are forced in turn.
"""

from __future__ import annotations

import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import memplan.solvers.heuristics.bestfit as bestfit
import memplan.solvers.heuristics.wave_placer as wave_placer
from memplan.generate import layered_problem, random_problem
from memplan.problem import Buffer, Gap, Problem
from memplan.solvers.heuristics.bestfit import ORDERINGS, BestfitParams, solve_bestfit
from memplan.solvers.heuristics.holes import best_gap
from memplan.solvers.heuristics.orderings import SORT_KEYS, UnitStats, order_of
from memplan.solvers.heuristics.wave_placer import WavePlacer
from memplan.solvers.units import Unit, arena_of, units_of


def one_at_a_time(units: list[Unit], order: list[int]) -> list[int]:
    """Best-fit by brute force: O(n^2), no index, no floor, no waves."""
    offsets = [0] * len(units)
    placed: list[int] = []
    for i in order:
        me = units[i].rects[0]
        pairs = []
        for j in placed:
            other = units[j].rects[0]
            if other.pool == me.pool and other.start < me.end and me.start < other.end:
                pairs.append((offsets[j], offsets[j] + other.size))
        offsets[i] = best_gap(pairs, units[i].size, units[i].alignment) if pairs else 0
        placed.append(i)
    return offsets


def mixed_problem(rng: random.Random, n: int) -> Problem:
    """Short, long and whole-horizon lifetimes in up to three pools; repeated sizes and alignments.

    The smallest size is 1, 24 or 100: above the alignment, gaps between
    whole-horizon units are too narrow for any unit (WavePlacer fills them).
    """
    horizon = rng.randint(2, max(2, n // 2))
    pools = rng.choice(((0,), (0, 1), (0, 3, 7)))
    smallest = rng.choice((1, 24, 100))  # above 1, alignment slivers in the floor are too narrow to use
    sizes = [max(smallest, rng.choice((1, 16, 48, 100, 1000))) for _ in range(4)]
    buffers = []
    for i in range(n):
        kind = rng.random()
        if kind < 0.15:
            start, end = 0, horizon
        else:
            start = rng.randrange(horizon)
            length = rng.choice((1, 1, 2, 3, rng.randint(1, horizon)))
            end = min(horizon, start + length)
        size = rng.choice(sizes) if rng.random() < 0.5 else rng.randint(smallest, 3000)
        buffers.append(
            Buffer(
                f"b{i}",
                start,
                end,
                size,
                alignment=rng.choice((1, 4, 16, 64)),
                pool=rng.choice(pools),
            )
        )
    return Problem(tuple(buffers))


def offsets_of(placer: WavePlacer, units: list[Unit], order: list[int]) -> list[int]:
    """The placer's offsets, after checking the arena it reports against `arena_of`."""
    placed = placer.run(np.asarray(order))
    assert placed is not None
    offsets, arena = placed
    assert arena == arena_of(units, offsets)
    return offsets


def stats_order(units: list[Unit], placer: WavePlacer, name: str) -> list[int]:
    """The order `SORT_KEYS` gives (the general placer's), as unit indices."""
    stats = [UnitStats.of(u, int(placer.conflicts[u.index])) for u in units]
    return [s.unit_index for s in sorted(stats, key=SORT_KEYS[name])]


@pytest.mark.parametrize("one_by_one_below", [1, 10**9, wave_placer.ONE_BY_ONE_BELOW])
@pytest.mark.parametrize("seed", range(8))
def test_matches_one_at_a_time_on_random_problems(
    seed: int, one_by_one_below: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(wave_placer, "ONE_BY_ONE_BELOW", one_by_one_below)
    rng = random.Random(seed)
    problem = mixed_problem(rng, rng.choice((5, 40, 300)))
    units = units_of(problem)
    placer = WavePlacer.build(units)
    assert placer is not None
    for name in ORDERINGS:
        order = stats_order(units, placer, name)
        assert offsets_of(placer, units, order) == one_at_a_time(units, order), name
    shuffled = list(range(len(units)))
    rng.shuffle(shuffled)  # any order, not only the sorted ones
    assert offsets_of(placer, units, shuffled) == one_at_a_time(units, shuffled)


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**32), st.integers(1, 60), st.sampled_from([1, 2, 10**9]))
def test_matches_one_at_a_time_property(seed: int, n: int, one_by_one_below: int) -> None:
    rng = random.Random(seed)
    problem = mixed_problem(rng, n)
    units = units_of(problem)
    placer = WavePlacer.build(units)
    assert placer is not None
    order = list(range(len(units)))
    rng.shuffle(order)
    saved = wave_placer.ONE_BY_ONE_BELOW
    wave_placer.ONE_BY_ONE_BELOW = one_by_one_below
    try:
        assert offsets_of(placer, units, order) == one_at_a_time(units, order)
    finally:
        wave_placer.ONE_BY_ONE_BELOW = saved


def test_both_modes_run_on_a_layered_problem(monkeypatch: pytest.MonkeyPatch) -> None:
    """Waves of hundreds and one-by-one stretches, each checked against the reference."""
    units = units_of(layered_problem(3000, seed=1))
    placer = WavePlacer.build(units)
    assert placer is not None
    calls = {"_wave": 0, "_one_by_one": 0}
    for method in calls:
        original = getattr(wave_placer._Run, method)

        def counted(self, arg, _original=original, _method=method):  # type: ignore[no-untyped-def]
            calls[_method] += len(arg)
            return _original(self, arg)

        monkeypatch.setattr(wave_placer._Run, method, counted)
    for name in ("area", "start"):
        order = stats_order(units, placer, name)
        assert offsets_of(placer, units, order) == one_at_a_time(units, order)
    assert calls["_wave"] > 1000 and calls["_one_by_one"] > 1000


@pytest.mark.parametrize("seed", range(4))
def test_gives_up_exactly_when_the_total_arena_reaches_the_limit(seed: int) -> None:
    rng = random.Random(seed)
    problem = mixed_problem(rng, 200)
    units = units_of(problem)
    placer = WavePlacer.build(units)
    assert placer is not None
    order = np.asarray(stats_order(units, placer, "size"))
    placed = placer.run(order)
    assert placed is not None
    total = sum(placed[1].values())
    assert placer.run(order, give_up_at=total) is None
    assert placer.run(order, give_up_at=total + 1) == placed


def test_general_placer_gives_up_the_same_way() -> None:
    problem = random_problem(120, 3, alignment=(1, 8), with_groups=True, with_fixed=True, n_pools=2)
    units = units_of(problem)
    assert WavePlacer.build(units) is None  # fixed offsets: the general placer's job
    placer = bestfit._Placer(units)
    order = [u for u in units if u.fixed is None]
    placed = placer.run(order)
    assert placed is not None
    offsets, arena = placed
    assert arena == arena_of(units, offsets)
    total = sum(arena.values())
    assert placer.run(order, give_up_at=total) is None
    assert placer.run(order, give_up_at=total + 1) == placed


def test_refuses_what_it_does_not_place() -> None:
    plain = [Buffer("a", 0, 2, 8), Buffer("b", 1, 3, 8)]
    assert WavePlacer.build(units_of(Problem(tuple(plain)))) is not None
    for odd in (
        Buffer("c", 0, 2, 8, offset=64),  # fixed
        Buffer("c", 0, 2, 0),  # no bytes
        Buffer("c", 0, 4, 8, gaps=(Gap(1, 2),)),  # two rectangles
    ):
        assert WavePlacer.build(units_of(Problem((*plain, odd)))) is None


@pytest.mark.parametrize("seed", range(3))
def test_bestfit_plans_do_not_depend_on_the_placer(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """solve_bestfit with WavePlacer and with the general placer: the same plan, ordering by ordering."""
    problems = [layered_problem(2000, seed), mixed_problem(random.Random(seed), 400)]
    fast = [solve_bestfit(p, BestfitParams((name,))) for p in problems for name in ORDERINGS]
    fast += [solve_bestfit(p) for p in problems]
    monkeypatch.setattr(WavePlacer, "build", classmethod(lambda cls, units: None))
    slow = [solve_bestfit(p, BestfitParams((name,))) for p in problems for name in ORDERINGS]
    slow += [solve_bestfit(p) for p in problems]
    for a, b in zip(fast, slow):
        assert (a.offsets, a.arena_sizes, a.status) == (b.offsets, b.arena_sizes, b.status)


@settings(max_examples=50, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(1, 4), st.integers(1, 3), st.integers(0, 3), st.integers(0, 3)),
        min_size=1,
        max_size=30,
    )
)
def test_order_of_matches_sort_keys(rows: list[tuple[int, int, int, int]]) -> None:
    """Many ties on purpose: only the unit index breaks them, in both."""
    stats = [
        UnitStats(size, life, size * life, start, conflicts, i)
        for i, (size, life, start, conflicts) in enumerate(rows)
    ]
    columns = {field: np.asarray([getattr(s, field) for s in stats]) for field in UnitStats._fields}
    for name, key in SORT_KEYS.items():
        want = [s.unit_index for s in sorted(stats, key=key)]
        assert order_of(name, columns).tolist() == want, name


def test_gc_paused_restores_the_collectors_state() -> None:
    import gc

    from memplan.solvers.heuristics.gc_pause import gc_paused

    assert gc.isenabled()
    with pytest.raises(ZeroDivisionError), gc_paused():
        assert not gc.isenabled()
        _ = 1 / 0
    assert gc.isenabled()
    gc.disable()
    try:
        with gc_paused():
            pass
        assert not gc.isenabled()  # it was off before: it stays off
    finally:
        gc.enable()
