"""Splitting problems into independent parts, peeling long-lived buffers, joining plans."""

from __future__ import annotations

import pytest
from helpers.strategies import problems
from hypothesis import HealthCheck, given, settings

from memplan.errors import InfeasibleError
from memplan.generate import layered_problem
from memplan.peak_bound import lower_bound
from memplan.plan import Outcome, Plan
from memplan.problem import Buffer, Problem, SameOffset
from memplan.solvers import solve
from memplan.solvers.exact.decompose import solve_in_parts, split, subproblem
from memplan.validate import validate


def ids(parts) -> list[set[str]]:
    return sorted(({r for u in part for r in u.roots} for part in parts), key=sorted)


def two_blocks() -> Problem:
    """[0, 3) and [3, 6) share no moment; c touches b only at 3 (half-open: no overlap)."""
    return Problem(
        (
            Buffer("a", 0, 2, 4),
            Buffer("b", 1, 3, 4),
            Buffer("c", 3, 5, 8),
            Buffer("d", 4, 6, 2),
        )
    )


def test_a_moment_nobody_crosses_splits_the_problem() -> None:
    assert ids(split(two_blocks()).parts) == [{"a", "b"}, {"c", "d"}]


def test_a_same_offset_set_across_the_cut_keeps_one_part() -> None:
    problem = Problem(two_blocks().buffers, same_offsets=(SameOffset(("a", "d")),))
    assert ids(split(problem).parts) == [{"a", "b", "c", "d"}]


def test_pools_split_independently_unless_a_unit_spans_two() -> None:
    apart = Problem((Buffer("a", 0, 2, 4), Buffer("b", 0, 2, 4, pool=1)))
    assert ids(split(apart, peel=False).parts) == [{"a"}, {"b"}]
    tied = Problem(
        (
            Buffer("a", 0, 2, 4),
            Buffer("x", 5, 6, 1),
            Buffer("b", 0, 2, 4, pool=1),
            Buffer("y", 5, 6, 1, pool=1),
        ),
        same_offsets=(SameOffset(("a", "b")),),
    )
    # the set ties pools 0 and 1, so each pool's later block joins too
    assert ids(split(tied, peel=False).parts) == [{"a", "b", "x", "y"}]


def test_long_lived_buffers_are_peeled_and_the_rest_splits() -> None:
    problem = Problem(two_blocks().buffers + (Buffer("state", 0, 6, 16),))
    cut = split(problem)
    assert [u.roots for u in cut.peeled[0]] == [("state",)]
    assert cut.base == {0: 16} and cut.exact
    assert ids(cut.parts) == [{"a", "b"}, {"c", "d"}]
    assert ids(split(problem, peel=False).parts) == [{"a", "b", "c", "d", "state"}]


def test_peeling_that_needs_padding_is_only_done_on_request() -> None:
    problem = Problem(
        (Buffer("s", 0, 6, 3, alignment=4), Buffer("a", 0, 2, 4, alignment=4), Buffer("b", 3, 6, 4))
    )
    assert split(problem).peeled == {}
    padded = split(problem, peel="padded")
    assert padded.base == {0: 4} and not padded.exact
    with pytest.raises(ValueError, match="peel"):
        split(problem, peel="sometimes")


def test_pools_with_fixed_buffers_are_not_peeled() -> None:
    problem = Problem((Buffer("s", 0, 6, 4), Buffer("f", 0, 2, 4, offset=0), Buffer("b", 3, 6, 4)))
    assert split(problem).peeled == {}


def test_subproblem_keeps_group_members_and_sets() -> None:
    problem = layered_problem(300, seed=1)
    for part in split(problem).parts:
        sub = subproblem(problem, part, None, "part")
        assert {b.id for b in sub.buffers} >= {r for u in part for r in u.roots}


def counting_solver(calls: list[Problem]):
    def solve_part(part: Problem, seconds: float) -> Plan:
        calls.append(part)
        return solve(part, "cpsat", time_limit_s=seconds, decompose=False)

    return solve_part


def test_parts_are_solved_separately_and_joined_into_a_proven_plan() -> None:
    problem = Problem(two_blocks().buffers + (Buffer("state", 0, 6, 16),))
    calls: list[Problem] = []
    plan = solve_in_parts(problem, counting_solver(calls), time_limit_s=10, solver="test")
    assert len(calls) == 2
    assert validate(problem, plan) == []
    assert plan.offsets["state"] == 0
    assert plan.arena_size == lower_bound(problem) == 26  # 16 + the peak of c and d
    assert plan.outcome is Outcome.OPTIMAL
    assert "2 independent parts" in plan.status and "1 long-lived" in plan.status


def test_a_problem_that_does_not_split_goes_to_the_solver_whole() -> None:
    problem = Problem((Buffer("a", 0, 2, 4), Buffer("b", 1, 3, 4)))
    calls: list[Problem] = []
    solve_in_parts(problem, counting_solver(calls), time_limit_s=10, solver="test")
    assert calls == [problem]


