"""MiniMalloc interop (issue 15): zero-byte buffers and lifetime gaps (with `@` windows) in the problem
model, the validator, the bound, every solver and the CSV/JSON round trips."""

from __future__ import annotations

from pathlib import Path

import pytest

from memplan import solvers
from memplan.errors import InfeasibleError, ProblemError
from memplan.io import load_json, read_minimalloc_csv, save_json, write_minimalloc_csv
from memplan.peak_bound import lower_bound
from memplan.plan import Plan, arena_sizes_of
from memplan.problem import Buffer, ContiguousGroup, Gap, Problem
from memplan.validate import ViolationKind, validate

EXACT = ["cpsat", "milp"]


def _plan(problem: Problem, offsets: dict[str, int]) -> Plan:
    return Plan(offsets, arena_sizes_of(problem, offsets), "hand")


# -- zero-byte buffers ---------------------------------------------------------------------


def test_a_zero_byte_buffer_loads_from_csv_and_overlaps_nothing(tmp_path: Path) -> None:
    path = tmp_path / "z.csv"
    path.write_text("id,lower,upper,size\na,0,4,16\nz,1,3,0\n")
    problem = read_minimalloc_csv(path)
    assert problem.buffer("z").size == 0 and lower_bound(problem) == 16
    assert validate(problem, _plan(problem, {"a": 0, "z": 8})) == []  # inside a's bytes: no overlap


@pytest.mark.parametrize("solver", solvers.available())
def test_every_solver_plans_zero_byte_buffers_at_no_cost(solver: str) -> None:
    problem = Problem(
        (
            Buffer("a", 0, 4, 16),
            Buffer("z", 1, 3, 0, alignment=16),
            Buffer("b", 2, 6, 8),
            Buffer("empty", 0, 6, 0),
        )
    )
    plan = solvers.solve(problem, solver, time_limit_s=2)
    assert validate(problem, plan) == []
    if solver != "greedy":  # ExecuTorch's greedy rounds every size to the pool's alignment (16): 32
        assert plan.arena_size == 24 == lower_bound(problem)


# -- gaps ------------------------------------------------------------------------------------

# a is absent over [3, 6), exactly when b lives: they can share bytes.
ABSENT = Problem((Buffer("a", 0, 10, 8, gaps=(Gap(3, 6),)), Buffer("b", 3, 6, 8), Buffer("c", 0, 10, 4)))
# c holds only its low 2 bytes over [2, 8): d fits right above them.
WINDOW = Problem((Buffer("c", 0, 10, 4, gaps=(Gap(2, 8, (0, 2)),)), Buffer("d", 2, 8, 2)))


def test_the_validator_lets_buffers_share_bytes_only_during_a_gap() -> None:
    assert validate(ABSENT, _plan(ABSENT, {"a": 0, "b": 0, "c": 8})) == []
    clash = Problem((Buffer("a", 0, 10, 8, gaps=(Gap(3, 6),)), Buffer("b", 2, 6, 8)))
    kinds = [v.kind for v in validate(clash, _plan(clash, {"a": 0, "b": 0}))]
    assert kinds == [ViolationKind.OVERLAP]  # b starts at 2, a's gap only at 3
    assert validate(WINDOW, _plan(WINDOW, {"c": 0, "d": 2})) == []
    assert [v.kind for v in validate(WINDOW, _plan(WINDOW, {"c": 0, "d": 1}))] == [ViolationKind.OVERLAP]


def test_the_bound_counts_only_the_bytes_in_use() -> None:
    assert lower_bound(ABSENT) == 12
    assert lower_bound(WINDOW) == 4
    high_window = Problem((Buffer("w", 0, 4, 10, gaps=(Gap(1, 3, (6, 10)),)), Buffer("v", 1, 3, 6)))
    assert lower_bound(high_window) == 10


@pytest.mark.parametrize("solver", ["bestfit", "skyline", *EXACT])
@pytest.mark.parametrize("problem", [ABSENT, WINDOW], ids=["absent", "window"])
def test_solvers_use_the_bytes_a_gap_frees(solver: str, problem: Problem) -> None:
    plan = solvers.solve(problem, solver, time_limit_s=2)
    assert validate(problem, plan) == []
    assert plan.arena_size == lower_bound(problem)
    if solver in EXACT:
        assert plan.proven_optimal


def test_greedy_plans_a_buffer_with_gaps_over_its_whole_span() -> None:
    plan = solvers.solve(ABSENT, "greedy")
    assert validate(ABSENT, plan) == [] and plan.arena_size == 20  # like ExecuTorch, which has no gaps


