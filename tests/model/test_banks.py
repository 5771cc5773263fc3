"""Banks in the problem model, the validator and the bank-choosing solvers (no ExecuTorch here)."""

from __future__ import annotations

import dataclasses

import pytest

from memplan.bank_placement import bank_report, place_in_banks, traffic, traffic_cost
from memplan.errors import BankCapacityError, ProblemError, UnsupportedProblemError
from memplan.generate import layered_problem, random_problem, with_banks
from memplan.peak_bound import lower_bound
from memplan.plan import Plan
from memplan.problem import Bank, Buffer, ContiguousGroup, Problem
from memplan.solvers import available, solve
from memplan.validate import ViolationKind, validate

TWO = (Bank("sram", 1, 100), Bank("dram", 2, 1000))


def two_bank_problem() -> Problem:
    buffers = (
        Buffer("hot", 0, 4, 64, pool=1, banks=(1, 2), accesses=10),
        Buffer("cold", 0, 4, 64, pool=1, banks=(1, 2), accesses=1),
        Buffer("pin", 2, 6, 32, pool=2),
    )
    return Problem(buffers, banks=TWO)


def test_bank_costs_default_to_preference_order() -> None:
    problem = two_bank_problem()
    assert [b.cost for b in problem.banks] == [0.0, 1.0]
    assert problem.has_bank_choice and problem.bank(2).name == "dram" and problem.bank(3) is None


@pytest.mark.parametrize(
    ("make", "match"),
    [
        (
            lambda: Problem((Buffer("a", 0, 1, 8, pool=1, banks=(1, 3)),), banks=TWO),
            r"'a'.*\[3\].*not declared",
        ),
        (lambda: Buffer("a", 0, 1, 8, pool=2, banks=(1, 3)), r"pool 2 is not one of its banks"),
        (lambda: Problem((), banks=(Bank("x", 1, 8), Bank("x", 2, 8))), r"share the name \['x'\]"),
        (lambda: Bank("x", 1, -1), r"'x'.*capacity"),
        (
            lambda: Problem(
                (Buffer("p", 0, 2, 16, pool=1, banks=(1, 2)), Buffer("m", 0, 1, 8, pool=1)),
                (ContiguousGroup("p", (("m", 0),)),),
                banks=TWO,
            ),
            r"member 'm'.*a group moves as one",
        ),
    ],
)
def test_malformed_banks_are_named(make, match: str) -> None:
    with pytest.raises(ProblemError, match=match):
        make()


def test_validator_names_a_wrong_bank_and_an_over_capacity_bank() -> None:
    problem = two_bank_problem()
    wrong = Plan({"hot": 0, "cold": 0, "pin": 0}, {1: 64, 2: 64}, "hand", pools={"pin": 1})
    kinds = {v.kind for v in validate(problem, wrong)}
    assert kinds == {ViolationKind.WRONG_BANK}
    over = Plan({"hot": 0, "cold": 64, "pin": 0}, {1: 128, 2: 32}, "hand", pools={"hot": 1, "cold": 1})
    (violation,) = validate(problem, over)
    assert violation.kind is ViolationKind.OVER_BANK_CAPACITY
    assert "'sram'" in violation.message and "28 over" in violation.message and violation.buffers == ("cold",)
    good = Plan({"hot": 0, "cold": 0, "pin": 64}, {1: 64, 2: 96}, "hand", pools={"hot": 1, "cold": 2})
    assert validate(problem, good) == []


def test_bank_alignment_rounds_up_what_is_placed_in_it() -> None:
    banks = (Bank("sram", 1, 256, alignment=64), Bank("dram", 2, 1000))
    problem = Problem(
        (Buffer("a", 0, 2, 40, pool=1, banks=(1, 2)), Buffer("b", 0, 2, 40, pool=1, banks=(1, 2))),
        banks=banks,
    )
    placed = place_in_banks(problem, {"a": 1, "b": 2})
    assert (placed.buffer("a").size, placed.buffer("a").alignment) == (64, 64)
    assert placed.buffer("b").size == 40
    misaligned = Plan({"a": 40, "b": 0}, {1: 104, 2: 40}, "hand", pools={"a": 1, "b": 2})
    assert {v.kind for v in validate(problem, misaligned)} == {ViolationKind.MISALIGNED}


def test_traffic_report_counts_bytes_times_accesses_per_bank() -> None:
    problem = two_bank_problem()
    plan = solve(problem, "banked_bestfit")
    assert plan.pools["hot"] == 1 and plan.pools["cold"] == 2  # only one fits in sram; the hot one wins
    assert traffic(problem, plan.pools) == {1: 640, 2: 64 + 32}
    assert traffic_cost(problem, plan.pools) == 96
    rows = {r.name: r for r in bank_report(problem, plan)}
    assert (rows["sram"].bytes, rows["sram"].peak, rows["sram"].traffic) == (64, 64, 640)
    assert rows["dram"].buffers == 2 and rows["dram"].missing == 0


