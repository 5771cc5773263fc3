"""The validator finds every kind of broken plan, names the buffers, and passes good plans.

One hand-made bad plan per ViolationKind (MiniMalloc's validator tests work
the same way), each breaking exactly one rule of the same small problem.
"""

from __future__ import annotations

import dataclasses

import pytest

from memplan.errors import ProblemError
from memplan.generate import layered_problem
from memplan.plan import Plan, arena_sizes_of
from memplan.problem import Buffer, BufferKind, ContiguousGroup, Problem, SameOffset
from memplan.solvers import solve
from memplan.validate import ViolationKind, check_plan, validate

PROBLEM = Problem(
    buffers=(
        Buffer("a", 0, 4, 8, alignment=4),
        Buffer("b", 2, 6, 8),
        Buffer("c", 5, 8, 4),
        Buffer("p", 0, 3, 16),
        Buffer("m", 1, 2, 8),
        Buffer("f", 0, 8, 4, offset=64),
        Buffer("s1", 0, 2, 4),
        Buffer("s2", 3, 5, 4),
    ),
    groups=(ContiguousGroup("p", (("m", 8),)),),
    same_offsets=(SameOffset(("s1", "s2")),),
    capacity=128,
)
GOOD = {"a": 0, "b": 8, "c": 0, "p": 16, "m": 24, "f": 64, "s1": 32, "s2": 32}


def plan_of(offsets: dict[str, int], problem: Problem = PROBLEM, arena: dict[int, int] | None = None) -> Plan:
    """A plan declaring the arena its offsets need, unless `arena` says otherwise."""
    sizes = arena if arena is not None else arena_sizes_of(problem, offsets)
    return Plan(offsets=offsets, arena_sizes=sizes, solver="hand")


def test_good_plan_passes() -> None:
    assert validate(PROBLEM, plan_of(GOOD)) == []
    check_plan(PROBLEM, plan_of(GOOD))


def test_touching_lifetimes_may_share_bytes_and_a_larger_declared_arena_is_fine() -> None:
    problem = Problem((Buffer("x", 0, 2, 8), Buffer("y", 2, 4, 8)))
    assert validate(problem, plan_of({"x": 0, "y": 0}, problem, arena={0: 100})) == []


BAD = {
    ViolationKind.MISSING_OFFSET: ({k: v for k, v in GOOD.items() if k != "c"}, ("c",)),
    ViolationKind.UNKNOWN_BUFFER: (GOOD | {"zz": 0}, ("zz",)),
    ViolationKind.NEGATIVE_OFFSET: (GOOD | {"c": -4}, ("c",)),
    ViolationKind.MISALIGNED: (GOOD | {"a": 70}, ("a",)),
    ViolationKind.FIXED_OFFSET_MOVED: (GOOD | {"f": 72}, ("f",)),
    ViolationKind.GROUP_BROKEN: (GOOD | {"m": 40}, ("p", "m")),
    ViolationKind.SAME_OFFSET_BROKEN: (GOOD | {"s2": 40}, ("s1", "s2")),
    ViolationKind.OVERLAP: (GOOD | {"b": 4}, ("a", "b")),
}


@pytest.mark.parametrize("kind", list(BAD), ids=lambda k: k.value)
def test_each_broken_rule_is_reported_alone_with_its_buffers(kind: ViolationKind) -> None:
    offsets, buffers = BAD[kind]
    arena = {0: 128} if kind == ViolationKind.MISSING_OFFSET else None  # cannot size a partial plan
    found = validate(PROBLEM, plan_of(offsets, arena=arena))
    assert [v.kind for v in found] == [kind]
    assert set(found[0].buffers) == set(buffers)
    for name in buffers:
        assert repr(name) in found[0].message
    with pytest.raises(ProblemError, match=kind.value):
        check_plan(PROBLEM, plan_of(offsets, arena=arena))


def test_wrong_arena_size_when_declared_below_what_offsets_need() -> None:
    found = validate(PROBLEM, plan_of(GOOD, arena={0: 60}))
    assert [v.kind for v in found] == [ViolationKind.WRONG_ARENA_SIZE]
    assert "needs 68 bytes" in found[0].message


def test_wrong_arena_size_when_a_pool_is_not_declared() -> None:
    problem = Problem((Buffer("x", 0, 2, 8), Buffer("y", 0, 2, 8, pool=1)))
    found = validate(problem, plan_of({"x": 0, "y": 0}, problem, arena={0: 8}))
    assert [v.kind for v in found] == [ViolationKind.WRONG_ARENA_SIZE]
    assert "pool 1" in found[0].message


