"""The fuzz script (experiments.fuzz): its own checker catches broken plans, and a run finds nothing."""

from __future__ import annotations

import dataclasses

import pytest

from memplan import solvers
from memplan.experiments.bench import fuzz
from memplan.plan import Plan
from memplan.problem import Buffer, Gap, Problem
from memplan.validate import validate


def test_every_kind_of_problem_is_drawn_and_valid() -> None:
    drawn = [fuzz.random_case(seed) for seed in range(5 * len(fuzz.KINDS))]
    assert [p.name.split("-", 2)[2] for p in drawn[: len(fuzz.KINDS)]] == list(fuzz.KINDS)

    def of(kind: str) -> list[Buffer]:
        return [b for p in drawn if p.name.endswith(f"-{kind}") for b in p.buffers]

    assert any(b.size == 0 for b in of("zero-size"))
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
