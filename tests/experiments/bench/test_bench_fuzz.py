"""The fuzz script (experiments.bench.fuzz): its own checker catches broken plans, and a run finds nothing."""

from __future__ import annotations

import dataclasses
from fractions import Fraction

import pytest

from memplan import solvers
from memplan.errors import InfeasibleError, UnsupportedProblemError
from memplan.experiments.bench import fuzz, fuzz_banks
from memplan.plan import Plan
from memplan.problem import Bank, Buffer, Gap, Problem
from memplan.validate import validate


def test_every_kind_of_problem_is_drawn_and_valid() -> None:
    drawn = [fuzz.random_case(seed) for seed in range(5 * len(fuzz.KINDS))]
    assert [p.name.split("-", 2)[2] for p in drawn[: len(fuzz.KINDS)]] == list(fuzz.KINDS)

    def of(kind: str) -> list[Buffer]:
        return [b for p in drawn if p.name.endswith(f"-{kind}") for b in p.buffers]

    assert any(b.size == 0 for b in of("zero-size")) and any(
        b.offset is not None for b in of("zero-size") if not b.size
    )
    assert any(b.gaps and b.gaps[0].window for b in of("gaps")) and any(b.gaps for b in of("gaps-capacity"))
    assert max(b.size for b in of("huge")) > 1 << 40


def test_the_independent_checker_agrees_with_the_validator_on_corrupted_plans() -> None:
    problems = [fuzz.random_case(seed) for seed in range(3 * len(fuzz.KINDS))]
    for problem in problems:
        plan = solvers.solve(dataclasses.replace(problem, capacity=None), "bestfit")
        assert fuzz.check(problem, plan) == []
        for buffer in problem.buffers:  # move each buffer onto another's offset: both checkers must agree
            for other in problem.buffers[:3]:
                offsets = dict(plan.offsets) | {buffer.id: plan.offsets[other.id]}
                moved = Plan(offsets, {p: s + (1 << 50) for p, s in plan.arena_sizes.items()}, "moved")
                assert bool(fuzz.check(problem, moved)) == bool(validate(problem, moved)), (
                    problem.name,
                    buffer.id,
                )


def test_the_checker_reads_gaps_and_windows_itself() -> None:
    problem = Problem((Buffer("a", 0, 10, 8, gaps=(Gap(3, 6, (0, 2)),)), Buffer("b", 3, 6, 4)))
    assert fuzz.check(problem, Plan({"a": 0, "b": 2}, {0: 8}, "hand")) == []
    assert fuzz.check(problem, Plan({"a": 0, "b": 1}, {0: 8}, "hand"))  # b hits a's window
    assert fuzz.check(problem, Plan({"a": 0, "b": 0}, {0: 7}, "hand"))  # arena too small, and an overlap


@pytest.mark.slow
def test_a_fuzz_run_finds_no_invalid_plan_no_false_proof_and_no_crash() -> None:
    report = fuzz.fuzz(problems=6 * len(fuzz.KINDS), seed=2026, time_limit_s=1.0)
    assert report.total("tried") == 6 * len(fuzz.KINDS) * len(fuzz.SOLVERS)
    assert report.total("plans") > report.total("tried") // 2
    assert (report.total("invalid"), report.total("false proof"), report.total("crash")) == (0, 0, 0), (
        fuzz.table(report) + "\n" + "\n".join(map(str, report.failures))
    )


def test_a_small_fuzz_run_finds_nothing_wrong() -> None:
    report = fuzz.fuzz(problems=len(fuzz.KINDS), seed=7, time_limit_s=0.5)
    assert report.total("tried") == len(fuzz.KINDS) * len(fuzz.SOLVERS)
    assert (report.total("invalid"), report.total("false proof"), report.total("crash")) == (0, 0, 0), (
        fuzz.table(report) + "\n" + "\n".join(map(str, report.failures))
    )


def test_messages_and_proven_flags_must_agree() -> None:
    assert fuzz.honest("cpsat: proven that no plan fits the capacity 8 bytes per pool", True)
    assert not fuzz.honest("cpsat proved that no placement fits the banks", False)
    assert not fuzz.honest("no plan found (not proven infeasible)", True)
    assert fuzz.honest("no plan found in the time limit (not proven infeasible)", False)
    assert fuzz.honest("no bank can hold buffer 'x'", False)


