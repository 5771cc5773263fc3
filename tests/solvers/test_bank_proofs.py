"""Bank solvers claim proofs only when exact, honour alignment per buffer and fixed buffers with banks.

The false proofs and crashes of issue 20, each reproduced; the exhaustive search of
`experiments.bench.fuzz_banks` is the independent judge of what the least traffic cost is.
"""

from __future__ import annotations

from fractions import Fraction

import pytest

from memplan.errors import BankCapacityError, InfeasibleError, UnsupportedProblemError
from memplan.experiments.bench.claims import claims_proof
from memplan.experiments.bench.fuzz_banks import check, least_cost, plan_cost
from memplan.plan import Outcome
from memplan.problem import Bank, Buffer, ContiguousGroup, Problem
from memplan.solvers import available, solve
from memplan.solvers.banked.bank_costs import weights
from memplan.validate import validate


def test_a_member_needing_more_alignment_than_its_parent_fits_beside_a_16_byte_buffer() -> None:
    # The group (20 bytes, its member needs 16) at 0 and the 16-byte buffer at 20 fill the 36-byte bank
    # exactly; cpsat rounded the group up to 32 and "proved" that nothing fits.
    problem = Problem(
        (
            Buffer("parent", 0, 4, 20, pool=1, banks=(1, 2), accesses=5),
            Buffer("member", 0, 4, 4, alignment=16, pool=1, banks=(1, 2)),
            Buffer("other", 0, 4, 16, pool=1, banks=(1, 2), accesses=5),
        ),
        (ContiguousGroup("parent", (("member", 0),)),),
        banks=(Bank("small", 1, 36, cost=0.0), Bank("tiny", 2, 8, cost=1.0)),
    )
    assert least_cost(problem) == 0
    plan = solve(problem, "cpsat", time_limit_s=5)
    assert plan.proven_optimal and plan_cost(problem, plan) == 0 and check(problem, plan) == []
    assert solve(problem, "banked_bestfit").arena_sizes[1] == 36


def test_fixed_buffers_at_zero_go_to_different_banks_or_are_refused_by_capability() -> None:
    problem = Problem(
        (
            Buffer("f1", 0, 4, 8, offset=0, pool=1, banks=(1, 2), accesses=2),
            Buffer("f2", 0, 4, 8, offset=0, pool=1, banks=(1, 2)),
        ),
        banks=(Bank("a", 1, 64), Bank("b", 2, 64)),
    )
    for solver in available(banks=True):
        if solver == "banked_greedy":
            with pytest.raises(
                UnsupportedProblemError, match=r"fixed offsets on buffers that choose a bank.*'f1'"
            ):
                solve(problem, solver)
            continue
        plan = solve(problem, solver, time_limit_s=5)
        assert {plan.pools["f1"], plan.pools["f2"]} == {1, 2} and check(problem, plan) == []
    assert solve(problem, "cpsat", time_limit_s=5).pools["f1"] == 1  # the busier one in the cheaper bank


@pytest.mark.parametrize(
    ("costs", "buffers", "fast", "least"),
    [
        (
            (0.0001, 0.0004),
            [("b0", 2, 5, 12, 1), ("b1", 1, 3, 4, 4), ("b2", 1, 3, 8, 1)],
            20,
            Fraction(6, 1000),
        ),
        (
            (1.0, 1.0004),
            [("b0", 1, 4, 12, 3), ("b1", 1, 4, 4, 9), ("b2", 2, 4, 8, 4)],
            20,
            Fraction("104.0128"),
        ),
    ],
)
def test_costs_that_a_scale_of_1000_rounded_together_are_compared_exactly(
    costs, buffers, fast, least
) -> None:
    # cpsat multiplied costs by 1000 and rounded: "optimal (traffic cost 0)" for 0.0072 when 0.006 fits.
    problem = Problem(
        tuple(Buffer(i, s, e, size, pool=1, banks=(1, 2), accesses=a) for i, s, e, size, a in buffers),
        banks=(Bank("fast", 1, fast, cost=costs[0]), Bank("slow", 2, 64, cost=costs[1])),
    )
    assert least_cost(problem) == least
    plan = solve(problem, "cpsat", time_limit_s=5)
    assert plan.proven_optimal and plan_cost(problem, plan) == least