def test_a_problem_that_does_not_split_gets_only_the_time_left_after_looking() -> None:
    problem = Problem(tuple(Buffer(f"b{i}", i, i + 2, 16) for i in range(2_000)))  # a chain: no cut, no peel
    given: list[float] = []

    def record(part: Problem, seconds: float) -> Plan:
        given.append(seconds)
        return solve(part, "bestfit")

    solve_in_parts(problem, record, time_limit_s=10, solver="test")
    assert len(given) == 1 and given[0] < 10


def test_an_infeasible_part_names_the_part() -> None:
    """In [10, 12): four 3-byte buffers and fixed 1-byte walls at 5 and 11 need 18 bytes, not 17."""
    walls = [Buffer(f"w{i}", 10, 12, 3) for i in range(4)] + [
        Buffer(f"wall{j}", 10, 12, 1, offset=5 + 6 * j) for j in range(2)
    ]
    problem = Problem(two_blocks().buffers + tuple(walls), capacity=17)
    with pytest.raises(
        InfeasibleError, match=r"(?s)independent part of 6 buffers \(3 parts in all\).*capacity 17"
    ):
        solve_in_parts(problem, counting_solver([]), time_limit_s=10, solver="test")


def test_capacity_under_the_peeled_stack_is_infeasible() -> None:
    problem = Problem(two_blocks().buffers + (Buffer("state", 0, 6, 16),), capacity=12)
    with pytest.raises(InfeasibleError, match="over the capacity 12"):
        solve_in_parts(problem, counting_solver([]), time_limit_s=10, solver="test")


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(problems(max_buffers=7, pools=(0, 1)))
def test_decomposed_optimum_equals_the_whole_optimum(problem: Problem) -> None:
    whole = solve(problem, "cpsat", time_limit_s=20, decompose=False)
    parts = solve(problem, "cpsat", time_limit_s=20, decompose=True)
    assert validate(problem, parts) == []
    assert whole.proven_optimal and parts.proven_optimal, parts.status
    assert parts.arena_size == whole.arena_size


def test_padded_peeling_falls_back_to_bestfit_when_padding_costs_more() -> None:
    """The 3-byte state aligned to 4 leaves a byte of padding under the rest (8 bytes);
    best-fit puts it on top (7, the bound)."""
    problem = Problem(
        (
            Buffer("s", 0, 6, 3, alignment=4),
            Buffer("a", 0, 2, 4, alignment=4),
            Buffer("b", 3, 6, 4, alignment=4),
        )
    )
    plan = solve_in_parts(problem, counting_solver([]), time_limit_s=10, solver="test", peel="padded")
    assert validate(problem, plan) == []
    assert plan.arena_size == 7
    assert plan.outcome is Outcome.OPTIMAL and plan.arena_size == lower_bound(problem)  # best-fit meets it
    assert "best-fit kept, better than the padded split" in plan.status
    assert "(with padding)" in plan.status


@pytest.mark.parametrize("seed", range(2))
def test_peeled_and_split_plans_of_generated_problems_are_valid(seed: int) -> None:
    problem = layered_problem(400, seed=seed)
    plan = solve_in_parts(problem, counting_solver([]), time_limit_s=2, solver="test", peel="padded")
    assert validate(problem, plan) == []
    assert plan.arena_size <= solve(problem, "bestfit").arena_size


def test_peeled_sizes_must_keep_the_rest_aligned() -> None:
    """Two 8-byte states fill 16 bytes, but moving one 8-byte band can misalign a 16-aligned buffer."""
    rest = (Buffer("a", 0, 2, 16, alignment=16), Buffer("b", 3, 6, 16, alignment=16))
    eights = Problem((Buffer("s1", 0, 6, 8), Buffer("s2", 0, 6, 8)) + rest)
    sixteens = Problem((Buffer("s1", 0, 6, 16), Buffer("s2", 0, 6, 32)) + rest)
    assert split(eights).peeled == {}
    assert split(eights, peel="padded").exact is False
    assert split(sixteens).base == {0: 48} and split(sixteens).exact


def test_an_infeasible_part_is_reported_against_the_capacity_given() -> None:
    # MiniMalloc D: "no plan fits the capacity 985,088" when 1,048,576 was given (the rest held long-lived buffers).
    rows = [
        ("b0", 1, 3, 7, 2),
        ("b1", 1, 2, 2, 4),
        ("b2", 4, 7, 3, 2),
        ("b3", 1, 3, 4, 1),
        ("b4", 4, 7, 5, 4),
    ]
    rows += [("b5", 1, 2, 5, 4), ("b6", 3, 6, 7, 4), ("w", 9, 10, 2, 1), ("L", 0, 11, 8, 1)]
    problem = Problem(tuple(Buffer(i, s, e, size, alignment=a) for i, s, e, size, a in rows))
    with pytest.raises(
        InfeasibleError, match=r"^cpsat, capacity 27: .* 19 bytes of it left above 8 bytes"
    ) as caught:
        solve(problem, "cpsat", capacity=27, time_limit_s=5)
    assert caught.value.proven