def test_single_pool_solvers_refuse_a_bank_choice_but_plan_a_map_without_one() -> None:
    problem = two_bank_problem()
    with pytest.raises(UnsupportedProblemError, match="banked_bestfit"):
        solve(problem, "bestfit")
    fixed = dataclasses.replace(
        problem, buffers=tuple(dataclasses.replace(b, banks=()) for b in problem.buffers)
    )
    for name in available():
        with pytest.raises(BankCapacityError, match=r"'sram'.*28 bytes missing"):
            solve(fixed, name, time_limit_s=2)


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("fractions", [(0.25, 3.0), (0.5, 0.8), (0.3, 0.4, 1.0)])
def test_banked_bestfit_is_valid_and_never_worse_than_banked_greedy(seed: int, fractions: tuple) -> None:
    base = random_problem(70, seed, alignment=(1, 8, 16), with_groups=True, with_same_offset=True)
    bound = lower_bound(base)
    problem = with_banks(base, [int(bound * f) for f in fractions], seed=seed, pinned=0.05, alignments=None)
    try:
        greedy = solve(dataclasses.replace(problem, same_offsets=()), "banked_greedy")
    except BankCapacityError:
        greedy = None
    try:
        plan = solve(problem, "banked_bestfit")
    except BankCapacityError as e:
        assert e.missing > 0 and e.bank in {b.name for b in problem.banks}
        return
    assert validate(problem, plan) == []
    if greedy is not None and not problem.same_offsets:
        assert traffic_cost(problem, plan.pools) <= traffic_cost(problem, greedy.pools)


@pytest.mark.parametrize("seed", [0, 2])
def test_banked_bestfit_fits_where_banked_greedy_fails_or_moves_more_to_the_fast_bank(seed: int) -> None:
    base = layered_problem(300, seed)
    bound = lower_bound(base)
    better = 0
    for fast in (0.25, 0.5, 0.75):
        problem = with_banks(base, [int(bound * fast), int(bound * (1.2 - fast))], seed=seed)
        try:
            greedy_cost = traffic_cost(problem, solve(problem, "banked_greedy").pools)
        except BankCapacityError:
            greedy_cost = float("inf")
        try:
            ours = traffic_cost(problem, solve(problem, "banked_bestfit").pools)
        except BankCapacityError:
            assert greedy_cost == float("inf")
            continue
        assert ours <= greedy_cost
        better += ours < greedy_cost
    assert better >= 2


def test_three_banks_spill_in_preference_order() -> None:
    banks = (Bank("tcm", 1, 64), Bank("sram", 2, 128), Bank("dram", 3, 10_000))
    buffers = tuple(Buffer(f"b{i}", 0, 4, 64, pool=1, banks=(1, 2, 3), accesses=10 - i) for i in range(5))
    problem = Problem(buffers, banks=banks)
    plan = solve(problem, "banked_bestfit")
    assert [plan.pools[f"b{i}"] for i in range(5)] == [1, 2, 2, 3, 3]


def test_a_map_that_cannot_hold_the_program_names_the_bank_and_the_missing_bytes() -> None:
    buffers = tuple(Buffer(f"b{i}", 0, 4, 64, pool=1, banks=(1, 2)) for i in range(4))
    problem = Problem(buffers, banks=(Bank("sram", 1, 64), Bank("dram", 2, 100)))
    for solver in ("banked_greedy", "banked_bestfit"):
        with pytest.raises(BankCapacityError, match="'dram'") as caught:
            solve(problem, solver)
        assert caught.value.bank == "dram" and caught.value.missing > 0


def test_json_keeps_banks_choices_accesses_and_the_chosen_pools(tmp_path) -> None:
    from memplan.io import load_json, save_json

    problem = two_bank_problem()
    plan = solve(problem, "banked_bestfit")
    save_json(problem, tmp_path / "p.json")
    save_json(plan, tmp_path / "plan.json")
    assert load_json(tmp_path / "p.json") == problem
    loaded = load_json(tmp_path / "plan.json")
    assert dict(loaded.pools) == dict(plan.pools) and validate(problem, loaded) == []


def test_csv_refuses_banks_rather_than_losing_them(tmp_path) -> None:
    from memplan.io import write_minimalloc_csv

    with pytest.raises(ProblemError, match=r"declares banks \['sram', 'dram'\].*lost.*save_json"):
        write_minimalloc_csv(two_bank_problem(), tmp_path / "p.csv")


def test_gantt_and_profile_draw_one_panel_per_bank_with_its_capacity() -> None:
    from memplan.viz import bank_gantt, bank_profile

    base = layered_problem(120, 1)
    bound = lower_bound(base)
    problem = with_banks(base, [bound // 2, bound // 2, 4 * bound], seed=1)
    plan = solve(problem, "banked_bestfit")
    for draw in (bank_gantt, bank_profile):
        fig = draw(problem, plan)
        axes = fig.axes if draw is bank_profile else [ax for ax in fig.axes if ax.get_title()]
        assert [ax.get_title().split(" ")[0] for ax in axes] == ["bank1", "bank2", "bank3"]
        lines = [[a for a in ax.get_children() if a.get_gid() == "capacity"] for ax in axes]
        assert [bool(found) for found in lines] == [True, True, False]  # 4 x the bound is out of sight
        assert all(ax.get_ylim()[1] >= bound // 2 for ax in axes[:2])


def test_reproducible_bank_solvers_give_the_same_plan_twice() -> None:
    base = layered_problem(80, 3)
    bound = lower_bound(base)
    problem = with_banks(base, [bound // 3, 2 * bound], seed=3)
    for name in ("banked_greedy", "banked_bestfit", "cpsat"):
        first, second = (solve(problem, name, time_limit_s=1, reproducible=True) for _ in range(2))
        assert (dict(first.offsets), dict(first.pools)) == (dict(second.offsets), dict(second.pools)), name
