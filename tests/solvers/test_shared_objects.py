"""The shared-objects form: the problem flag, the validator's check, and the shared_objects solver."""

from __future__ import annotations

import dataclasses
import random

import pytest
from helpers.strategies import has_fixed_or_same_offset, problems
from hypothesis import HealthCheck, given, settings

from memplan import solvers
from memplan.bank_placement import place_in_banks, traffic_cost
from memplan.errors import BankCapacityError, InfeasibleError, ProblemError, UnsupportedProblemError
from memplan.io import load_json, save_json
from memplan.plan import Plan
from memplan.problem import Bank, Buffer, ContiguousGroup, Problem, SameOffset
from memplan.validate import ViolationKind, validate

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def objects_of(problem: Problem, plan: Plan) -> None:
    """Assert the form directly, pair by pair: roots whose bytes intersect start together and never
    live together; a member sits inside its root."""
    placed = place_in_banks(problem, plan.pools)
    roots = [b for b in placed.roots() if b.size > 0]
    for i, a in enumerate(roots):
        for b in roots[i + 1 :]:
            if a.pool != b.pool:
                continue
            lo_a, lo_b = plan.offsets[a.id], plan.offsets[b.id]
            if lo_a < lo_b + b.size and lo_b < lo_a + a.size:
                assert lo_a == lo_b, (a.id, b.id)
                assert not a.lives_with(b), (a.id, b.id)


def as_objects(problem: Problem) -> Problem:
    """`problem` asking for shared objects; pinned buffers whose bytes intersect are unpinned first."""
    try:
        return dataclasses.replace(problem, shared_objects=True)
    except ProblemError:
        buffers = tuple(dataclasses.replace(b, offset=None) for b in problem.buffers)
        return dataclasses.replace(problem, buffers=buffers, shared_objects=True)


@SETTINGS
@given(problems(max_buffers=9))
def test_plans_are_valid_shared_objects_and_never_above_executorch(problem):
    check_against_executorch(problem)


@SETTINGS
@given(problems(max_buffers=8, pools=(0, 1), same_offsets=False))
def test_pools_are_packed_apart(problem):
    check_against_executorch(problem)


def test_a_same_offset_set_across_pools_is_refused():
    problem = Problem(
        (Buffer("a", 0, 1, 8), Buffer("b", 1, 2, 8, pool=1)),
        same_offsets=(SameOffset(("a", "b")),),
        shared_objects=True,
    )
    with pytest.raises(UnsupportedProblemError, match="spans pools"):
        solvers.solve(problem, "shared_objects")


def check_against_executorch(problem: Problem) -> None:
    problem = as_objects(problem)
    plan = solvers.solve(problem, "shared_objects")
    assert validate(problem, plan) == []
    objects_of(problem, plan)
    if not has_fixed_or_same_offset(problem):
        executorch = solvers.solve(problem, "greedy")  # greedy(allow_overlapping_allocations=False) here
        objects_of(problem, executorch)
        assert plan.arena_size <= executorch.arena_size
    assert plan.arena_size >= plan.lower_bound  # proofs above the bound: test_proofs_match_brute_force


def _random_banked(seed: int, n: int = 30) -> Problem:
    rng = random.Random(seed)
    buffers = []
    for i in range(n):
        start = rng.randint(0, 30)
        size = 16 * rng.randint(1, 20)
        buffers.append(
            Buffer(
                f"b{i}",
                start,
                start + rng.randint(1, 10),
                size,
                16,
                pool=1,
                banks=(1, 2),
                accesses=rng.randint(1, 6),
            )
        )
    fast = Bank("fast", 1, 16 * rng.randint(5, 60))
    return Problem(tuple(buffers), banks=(fast, Bank("slow", 2, 1 << 30)), shared_objects=True)