@pytest.mark.parametrize("solver", ["bestfit", "skyline", *EXACT])
def test_a_window_above_the_offset_gives_a_valid_plan_and_no_false_proof(solver: str) -> None:
    """Solvers plan [0, high) for a window [low, high); the plan is valid, but a proof would not be one."""
    problem = Problem((Buffer("w", 0, 4, 10, gaps=(Gap(1, 3, (6, 10)),)), Buffer("v", 1, 3, 6)))
    assert validate(problem, _plan(problem, {"w": 0, "v": 0})) == []  # v under w's window: 10 bytes
    plan = solvers.solve(problem, solver, time_limit_s=2)
    assert validate(problem, plan) == []
    assert plan.arena_size == 10 or not plan.proven_optimal


def test_an_infeasibility_claim_with_a_window_above_the_offset_is_not_called_proven() -> None:
    problem = Problem((Buffer("w", 0, 4, 10, gaps=(Gap(1, 3, (6, 10)),)), Buffer("v", 1, 3, 6)), capacity=10)
    with pytest.raises(InfeasibleError, match="not proven infeasible"):
        solvers.solve(problem, "cpsat", time_limit_s=2)


def test_gaps_with_capacity_fit_where_a_gapless_reading_would_not() -> None:
    problem = Problem(ABSENT.buffers, capacity=12)
    for solver in ("bestfit", *EXACT):
        plan = solvers.solve(problem, solver, time_limit_s=2)
        assert validate(problem, plan) == [] and plan.arena_size <= 12


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda: Buffer("x", 0, 10, 8, gaps=(Gap(5, 12),)), r"buffer 'x': gap \[5, 12\) must be"),
        (lambda: Buffer("x", 0, 10, 8, gaps=(Gap(4, 6), Gap(5, 7))), r"buffer 'x': gap \[5, 7\) must be"),
        (lambda: Buffer("x", 0, 10, 8, gaps=(Gap(4, 4),)), r"buffer 'x': gap \[4, 4\) must be non-empty"),
        (lambda: Buffer("x", 0, 10, 8, gaps=(Gap(4, 6, (2, 9)),)), r"window \[2, 9\] is not within"),
        (
            lambda: Problem(
                (Buffer("p", 0, 10, 8, gaps=(Gap(4, 6),)), Buffer("m", 0, 2, 4)),
                (ContiguousGroup("p", (("m", 0),)),),
            ),
            r"group parent cannot have lifetime gaps",
        ),
    ],
)
def test_bad_gaps_are_named(make, message: str) -> None:
    with pytest.raises(ProblemError, match=message):
        make()


# -- files -----------------------------------------------------------------------------------


def test_minimallocs_gaps_column_with_windows_and_hints_loads_as_minimalloc_reads_it(tmp_path: Path) -> None:
    """The rows of MiniMalloc's own converter test (FromCsvWithGaps), plus its `hint` column."""
    path = tmp_path / "g.csv"
    path.write_text(
        "start,size,buffer,upper,alignment,hint,gaps\n6,18,1,12,2,-1,7-9 \n5,15,0,10,1,0,9-11 12-14@2:13\n"
    )
    one, zero = read_minimalloc_csv(path).buffers
    assert one == Buffer("1", 6, 12, 18, alignment=2, gaps=(Gap(7, 9),))
    assert zero == Buffer("0", 5, 9, 15)  # 9-11 cuts the end of [5, 10); 12-14 lies outside it


def test_gaps_and_zero_sizes_survive_csv_and_json_round_trips(tmp_path: Path) -> None:
    problem = Problem(
        (
            Buffer("a", 0, 10, 8, alignment=4, gaps=(Gap(2, 3), Gap(5, 7, (0, 4)), Gap(8, 9, (2, 6)))),
            Buffer("z", 1, 4, 0),
            Buffer("b", 3, 6, 8),
        )
    )
    write_minimalloc_csv(problem, tmp_path / "p.csv")
    assert "a,0,10,8,4,2-3 5-7@0:4 8-9@2:6" in (tmp_path / "p.csv").read_text()
    assert read_minimalloc_csv(tmp_path / "p.csv").buffers == problem.buffers
    save_json(problem, tmp_path / "p.json")
    assert load_json(tmp_path / "p.json") == problem
    plan = solvers.solve(problem, "cpsat", time_limit_s=2)
    save_json(plan, tmp_path / "plan.json")
    assert validate(problem, load_json(tmp_path / "plan.json")) == []


@pytest.mark.parametrize("solver", EXACT)
def test_a_window_above_the_offset_gives_no_proof_even_when_the_solver_is_called_directly(
    solver: str,
) -> None:
    problem = Problem((Buffer("w", 0, 4, 10, gaps=(Gap(1, 3, (6, 10)),)), Buffer("v", 1, 3, 6)))
    plan = solvers.get_solver(solver)(problem, time_limit_s=2)
    assert validate(problem, plan) == []
    assert plan.arena_size == 10 or not plan.proven_optimal