# -- with banks ---------------------------------------------------------------------------


def test_bank_problems_draw_every_bank_feature() -> None:
    drawn = [fuzz_banks.random_bank_case(seed) for seed in range(40)]
    assert all(p.banks for p in drawn)
    assert any(p.groups for p in drawn) and any(p.same_offsets for p in drawn)
    assert any(b.offset is not None and b.banks for p in drawn for b in p.buffers)
    assert {len(p.banks) for p in drawn} == {1, 2, 3} and any(p.capacity for p in drawn)
    assert {b.alignment for p in drawn for b in p.banks} > {1} and {
        b.cost for p in drawn for b in p.banks
    } > {0.0, 1.0}


def test_the_bank_checker_agrees_with_the_validator_on_corrupted_plans() -> None:
    for seed in range(40):
        problem = fuzz_banks.random_bank_case(seed)
        try:
            plan = solvers.solve(problem, "cpsat", time_limit_s=1)
        except (InfeasibleError, UnsupportedProblemError):
            continue
        assert fuzz_banks.check(problem, plan) == []
        for buffer in problem.buffers:  # each buffer moved onto another's offset, or to another bank
            for other in problem.buffers[:3]:
                offsets = dict(plan.offsets) | {buffer.id: plan.offsets[other.id]}
                pools = dict(plan.pools) | ({buffer.id: buffer.banks[-1]} if buffer.banks else {})
                for moved in (
                    Plan(offsets, plan.arena_sizes, "moved", pools=plan.pools),
                    Plan(plan.offsets, plan.arena_sizes, "moved", pools=pools),
                ):
                    assert bool(fuzz_banks.check(problem, moved)) == bool(validate(problem, moved)), (
                        problem.name,
                        buffer.id,
                    )


def test_the_exhaustive_search_finds_the_least_cost_that_fits() -> None:
    banks = (Bank("fast", 1, 16, cost=0.1), Bank("slow", 2, 64, cost=0.4))
    hot, cold = (
        Buffer("hot", 0, 4, 16, pool=1, banks=(1, 2), accesses=5),
        Buffer("cold", 0, 4, 16, pool=1, banks=(1, 2)),
    )
    assert (
        fuzz_banks.least_cost(Problem((hot, cold), banks=banks))
        == Fraction("0.1") * 80 + Fraction("0.4") * 16
    )
    pinned = tuple(dataclasses.replace(b, banks=()) for b in (hot, cold))
    assert fuzz_banks.least_cost(Problem(pinned, banks=banks)) is None  # 32 bytes live in 16
    # first-fit in every order: b must go under a for c to fit (a first leaves b no room below 16)
    ordered = (
        Buffer("a", 0, 2, 8, pool=1, banks=(1,)),
        Buffer("b", 1, 3, 8, pool=1, banks=(1,)),
        Buffer("c", 2, 4, 8, pool=1, banks=(1,)),
    )
    assert fuzz_banks.least_cost(Problem(ordered, banks=(Bank("m", 1, 16),))) == 0


def test_a_small_bank_fuzz_run_finds_no_invalid_plan_no_false_proof_and_no_crash() -> None:
    report = fuzz_banks.fuzz(problems=30, seed=2026, time_limit_s=1.0)
    assert report.counts["cpsat"]["tried"] == 30 and report.counts["cpsat"]["proven"] > 10
    bad = [report.total(k) for k in ("invalid", "false proof", "crash", "checker")]
    assert bad == [0, 0, 0, 0], fuzz_banks.table(report) + "\n" + "\n".join(map(str, report.failures))


@pytest.mark.slow
def test_a_bank_fuzz_run_finds_no_invalid_plan_no_false_proof_and_no_crash() -> None:
    report = fuzz_banks.fuzz(problems=300, seed=0, time_limit_s=1.0)
    bad = [report.total(k) for k in ("invalid", "false proof", "crash", "checker")]
    assert bad == [0, 0, 0, 0], fuzz_banks.table(report) + "\n" + "\n".join(map(str, report.failures))