def test_over_capacity_names_the_buffers_above_it() -> None:
    tight = dataclasses.replace(PROBLEM, capacity=64)
    found = validate(tight, plan_of(GOOD, tight))
    assert [v.kind for v in found] == [ViolationKind.OVER_CAPACITY]
    assert found[0].buffers == ("f",)


def test_every_kind_has_a_bad_plan_here() -> None:
    covered = set(BAD) | {ViolationKind.WRONG_ARENA_SIZE, ViolationKind.OVER_CAPACITY}
    # the bank kinds: test_banks.py::test_validator_names_a_wrong_bank_and_an_over_capacity_bank
    covered |= {ViolationKind.WRONG_BANK, ViolationKind.OVER_BANK_CAPACITY}
    # tests/solvers/test_shared_objects.py::test_the_validator_names_a_broken_object_and_other_solvers_refuse_the_form
    covered |= {ViolationKind.SHARED_OBJECT_BROKEN}
    assert covered == set(ViolationKind)


def test_overlap_between_pools_is_not_an_overlap() -> None:
    problem = Problem((Buffer("x", 0, 2, 8), Buffer("y", 0, 2, 8, pool=1)))
    assert validate(problem, plan_of({"x": 0, "y": 0}, problem)) == []


def test_overlap_found_among_many_live_buffers() -> None:
    # The sweep compares offset neighbours only: an overlap buried among stacked buffers.
    buffers = tuple(Buffer(f"s{i}", 0, 10, 4) for i in range(50)) + (Buffer("late", 5, 6, 2),)
    offsets = {f"s{i}": 4 * i for i in range(50)} | {"late": 101}
    found = validate(Problem(buffers), plan_of(offsets, Problem(buffers)))
    assert [(v.kind, set(v.buffers)) for v in found] == [(ViolationKind.OVERLAP, {"s25", "late"})]


def test_100k_buffers_bestfit_plan_is_valid_and_a_planted_overlap_is_found() -> None:
    problem = layered_problem(100_000, seed=3)
    plan = solve(problem, "bestfit", orderings=["start"])
    assert validate(problem, plan) == []

    whole = [b for b in problem.buffers if b.kind in (BufferKind.GRAPH_INPUT, BufferKind.MUTABLE_STATE)]
    big, small = max(whole, key=lambda b: b.size), min(whole, key=lambda b: b.size)
    planted = dict(plan.offsets) | {small.id: plan.offsets[big.id]}  # inside big, both always live
    found = validate(problem, dataclasses.replace(plan, offsets=planted))
    assert [(v.kind, set(v.buffers)) for v in found] == [(ViolationKind.OVERLAP, {big.id, small.id})]


@pytest.mark.parametrize("small_batches", [False, True])
def test_the_numpy_pass_and_the_sweep_agree_on_whether_a_plan_overlaps(
    small_batches: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A valid plan is cleared without the sweep; in a broken one the sweep names the overlaps. Both
    must agree with a brute-force check over all pairs (with tiny batches and runs, every path of
    the numpy pass is taken)."""
    import importlib
    import random

    from memplan.generate import random_problem

    validate_module = importlib.import_module("memplan.validate")  # `memplan.validate` is also a function

    if small_batches:
        monkeypatch.setattr(validate_module, "PAIRS_PER_BATCH", 3)
        monkeypatch.setattr(validate_module, "PAIRS_PER_RECTANGLE", 2)
    disagreements = overlapping = 0
    for seed in range(60):
        problem = random_problem(random.Random(seed).randint(2, 40), seed=seed)
        offsets = dict(solve(problem, "bestfit").offsets)
        rng = random.Random(seed)
        if seed % 2:
            for moved in rng.sample(sorted(offsets), min(3, len(offsets))):
                offsets[moved] = max(0, offsets[moved] + rng.choice([-64, -16, 16, 32]))
        roots = problem.roots()
        brute = any(
            a.pool == b.pool
            and sa.start < sb.end
            and sb.start < sa.end
            and offsets[a.id] + sa.low < offsets[b.id] + sb.high
            and offsets[b.id] + sb.low < offsets[a.id] + sa.high
            for i, a in enumerate(roots)
            for b in roots[i + 1 :]
            for sa in a.segments()
            for sb in b.segments()
            if sa.high > sa.low and sb.high > sb.low
        )
        overlapping += brute
        found = any(v.kind is ViolationKind.OVERLAP for v in validate_module._overlaps(problem, offsets))
        disagreements += found != brute
    assert disagreements == 0 and overlapping > 5
