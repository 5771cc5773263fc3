"""Hostile inputs (issue 15): every one is refused up front with a message naming the file, line,
buffer or option, never a raw traceback from deep inside a reader or a solver."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from memplan import solvers
from memplan.errors import InfeasibleError, ProblemError, SolverOptionError
from memplan.experiments.cli import bench_csv as bench
from memplan.io import FormatError, load_json, read_minimalloc_csv
from memplan.problem import MAX_COORDINATE, Buffer, Problem

HEADER = b"id,lower,upper,size\n"


def write(tmp_path: Path, data: bytes, name: str = "p.csv") -> Path:
    path = tmp_path / name
    path.write_bytes(data)
    return path


BAD_CSV = [
    (HEADER + "x,0,2,\u00e9\n".encode("latin-1"), r"p\.csv:2: not UTF-8 text"),
    (bytes(range(128, 256)) * 4, r"p\.csv:1: not UTF-8 text"),
    (HEADER + b"x,0,2," + b"1" * 200_000 + b"\n", r"p\.csv:2: not readable as CSV: field larger"),
    (HEADER + b"x,0,2,8\ny,0,2,\x008\n", r"p\.csv:3: contains a NUL byte"),
    (
        HEADER + b"x,0,2,9223372036854775808\n",
        r"p\.csv:2: buffer 'x': size 9223372036854775808 is beyond 2\^62",
    ),
    (b"id,lower,upper,size,offset\nx,0,2,8,-9223372036854775809\n", r"p\.csv:2: buffer 'x': offset"),
    (HEADER + "x,0,2,\u0661\u0662\n".encode(), r"p\.csv:2: column 'size' is not an integer: '\u0661\u0662'"),
    (HEADER + b"x,0,2,1_000\n", r"p\.csv:2: column 'size' is not an integer: '1_000'"),
    (
        HEADER + b"x,0,2,4611686018427387904\ny,0,2,4611686018427387904\n",
        r"p\.csv: the buffers together need",
    ),
]


@pytest.mark.parametrize("data, message", BAD_CSV, ids=range(len(BAD_CSV)))
def test_a_hostile_csv_is_refused_naming_file_and_line(tmp_path: Path, data: bytes, message: str) -> None:
    with pytest.raises(FormatError, match=message):
        read_minimalloc_csv(write(tmp_path, data))


def test_a_utf8_byte_order_mark_is_accepted(tmp_path: Path) -> None:
    path = write(tmp_path, b"\xef\xbb\xbf" + HEADER + b"x,0,2,8\n")
    assert read_minimalloc_csv(path).buffers == (Buffer("x", 0, 2, 8),)


def _json_problem(**buffer_fields: str) -> bytes:
    fields = {"start": "0", "end": "2", "size": "16", "alignment": "1", "offset": "null"} | buffer_fields
    buffer = ", ".join(f'"{k}": {v}' for k, v in fields.items())
    return (
        '{"type": "problem", "version": 1, "name": "", "capacity": null, "groups": [], "same_offsets": [],'
        f' "buffers": [{{"id": "x", {buffer}, "pool": 0, "kind": "activation", "label": ""}}]}}'
    ).encode()


BAD_JSON = [
    (_json_problem(size="16.5"), r"buffer 'x': size must be an integer, got 16\.5"),
    (_json_problem(size="true"), r"buffer 'x': size must be an integer, got True"),
    (_json_problem(start="NaN"), r"p\.json: NaN is not a JSON number"),
    (_json_problem(end="Infinity"), r"p\.json: Infinity is not a JSON number"),
    (_json_problem(alignment="2.5"), r"buffer 'x': alignment must be an integer, got 2\.5"),
    (_json_problem(offset="false"), r"buffer 'x': offset must be an integer, got False"),
    (bytes(range(128, 256)), r"p\.json:1: not UTF-8 text"),
    (
        b'{"type": "plan", "version": 1, "solver": "x", "seconds": 0, "proven_optimal": false,'
        b' "lower_bound": 0, "status": "", "arena_sizes": {"0": 8}, "offsets": {"x": 1.5}}',
        r"p\.json: invalid plan: offset of 'x' must be an integer, got 1\.5",
    ),
]


@pytest.mark.parametrize("data, message", BAD_JSON, ids=range(len(BAD_JSON)))
def test_a_hostile_json_is_refused_naming_the_file(tmp_path: Path, data: bytes, message: str) -> None:
    with pytest.raises(FormatError, match=message):
        load_json(write(tmp_path, data, "p.json"))


def test_the_problem_model_takes_numpy_integers_but_not_floats_or_bools() -> None:
    assert Buffer("x", np.int64(0), np.int32(2), np.int64(8)).size == 8
    assert type(Buffer("x", np.int64(0), 2, np.int64(8)).size) is int
    for bad in (8.0, True, "8", float("nan")):
        with pytest.raises(ProblemError, match="buffer 'x': size must be an integer"):
            Buffer("x", 0, 2, bad)
    with pytest.raises(ProblemError, match="capacity must be an integer"):
        Problem((Buffer("x", 0, 2, 8),), capacity=8.5)
    with pytest.raises(ProblemError, match="beyond 2\\^62"):
        Buffer("x", 0, 2, MAX_COORDINATE + 1)


PROBLEM = Problem((Buffer("a", 0, 2, 8), Buffer("b", 1, 3, 8), Buffer("c", 0, 3, 4, alignment=4)))


@pytest.mark.parametrize("solver", solvers.available())
@pytest.mark.parametrize("limit", [float("nan"), float("inf"), -1.0, 0, True, "5"])
def test_a_bad_time_limit_is_refused_up_front(solver: str, limit: object) -> None:
    with pytest.raises(SolverOptionError, match=f"{solver}: time_limit_s must be"):
        solvers.solve(PROBLEM, solver, time_limit_s=limit)


@pytest.mark.parametrize("solver", ["cpsat", "milp"])
def test_a_nan_time_limit_is_refused_by_the_exact_solvers_called_directly(solver: str) -> None:
    with pytest.raises(SolverOptionError, match="time_limit_s must be a positive, finite"):
        solvers.get_solver(solver)(PROBLEM, time_limit_s=float("nan"))


@pytest.mark.parametrize("solver", ["bestfit", "skyline", "cpsat", "milp"])
def test_colliding_fixed_offsets_are_infeasible_for_every_solver(solver: str) -> None:
    problem = Problem((Buffer("a", 0, 2, 8, offset=0), Buffer("b", 1, 3, 8, offset=4), Buffer("c", 0, 3, 4)))
    with pytest.raises(InfeasibleError):
        solvers.solve(problem, solver)


def test_bench_csv_keeps_the_good_files_and_gives_bad_ones_an_error_row(tmp_path: Path) -> None:
    write(tmp_path, HEADER + b"x,0,2,8\ny,1,3,4\n", "good.csv")
    write(tmp_path, HEADER + "x,0,2,\u00e9\n".encode("latin-1"), "latin.csv")
    write(tmp_path, HEADER + b"x,0,2,9223372036854775808\n", "huge.csv")
    write(tmp_path, HEADER, "header_only.csv")
    df = bench.bench_csv(tmp_path, ["bestfit", "greedy"], time_limit_s=1).set_index(["file", "solver"])
    assert df.loc[("good.csv", "bestfit"), "arena_bytes"] == 12
    assert df.loc[("good.csv", "greedy"), "arena_over_lb"] == 1.0
    assert "not UTF-8" in df.loc[("latin.csv", "bestfit"), "error"]
    assert "buffer 'x'" in df.loc[("huge.csv", "greedy"), "error"]
    empty = df.loc[("header_only.csv", "bestfit")]
    assert (
        empty["arena_bytes"] == 0 and np.isnan(empty["arena_over_lb"]) and not isinstance(empty["error"], str)
    )


@pytest.mark.parametrize("reproducible", [False, True])
def test_cpsat_on_coordinates_its_model_cannot_hold_returns_the_heuristic_plan(reproducible: bool) -> None:
    k = 1 << 57  # the variable domains sum past int64: CP-SAT calls the model invalid
    problem = Problem(
        tuple(Buffer(f"b{i}", 0, 2, 3 * k) for i in range(4))
        + (Buffer("wall", 0, 2, k, offset=5 * k), Buffer("byte", 0, 2, 1))
    )
    plan = solvers.solve(problem, "cpsat", time_limit_s=2, reproducible=reproducible)
    assert plan.arena_size == solvers.solve(problem, "bestfit").arena_size and not plan.proven_optimal
    assert "CP-SAT refuses the model" in plan.status
