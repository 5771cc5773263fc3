"""memplan.solvers.heuristics.greedy gives exactly what ExecuTorch 1.5.1's own `greedy` gives.

Each problem is turned into real `TensorSpec`s (same order, inclusive
lifetimes, mem_id = pool, groups as storage_base + storage_base_offset) and
planned by `executorch.exir.memory_planning.greedy`; every pool's size and
every buffer's offset must match ours.
"""

from __future__ import annotations

import pytest
import torch
from executorch.exir.memory_planning import greedy as et_greedy
from executorch.exir.tensor import TensorSpec

from memplan.errors import UnsupportedProblemError
from memplan.generate import layered_problem, random_problem
from memplan.problem import Buffer, ContiguousGroup, Problem
from memplan.solvers import solve
from memplan.solvers.heuristics.greedy import GreedyParams, solve_greedy

GRAPH = torch.fx.GraphModule(torch.nn.Module(), torch.fx.Graph())


def executorch_plan(
    problem: Problem, alignment: int, realigned: bool = True, allow_overlapping_allocations: bool = True
) -> tuple[dict[int, int], dict[str, int]]:
    """(bytes per pool, offset per buffer) from ExecuTorch's greedy.

    `realigned`: specs carry `alignment` before planning (their state after
    any earlier planning run); otherwise they are fresh (TensorSpec's 16).
    """
    specs = {}
    for b in problem.buffers:
        spec = TensorSpec.from_tensor(torch.empty(b.size, dtype=torch.uint8))
        spec.lifetime = [b.start, b.end - 1]  # ExecuTorch lifetimes are inclusive
        spec.mem_id = b.pool
        if realigned:
            spec.realign(alignment)
        specs[b.id] = spec
    for group in problem.groups:
        for member, rel in group.members:
            specs[member].storage_base = specs[group.parent]
            specs[member].storage_base_offset = rel
    result = et_greedy(
        alignment,
        list(specs.values()),
        GRAPH,
        None,
        allow_overlapping_allocations=allow_overlapping_allocations,
    )
    sizes = {pool: result.bufsizes[pool] for pool in problem.pools}
    return sizes, {bid: result.spec_dict[spec].mem_offset for bid, spec in specs.items()}


def assert_same(problem: Problem, alignment: int, **options) -> None:
    realigned = options.pop("realigned", True)
    et_sizes, et_offsets = executorch_plan(
        problem, alignment, realigned, options.get("allow_overlapping_allocations", True)
    )
    plan = solve(problem, "greedy", **options)
    assert dict(plan.arena_sizes) == et_sizes
    assert dict(plan.offsets) == et_offsets


@pytest.mark.parametrize("seed", range(25))
@pytest.mark.parametrize("alignment", [1, 16, 64])
def test_random_problems_with_pools_and_groups(seed: int, alignment: int) -> None:
    problem = random_problem(120, seed, alignment=alignment, with_groups=True, n_pools=3)
    assert_same(problem, alignment)


@pytest.mark.parametrize("seed", range(10))
def test_without_overlapping_allocations(seed: int) -> None:
    problem = random_problem(120, seed, alignment=16, with_groups=True, n_pools=2)
    assert_same(problem, 16, allow_overlapping_allocations=False)


@pytest.mark.parametrize("seed", range(3))
def test_layered_problems(seed: int) -> None:
    assert_same(layered_problem(2000, seed), 16)


def test_fresh_specs_at_default_alignment() -> None:
    """ExecuTorch's usual case: specs never realigned, planned at 16."""
    assert_same(random_problem(200, 7, alignment=16, with_groups=True), 16, realigned=False)


def test_equal_sizes_go_in_reverse_insertion_order() -> None:
    # Same size; ExecuTorch tries the last-inserted first, so 'c' gets object 0.
    buffers = (Buffer("a", 0, 2, 64), Buffer("b", 1, 3, 64), Buffer("c", 2, 4, 64))
    problem = Problem(buffers)
    assert_same(problem, 1)
    assert solve_greedy(problem).offsets == {"c": 0, "b": 64, "a": 0}


def test_smaller_spec_stacks_on_top_inside_a_bigger_object() -> None:
    # 'big' and 'w' make objects of 100 and 60 bytes; 'y' reuses w's object at 0 and
    # 'z', live with both 'big' and 'y', stacks on top of 'y' where 30 + 25 <= 60.
    buffers = (
        Buffer("big", 0, 10, 100),
        Buffer("w", 0, 4, 60),
        Buffer("y", 5, 9, 30),
        Buffer("z", 6, 8, 25),
    )
    problem = Problem(buffers)
    assert_same(problem, 1)
    plan = solve_greedy(problem)
    assert plan.offsets["z"] == plan.offsets["y"] + 30  # stacked on y inside w's object
    assert plan.arena_size == 160


def test_sort_alignment_reproduces_fresh_specs_at_another_alignment() -> None:
    # Fresh specs sort by their 16-aligned size (64 > 48) even when planned at 64, where
    # all become 64 bytes; by default we sort by the realigned size: a tie, reverse order.
    buffers = (
        Buffer("a", 1, 3, 48, alignment=64),
        Buffer("b", 1, 3, 64, alignment=64),
        Buffer("c", 0, 2, 48, alignment=64),
    )
    problem = Problem(buffers)
    fresh_sizes, fresh_offsets = executorch_plan(problem, 64, realigned=False)
    plan = solve(problem, "greedy", sort_alignment=16)
    assert (dict(plan.arena_sizes), dict(plan.offsets)) == (fresh_sizes, fresh_offsets)
    assert plan.offsets == {"a": 128, "b": 0, "c": 64}
    assert_same(problem, 64)
    assert solve(problem, "greedy").offsets == {"a": 128, "b": 64, "c": 0}


def test_sort_alignment_refuses_where_executorch_asserts() -> None:
    # Planned at 1, fresh specs of 20 and 17 bytes tie at 32 when sorted: 17 goes first
    # and 20 would land in its 17-byte object; ExecuTorch's assertion stops it.
    problem = Problem((Buffer("a", 0, 2, 20), Buffer("b", 2, 4, 17)))
    with pytest.raises(AssertionError, match="not sorted"):
        executorch_plan(problem, 1, realigned=False)
    with pytest.raises(UnsupportedProblemError, match="'a'.*not sorted"):
        solve_greedy(problem, GreedyParams(sort_alignment=16))


def test_nested_group_members_follow_their_root() -> None:
    buffers = (
        Buffer("root", 0, 6, 96, alignment=16),
        Buffer("mid", 1, 5, 64, alignment=16),
        Buffer("leaf", 2, 4, 16, alignment=16),
        Buffer("other", 3, 8, 40, alignment=16),
    )
    groups = (ContiguousGroup("root", (("mid", 32),)), ContiguousGroup("mid", (("leaf", 16),)))
    problem = Problem(buffers, groups)
    assert_same(problem, 16)
    plan = solve_greedy(problem)
    assert plan.offsets["leaf"] == plan.offsets["root"] + 48
