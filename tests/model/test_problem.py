"""Malformed problems are refused with the buffer named; lower bounds on hand examples."""

from __future__ import annotations

import pytest

from memplan.errors import ProblemError
from memplan.peak_bound import lower_bound, lower_bounds
from memplan.problem import Buffer, ContiguousGroup, Problem, SameOffset


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda: Buffer("x", 0, 2, -3), r"buffer 'x': size must not be negative, got -3"),
        (lambda: Buffer("x", 2, 2, 8), r"buffer 'x': lifetime \[start=2, end=2\) is empty"),
        (lambda: Buffer("x", 3, 1, 8), r"buffer 'x': lifetime \[start=3, end=1\) is empty"),
        (
            lambda: Buffer("x", 0, 2, 8, alignment=16, offset=8),
            r"buffer 'x': fixed offset 8 is not a multiple",
        ),
        (lambda: Buffer("x", 0, 2, 8, offset=-1), r"buffer 'x': fixed offset -1 is negative"),
        (lambda: Buffer("x", 0, 2, 8, alignment=0), r"buffer 'x': alignment must be >= 1"),
    ],
)
def test_bad_buffer_is_named(make, message: str) -> None:
    with pytest.raises(ProblemError, match=message):
        make()


P = Buffer("p", 0, 10, 16)


@pytest.mark.parametrize(
    "buffers, groups, same, message",
    [
        (
            (P, Buffer("m", 0, 10, 8)),
            [("p", (("m", 12),))],
            [],
            r"'m' inside 'p': bytes \[12, 20\) do not fit",
        ),
        (
            (P, Buffer("m", 5, 12, 8)),
            [("p", (("m", 0),))],
            [],
            r"'m' inside 'p': lifetime \[5, 12\) is not inside",
        ),
        ((P, Buffer("m", 0, 4, 8, alignment=8)), [("p", (("m", 4),))], [], r"'m' inside 'p'.*alignment 8"),
        ((P, Buffer("m", 0, 4, 8, pool=1)), [("p", (("m", 0),))], [], r"'m' inside 'p': pool 1"),
        ((P,), [("p", (("ghost", 0),))], [], r"member of the group of 'p' 'ghost' is not a buffer"),
        ((P,), [("ghost", (("p", 0),))], [], r"contiguous group parent 'ghost' is not a buffer"),
        ((P, Buffer("q", 5, 12, 4)), [], [("p", "q")], r"'p' and 'q' are live at the same time"),
        ((P,), [], [("p", "ghost")], r"same-offset set member 'ghost' is not a buffer"),
        ((P, P), [], [], r"buffer id 'p' appears twice"),
    ],
)
def test_bad_constraint_names_the_buffers(buffers, groups, same, message: str) -> None:
    with pytest.raises(ProblemError, match=message):
        Problem(
            tuple(buffers),
            tuple(ContiguousGroup(parent, members) for parent, members in groups),
            tuple(SameOffset(s) for s in same),
        )


def test_same_offset_members_in_different_pools_may_live_together() -> None:
    Problem((P, Buffer("q", 0, 10, 4, pool=1)), same_offsets=(SameOffset(("p", "q")),))


def test_lower_bound_is_the_busiest_moment_with_half_open_lifetimes() -> None:
    # t=1: a+b = 10; t=2: a has ended, b+c = 11; t=3: c alone.
    problem = Problem((Buffer("a", 0, 2, 4), Buffer("b", 1, 3, 6), Buffer("c", 2, 4, 5)))
    assert lower_bound(problem) == 11


def test_lower_bound_counts_a_group_once() -> None:
    buffers = (Buffer("cat", 0, 6, 24), Buffer("x", 0, 3, 8), Buffer("y", 1, 6, 16), Buffer("z", 2, 4, 5))
    groups = (ContiguousGroup("cat", (("x", 0), ("y", 8))),)
    # Members sit inside 'cat': live bytes peak at cat + z = 29, not x + y + cat + z.
    assert lower_bound(Problem(buffers, groups)) == 29


def test_lower_bounds_per_pool_sum_up() -> None:
    problem = Problem((Buffer("a", 0, 2, 4), Buffer("b", 0, 2, 6), Buffer("c", 0, 2, 5, pool=2)))
    assert lower_bounds(problem) == {0: 10, 2: 5}
    assert lower_bound(problem) == 15


def test_lower_bound_covers_the_end_of_a_fixed_buffer() -> None:
    problem = Problem((Buffer("a", 0, 2, 4, offset=100), Buffer("b", 0, 2, 6)))
    assert lower_bound(problem) == 104


def test_empty_problem_needs_nothing() -> None:
    assert lower_bound(Problem(())) == 0


def test_problem_and_plan_have_short_reprs_and_frames() -> None:
    from memplan.generate import random_problem
    from memplan.solvers import solve

    problem = random_problem(2000, seed=3)
    plan = solve(problem, "bestfit")
    assert len(repr(problem)) < 200 and "2,000 buffers" in repr(problem) and "lower bound" in repr(problem)
    assert len(repr(plan)) < 200 and "bestfit" in repr(plan) and f"{plan.arena_size:,} B" in repr(plan)
    frame = problem.to_frame()
    assert len(frame) == 2000 and list(frame["size"]) == [b.size for b in problem.buffers]
    placed = plan.to_frame(problem)
    assert (placed["offset"] + placed["size"] <= plan.arena_size).all()
    assert "<table" in problem._repr_html_() and "first 20 of 2,000" in problem._repr_html_()
    assert "<table" in plan._repr_html_()


def test_pools_are_named_by_their_device_or_bank_and_bad_names_are_refused() -> None:
    from memplan.problem import Bank

    buffers = (Buffer("a", 0, 2, 8), Buffer("b", 0, 2, 8, pool=2), Buffer("c", 0, 2, 8, pool=3))
    problem = Problem(buffers, banks=(Bank("sram", 3, 64),), pool_names={2: "cuda:0"})
    assert [problem.pool_label(p) for p in problem.pools] == [
        "mem_id 0",
        "mem_id 2 · cuda:0",
        "mem_id 3 · sram",
    ]
    assert "pools [0, 2 (cuda:0), 3]" in repr(problem)
    for names, message in (
        ({"x": "gpu"}, "pool_names: pool must be an integer"),
        ({2: ""}, "the name of pool 2 must be a one-line string"),
        ({2: "a\nb"}, "the name of pool 2 must be a one-line string"),
        ([2], "pool_names must map pools to names"),
    ):
        with pytest.raises(ProblemError, match=message):
            Problem(buffers, pool_names=names)  # type: ignore[arg-type]


def test_same_offset_sets_sharing_a_member_may_not_force_co_live_buffers_together() -> None:
    """Issue 31, item 12: each set alone is fine, joined through 'z' they put 'a' and 'b' (live together)
    at one offset; the problem refuses when built, naming both buffers, whatever z's size."""
    for size in (0, 8):
        buffers = (Buffer("a", 0, 4, 8), Buffer("b", 0, 4, 8), Buffer("z", 5, 6, size))
        with pytest.raises(ProblemError, match=r"share members, so 'a' and 'b' would share an offset.*live"):
            Problem(buffers, same_offsets=(SameOffset(("a", "z")), SameOffset(("b", "z"))))
    pinned = (Buffer("a", 0, 2, 8, offset=0), Buffer("b", 3, 4, 8, offset=16), Buffer("z", 5, 6, 0))
    with pytest.raises(ProblemError, match=r"pinned at different offsets \[0, 16\]"):
        Problem(pinned, same_offsets=(SameOffset(("a", "z")), SameOffset(("z", "b"))))
