"""greedy and bestfit: valid plans on generated and benchmark problems, constraints, errors."""

from __future__ import annotations

import pytest
from helpers.minimalloc_files import KNOWN, minimalloc_dir

from memplan.errors import InfeasibleError, SolverOptionError, UnsupportedProblemError
from memplan.generate import layered_problem, random_problem
from memplan.io import read_minimalloc_csv
from memplan.peak_bound import lower_bound, lower_bounds
from memplan.plan import Outcome, Plan
from memplan.problem import Buffer, BufferKind, Problem, SameOffset
from memplan.solvers import solve
from memplan.solvers.heuristics.bestfit import ORDERINGS
from memplan.validate import validate


def assert_sound(problem: Problem, plan: Plan) -> None:
    assert validate(problem, plan) == []
    bounds = lower_bounds(problem)
    assert plan.lower_bound == sum(bounds.values())
    assert all(plan.arena_sizes[p] >= bounds[p] for p in bounds)
    assert plan.proven_optimal == all(plan.arena_sizes[p] == bounds[p] for p in bounds)


@pytest.mark.parametrize("seed", range(12))
def test_greedy_is_valid_with_alignment_groups_and_pools(seed: int) -> None:
    problem = random_problem(150, seed, alignment=(1, 4, 16), with_groups=True, n_pools=3)
    assert_sound(problem, solve(problem, "greedy"))


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize("ordering", list(ORDERINGS))
def test_every_bestfit_ordering_is_valid_with_every_constraint(seed: int, ordering: str) -> None:
    problem = random_problem(
        150, seed, alignment=(1, 8, 32), with_groups=True, with_fixed=True, with_same_offset=True, n_pools=2
    )
    assert_sound(problem, solve(problem, "bestfit", orderings=[ordering]))


@pytest.mark.parametrize("seed", range(3))
def test_bestfit_keeps_the_best_ordering(seed: int) -> None:
    problem = layered_problem(3000, seed)
    each = {name: solve(problem, "bestfit", orderings=[name]).arena_size for name in ORDERINGS}
    plan = solve(problem, "bestfit")
    assert_sound(problem, plan)
    assert plan.arena_size == min(each.values())
    assert plan.outcome is Outcome.HEURISTIC
    assert plan.status.endswith(f"(ordering: {min(each, key=each.get)})")


@pytest.mark.parametrize("solver", ["greedy", "bestfit"])
@pytest.mark.parametrize("name", list(KNOWN))
def test_minimalloc_benchmarks(solver: str, name: str) -> None:
    problem = read_minimalloc_csv(minimalloc_dir() / name)
    plan = solve(problem, solver)
    assert_sound(problem, plan)
    assert plan.arena_size >= KNOWN[name].lower_bound
    if KNOWN[name].best_known == KNOWN[name].lower_bound:  # proven optimal: nothing beats it
        assert plan.arena_size >= KNOWN[name].best_known


def test_tiny_example_reaches_its_optimum_and_says_so() -> None:
    problem = read_minimalloc_csv(minimalloc_dir() / "input.12.csv")
    plan = solve(problem, "bestfit")
    assert plan.arena_size == 12 and plan.proven_optimal


def test_layered_problem_is_solved_close_to_its_bound() -> None:
    problem = layered_problem(5000, seed=0)
    for solver in ("greedy", "bestfit"):
        plan = solve(problem, solver)
        assert_sound(problem, plan)
        assert plan.arena_size < 1.5 * lower_bound(problem), solver


# -- greedy refuses what ExecuTorch's greedy cannot do --------------------------------


def test_greedy_refuses_fixed_offsets_naming_them() -> None:
    problem = Problem((Buffer("pinned", 0, 2, 8, offset=0), Buffer("free", 0, 2, 8)))
    with pytest.raises(
        UnsupportedProblemError, match=r"buffers 'pinned' are pinned; use bestfit, skyline, cpsat or milp"
    ):
        solve(problem, "greedy")


def test_greedy_refuses_same_offset_sets_naming_them() -> None:
    problem = Problem((Buffer("x", 0, 2, 8), Buffer("y", 2, 4, 8)), same_offsets=(SameOffset(("x", "y")),))
    with pytest.raises(UnsupportedProblemError, match=r"\['x', 'y'\].*use bestfit, skyline, cpsat or milp"):
        solve(problem, "greedy")


def test_greedy_rounds_sizes_to_the_pools_common_alignment() -> None:
    # 4-aligned 'a' of 6 bytes and 16-aligned 'b' of 8, live together: sizes become 16 each.
    problem = Problem((Buffer("a", 0, 2, 6, alignment=4), Buffer("b", 0, 2, 8, alignment=16)))
    plan = solve(problem, "greedy")
    assert plan.arena_sizes == {0: 32}
    assert sorted(plan.offsets.values()) == [0, 16]