@pytest.mark.parametrize("seed", range(40))
def test_under_banks_never_more_traffic_cost_than_banked_greedy(seed):
    problem = _random_banked(seed)
    mine = solvers.solve(problem, "shared_objects")
    theirs = solvers.solve(problem, "banked_greedy")  # BankedGreedy(..., allow_overlapping_allocations=False)
    for plan in (mine, theirs):
        assert validate(problem, plan) == []
        objects_of(problem, plan)
    mine_key = (traffic_cost(problem, mine.pools), mine.arena_size)
    assert mine_key <= (traffic_cost(problem, theirs.pools), theirs.arena_size)


def test_better_than_first_fit_where_first_fit_picks_the_wrong_object():
    # Largest first: a (96) and b (64) live together: two objects. ExecuTorch takes the equal-sized
    # d before c (reverse insertion order) and puts d with a; c then lives with d and with b and
    # opens a third object (176 B). Putting d with b and c with a needs only the two (160 B).
    problem = Problem(
        (Buffer("a", 4, 8, 96), Buffer("b", 3, 7, 64), Buffer("c", 0, 4, 16), Buffer("d", 2, 3, 16)),
        shared_objects=True,
    )
    assert solvers.solve(problem, "greedy").arena_size == 176
    mine = solvers.solve(problem, "shared_objects")
    assert validate(problem, mine) == [] and mine.arena_size == 160


def test_pins_groups_and_alignment_are_kept():
    problem = Problem(
        (
            Buffer("reserved", 0, 20, 64, 16, offset=0, kind="submodule"),
            Buffer("a", 0, 5, 48, 16),
            Buffer("a_view", 1, 3, 16, 16),
            Buffer("b", 6, 9, 40, 8),
            Buffer("c", 2, 8, 33, 32),
            Buffer("pinned", 10, 12, 32, 16, offset=128),
        ),
        groups=(ContiguousGroup("a", (("a_view", 16),)),),
        shared_objects=True,
    )
    plan = solvers.solve(problem, "shared_objects")
    assert validate(problem, plan) == []
    objects_of(problem, plan)
    assert plan.offsets["reserved"] == 0 and plan.offsets["pinned"] == 128
    assert plan.offsets["a_view"] == plan.offsets["a"] + 16
    assert plan.offsets["c"] % 32 == 0


def test_the_validator_names_a_broken_object_and_other_solvers_refuse_the_form():
    problem = Problem((Buffer("a", 0, 2, 32), Buffer("b", 2, 4, 32)), shared_objects=True)
    staggered = Plan(offsets={"a": 0, "b": 16}, arena_sizes={0: 48}, solver="by hand")
    assert [v.kind for v in validate(problem, staggered)] == [ViolationKind.SHARED_OBJECT_BROKEN]
    assert validate(dataclasses.replace(problem, shared_objects=False), staggered) == []
    with pytest.raises(UnsupportedProblemError, match="shared objects.*use greedy or shared_objects"):
        solvers.solve(problem, "bestfit")
    assert solvers.solve(problem, "shared_objects").arena_size == 32


def test_pinned_buffers_that_cannot_share_an_object_are_refused():
    with pytest.raises(ProblemError, match="'b' at 16 in pool 0; their bytes intersect"):
        Problem(
            (Buffer("a", 0, 2, 32, offset=0), Buffer("b", 2, 4, 32, offset=16)),
            shared_objects=True,
        )
    with pytest.raises(ProblemError, match="'big' is pinned at 0 and 'b' at 16"):  # pinned through its set
        Problem(
            (Buffer("a", 0, 1, 8, offset=0), Buffer("big", 1, 2, 32), Buffer("b", 2, 4, 32, offset=16)),
            same_offsets=(SameOffset(("a", "big")),),
            shared_objects=True,
        )
    together = Problem(
        (Buffer("a", 0, 2, 32, offset=0), Buffer("b", 1, 4, 16, offset=0)), shared_objects=True
    )
    with pytest.raises(InfeasibleError, match="live at the same time"):
        solvers.solve(together, "shared_objects")


