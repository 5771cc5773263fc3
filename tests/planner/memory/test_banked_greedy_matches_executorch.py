"""memplan.solvers.banked.banked_greedy gives exactly what ExecuTorch 1.5.1's `BankedGreedy` gives.

Each problem becomes real `TensorSpec`s (same order, inclusive lifetimes,
mem_id = the pool of a pin and None for a free buffer, groups as storage_base)
planned by `executorch.exir.banked_memory_planning.BankedGreedy` over the same
banks as a `TargetMemoryMap`: every bank's size, every buffer's bank and
offset must match, and both must refuse the same maps.
"""

from __future__ import annotations

import pytest
import torch
from executorch.exir.banked_memory_planning import Bank as EtBank
from executorch.exir.banked_memory_planning import BankedGreedy, BankPlacementError, TargetMemoryMap
from executorch.exir.tensor import TensorSpec

from memplan.errors import BankCapacityError
from memplan.generate import random_problem, with_banks
from memplan.peak_bound import lower_bound
from memplan.problem import Bank, Buffer, BufferKind, Problem
from memplan.solvers import solve
from memplan.validate import validate


def executorch_banked(
    problem: Problem, alignment: int, reserved: dict[int, int] | None = None
) -> tuple[dict[int, int], dict[str, int], dict[str, int]]:
    """(bytes per bank, pool per buffer, offset per buffer) from ExecuTorch's BankedGreedy."""
    graph = torch.fx.GraphModule(torch.nn.Module(), torch.fx.Graph())
    if reserved:
        graph.input_mem_buffer_sizes = [reserved.get(i, 0) for i in range(max(reserved) + 1)]
    specs = {}
    for b in problem.buffers:
        if b.kind is BufferKind.SUBMODULE:
            continue
        spec = TensorSpec.from_tensor(torch.empty(b.size, dtype=torch.uint8))
        spec.lifetime = [b.start, b.end - 1]
        spec.mem_id = None if b.banks else b.pool
        spec.realign(alignment)
        specs[b.id] = spec
    for group in problem.groups:
        for member, rel in group.members:
            specs[member].storage_base = specs[group.parent]
            specs[member].storage_base_offset = rel
    target = TargetMemoryMap(
        [EtBank(b.name, b.capacity, b.pool, b.alignment if b.alignment > 1 else None) for b in problem.banks]
    )
    result = BankedGreedy(target)(alignment, list(specs.values()), graph, None, 0)
    sizes = {pool: result.bufsizes[pool] for pool in {b.pool for b in problem.banks}}
    pools = {bid: result.spec_dict[spec].mem_id for bid, spec in specs.items()}
    offsets = {bid: result.spec_dict[spec].mem_offset for bid, spec in specs.items()}
    return sizes, pools, offsets


def banked(problem: Problem, fractions: tuple[float, ...], seed: int, **kw) -> Problem:
    bound = lower_bound(problem)
    return with_banks(problem, [max(1, int(bound * f)) for f in fractions], seed=seed, **kw)


def assert_same(problem: Problem, alignment: int) -> None:
    try:
        et = executorch_banked(problem, alignment)
    except BankPlacementError:
        with pytest.raises(BankCapacityError):
            solve(problem, "banked_greedy")
        return
    plan = solve(problem, "banked_greedy")
    assert not validate(problem, plan)
    sizes, pools, offsets = et
    assert {p: plan.arena_sizes.get(p, 0) for p in sizes} == sizes
    planned = {b.id: plan.pools.get(b.id, b.pool) for b in problem.buffers}
    assert planned == pools
    assert dict(plan.offsets) == offsets


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("fractions", [(0.25, 2.0), (0.5, 0.7), (0.3, 0.3, 0.6)])
def test_random_problems_over_two_and_three_banks(seed: int, fractions: tuple[float, ...]) -> None:
    problem = banked(random_problem(80, seed, alignment=16, with_groups=True), fractions, seed, pinned=0.1)
    assert_same(problem, 16)


@pytest.mark.parametrize("seed", range(6))
def test_bank_alignment_tightens_and_rounds_sizes_up(seed: int) -> None:
    problem = banked(random_problem(60, seed, alignment=16), (0.4, 3.0), seed, alignments=(64, 16))
    assert_same(problem, 16)


@pytest.mark.parametrize("seed", range(6))
def test_one_bank_equals_greedy(seed: int) -> None:
    base = random_problem(100, seed, alignment=16, with_groups=True)
    problem = with_banks(base, [10**9], seed=seed)
    assert_same(problem, 16)
    plan = solve(problem, "banked_greedy")
    ours = solve(base, "greedy")
    assert dict(plan.offsets) == dict(ours.offsets)  # greedy == ExecuTorch's: test_greedy_matches_executorch


def test_submodule_reservation_is_charged_and_laid_out_first() -> None:
    buffers = (
        Buffer("sub", 0, 6, 32, offset=0, pool=1, kind=BufferKind.SUBMODULE),
        Buffer("a", 0, 3, 64, pool=1, banks=(1, 2)),
        Buffer("b", 2, 5, 48, pool=1, banks=(1, 2)),
    )
    problem = Problem(buffers, banks=(Bank("sram", 1, 100), Bank("dram", 2, 1000)))
    et = executorch_banked(problem, 16, reserved={1: 32})
    plan = solve(problem, "banked_greedy")
    assert plan.offsets["a"] == et[2]["a"] == 32
    assert plan.pools["b"] == et[1]["b"] == 2


def test_a_pin_over_its_bank_names_the_bank_and_the_missing_bytes() -> None:
    buffers = (Buffer("big", 0, 2, 96, pool=1), Buffer("x", 0, 2, 16, pool=1, banks=(1, 2)))
    problem = Problem(buffers, banks=(Bank("sram", 1, 64), Bank("dram", 2, 1000)))
    with pytest.raises(BankPlacementError):
        executorch_banked(problem, 16)
    with pytest.raises(BankCapacityError, match=r"'big'.*bank 'sram'.*32 bytes missing") as caught:
        solve(problem, "banked_greedy")
    assert (caught.value.bank, caught.value.missing) == ("sram", 32)