# -- bestfit placement -----------------------------------------------------------------


def _holes() -> tuple[Buffer, ...]:
    """Pinned neighbours leaving holes [10, 30) (20 bytes) and [40, 50) (10 bytes)."""
    return (
        Buffer("f0", 0, 10, 10, offset=0),
        Buffer("f1", 0, 10, 10, offset=30),
        Buffer("f2", 0, 10, 10, offset=50),
    )


def test_bestfit_takes_the_tightest_hole() -> None:
    plan = solve(Problem(_holes() + (Buffer("x", 2, 4, 8),)), "bestfit")
    assert plan.offsets["x"] == 40


def test_bestfit_skips_a_hole_alignment_makes_too_small() -> None:
    plan = solve(Problem(_holes() + (Buffer("x", 2, 4, 8, alignment=16),)), "bestfit")
    assert plan.offsets["x"] == 16  # 48 + 8 > 50, so the looser hole, aligned up


def test_bestfit_goes_on_top_when_no_hole_fits() -> None:
    plan = solve(Problem(_holes() + (Buffer("x", 2, 4, 25),)), "bestfit")
    assert plan.offsets["x"] == 60


def test_bestfit_same_offset_set_fits_every_member() -> None:
    # 'x' and 'y' share an offset; 'y' is blocked at [0, 16) in pool 1, so both go to 16.
    buffers = (
        Buffer("x", 0, 2, 8),
        Buffer("y", 0, 2, 8, pool=1),
        Buffer("wall", 0, 2, 16, offset=0, pool=1),
    )
    plan = solve(Problem(buffers, same_offsets=(SameOffset(("x", "y")),)), "bestfit")
    assert plan.offsets["x"] == plan.offsets["y"] == 16


def test_bestfit_reports_colliding_fixed_buffers() -> None:
    problem = Problem((Buffer("f", 0, 4, 8, offset=0), Buffer("g", 2, 6, 8, offset=4)))
    with pytest.raises(InfeasibleError, match=r"fixed buffers \['g'\] at 4 overlap"):
        solve(problem, "bestfit")


def test_bestfit_rejects_unknown_orderings() -> None:
    with pytest.raises(SolverOptionError, match=r"unknown orderings \['random'\]"):
        solve(Problem((Buffer("x", 0, 1, 1),)), "bestfit", orderings=["size", "random"])


@pytest.mark.parametrize("solver", ["greedy", "bestfit"])
def test_capacity_below_the_plan_is_infeasible(solver: str) -> None:
    problem = Problem((Buffer("x", 0, 2, 8), Buffer("y", 1, 3, 8)))
    with pytest.raises(InfeasibleError, match="capacity 12"):
        solve(problem, solver, capacity=12)


# -- generators ------------------------------------------------------------------------


def test_generators_are_deterministic_per_seed() -> None:
    kwargs = dict(alignment=(1, 4), with_groups=True, with_fixed=True, with_same_offset=True, n_pools=2)
    assert random_problem(300, 5, **kwargs) == random_problem(300, 5, **kwargs)
    assert random_problem(300, 5, **kwargs) != random_problem(300, 6, **kwargs)
    assert layered_problem(2000, 1) == layered_problem(2000, 1)
    assert layered_problem(2000, 1) != layered_problem(2000, 2)


def test_random_problem_flags_add_their_constraints() -> None:
    plain = random_problem(300, 0)
    full = random_problem(300, 0, with_groups=True, with_fixed=True, with_same_offset=True, n_pools=3)
    assert not (plain.groups or plain.same_offsets or any(b.offset is not None for b in plain.buffers))
    assert full.groups and full.same_offsets and any(b.offset is not None for b in full.buffers)
    assert len(full.pools) == 3


def test_layered_problem_has_the_intended_shape() -> None:
    problem = layered_problem(10_000, seed=0)
    assert len(problem.buffers) == 10_000
    horizon = max(b.end for b in problem.buffers)
    lengths = sorted(b.end - b.start for b in problem.buffers)
    assert lengths[len(lengths) // 2] <= 2  # most die right after they are made
    assert sum(10 <= n < horizon for n in lengths) > 200  # skip connections
    whole = [b for b in problem.buffers if (b.start, b.end) == (0, horizon)]
    assert 1 <= len(whole) <= 32
    assert all(b.kind != BufferKind.ACTIVATION for b in whole)
    assert any(b.size & (b.size - 1) for b in problem.buffers)  # odd sizes
    assert any(not b.size & (b.size - 1) for b in problem.buffers)  # powers of two