def test_a_bank_too_small_for_every_packing_is_an_error_naming_the_bank():
    problem = Problem(
        (Buffer("a", 0, 2, 64, banks=(1,), pool=1), Buffer("b", 1, 3, 64, banks=(1,), pool=1)),
        banks=(Bank("sram", 1, 96),),
        shared_objects=True,
    )
    with pytest.raises(BankCapacityError, match="sram"):
        solvers.solve(problem, "shared_objects")


def test_a_proof_only_when_exact():
    at_bound = Problem((Buffer("a", 0, 2, 32), Buffer("b", 2, 4, 16)), shared_objects=True)
    assert solvers.solve(at_bound, "shared_objects").proven_optimal
    # b and c live together, a with neither: the best objects are {a, b} (64) and {c} (32), 96 B,
    # while staggered offsets need only the bound, 80 B (b and c at once). CP-SAT proves 96 least
    # among shared-objects plans; for the problem without the form it proves nothing.
    above = Problem(
        (Buffer("a", 2, 5, 64), Buffer("b", 0, 2, 48), Buffer("c", 0, 1, 32)), shared_objects=True
    )
    plan = solvers.solve(above, "shared_objects")
    assert (plan.arena_size, plan.lower_bound, plan.proven_optimal) == (96, 80, True)
    ordinary = solvers.solve(dataclasses.replace(above, shared_objects=False), "shared_objects")
    assert ordinary.arena_size == 96 and not ordinary.proven_optimal and "not proven" in ordinary.status
    no_exact = solvers.solve(above, "shared_objects", exact_units=0)
    assert not no_exact.proven_optimal
    # Sizes that are not multiples of the alignment leave padding between objects: no proof.
    padded = Problem(
        (Buffer("a", 2, 5, 40, 16), Buffer("b", 0, 2, 24, 16), Buffer("c", 0, 1, 8, 16)), shared_objects=True
    )
    assert not solvers.solve(padded, "shared_objects").proven_optimal


def _brute_force(problem: Problem) -> int:
    """The least sum of object sizes over every partition of the buffers into objects (alignment 1)."""
    buffers = list(problem.buffers)
    best = sum(b.size for b in buffers)

    def walk(i: int, objects: list[list[Buffer]]) -> None:
        nonlocal best
        if i == len(buffers):
            best = min(best, sum(max(b.size for b in obj) for obj in objects))
            return
        for obj in objects:
            if not any(buffers[i].lives_with(b) for b in obj):
                obj.append(buffers[i])
                walk(i + 1, objects)
                obj.pop()
        objects.append([buffers[i]])
        walk(i + 1, objects)
        objects.pop()

    walk(0, [])
    return best


@pytest.mark.parametrize("seed", range(30))
def test_proofs_match_brute_force(seed):
    rng = random.Random(seed)
    buffers = []
    for i in range(rng.randint(2, 7)):
        start = rng.randint(0, 6)
        buffers.append(Buffer(f"b{i}", start, start + rng.randint(1, 4), rng.randint(1, 9)))
    problem = Problem(tuple(buffers), shared_objects=True)
    plan = solvers.solve(problem, "shared_objects")
    assert validate(problem, plan) == []
    least = _brute_force(problem)
    assert plan.arena_size >= least
    assert plan.proven_optimal and plan.arena_size == least


def test_the_flag_survives_json(tmp_path):
    problem = Problem((Buffer("a", 0, 2, 32),), shared_objects=True)
    save_json(problem, tmp_path / "p.json")
    assert load_json(tmp_path / "p.json").shared_objects
    with pytest.raises(ProblemError, match="shared_objects must be True or False"):
        Problem((Buffer("a", 0, 2, 32),), shared_objects="yes")  # type: ignore[arg-type]


def test_reproducible_runs_give_the_same_plan():
    problem = _random_banked(3, n=40)
    flat = dataclasses.replace(
        problem,
        buffers=tuple(dataclasses.replace(b, pool=0, banks=()) for b in problem.buffers),
        banks=(),
    )
    for case in (problem, flat):
        first, second = (solvers.solve(case, "shared_objects", reproducible=True) for _ in range(2))
        assert first.offsets == second.offsets and first.pools == second.pools