def test_costs_too_fine_for_exact_integers_withdraw_the_proof() -> None:
    assert weights({1: 0.0001, 2: 1.0004}, [10**6]).per_pool == {1: 1, 2: 10004}
    assert not weights({1: 1e-300, 2: 1.0}, [10]).exact
    problem = Problem(
        (Buffer("x", 0, 4, 16, pool=1, banks=(1, 2)),),
        banks=(Bank("a", 1, 8, cost=1e-300), Bank("b", 2, 64, cost=0.5)),
    )
    plan = solve(problem, "cpsat", time_limit_s=5)
    assert not plan.proven_optimal and plan.outcome is Outcome.NOT_PROVEN and "rounded" in plan.status


def test_a_proven_bank_infeasibility_says_so_and_a_failed_heuristic_does_not() -> None:
    problem = Problem(
        tuple(Buffer(f"b{i}", 0, 4, 64, pool=1, banks=(1, 2)) for i in range(4)),
        banks=(Bank("sram", 1, 64), Bank("dram", 2, 100)),
    )
    with pytest.raises(BankCapacityError) as proved:
        solve(problem, "cpsat", time_limit_s=5)
    assert proved.value.proven and claims_proof(str(proved.value))
    for heuristic in ("banked_greedy", "banked_bestfit"):
        with pytest.raises(BankCapacityError) as failed:
            solve(problem, heuristic)
        assert not failed.value.proven and not claims_proof(str(failed.value))


def test_a_buffer_fixed_at_8_beside_one_aligned_to_16_is_planned_or_refused_never_a_crash() -> None:
    problem = Problem(
        (
            Buffer("f", 0, 4, 8, alignment=8, offset=8, pool=1),
            Buffer("g", 0, 4, 16, alignment=16, pool=1, banks=(1, 2)),
        ),
        banks=(Bank("a", 1, 64), Bank("b", 2, 64)),
    )
    with pytest.raises(UnsupportedProblemError, match="submodule reservation"):
        solve(problem, "banked_greedy")
    for solver in ("banked_bestfit", "cpsat"):
        plan = solve(problem, solver, time_limit_s=5)
        assert plan.offsets["f"] == 8 and plan.pools["g"] == 1 and validate(problem, plan) == []


def test_banked_greedy_aligns_each_buffer_to_its_own_alignment() -> None:
    # The lcm of all alignments (16) for every root put c at 32 and needed 48 bytes.
    problem = Problem(
        (
            Buffer("a", 0, 2, 16, alignment=16, pool=1, banks=(1,)),
            Buffer("b", 0, 2, 3, pool=1, banks=(1,)),
            Buffer("c", 0, 2, 3, pool=1, banks=(1,)),
        ),
        banks=(Bank("sram", 1, 22),),
    )
    plan = solve(problem, "banked_greedy")
    assert plan.offsets["a"] == 0 and {plan.offsets["b"], plan.offsets["c"]} == {16, 19}
    assert plan.arena_sizes[1] == 22


def test_banked_greedy_names_the_rounded_size_when_no_bank_holds_a_buffer() -> None:
    problem = Problem(
        (Buffer("big", 0, 2, 746_121, pool=1, banks=(1,)),), banks=(Bank("bank0", 1, 746_123, alignment=8),)
    )
    with pytest.raises(BankCapacityError) as caught:
        solve(problem, "banked_greedy")
    message = str(caught.value)
    assert (
        "746128 bytes: its 746121 rounded up to the alignment 8" in message and "5 bytes missing" in message
    )
    assert caught.value.missing == 5 and not caught.value.proven


def test_a_withdrawn_proof_no_longer_claims_one() -> None:
    error = InfeasibleError("cpsat: proven that no plan fits the capacity 8 bytes per pool", proven=True)
    error.withdraw("a reason")
    assert not error.proven and not claims_proof(str(error)) and "a reason" in str(error)
