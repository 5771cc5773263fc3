"""MiniMalloc CSV and JSON: round trips, the shared benchmark files, and clear errors."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from helpers.minimalloc_files import KNOWN, minimalloc_dir

from memplan.errors import ProblemError
from memplan.generate import random_problem
from memplan.io import FormatError, load_json, read_minimalloc_csv, save_json, write_minimalloc_csv
from memplan.peak_bound import lower_bound
from memplan.plan import Plan
from memplan.problem import Buffer, BufferKind, ContiguousGroup, Problem, SameOffset
from memplan.solvers import solve
from memplan.validate import validate


def write(tmp_path: Path, text: str, name: str = "p.csv") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


# -- the shared benchmarks -------------------------------------------------------------


@pytest.mark.parametrize("name", list(KNOWN))
def test_benchmark_file_loads_with_the_readme_counts(name: str) -> None:
    buffers, bound = KNOWN[name].buffers, KNOWN[name].lower_bound
    problem = read_minimalloc_csv(minimalloc_dir() / name, capacity_from_name=True)
    assert len(problem.buffers) == buffers
    assert lower_bound(problem) == bound
    assert problem.capacity == int(name.split(".")[1])
    assert problem.name == name.removesuffix(".csv")


def test_capacity_is_read_from_the_name_only_when_asked() -> None:
    assert read_minimalloc_csv(minimalloc_dir() / "A.1048576.csv").capacity is None


def test_example_values_are_read_as_written() -> None:
    problem = read_minimalloc_csv(minimalloc_dir() / "input.12.csv")
    assert problem.buffers[1] == Buffer("b2", 3, 9, 4)


# -- CSV round trips -------------------------------------------------------------------


def test_csv_round_trip_keeps_lifetimes_sizes_alignment_and_fixed_offsets(tmp_path: Path) -> None:
    problem = random_problem(60, seed=4, alignment=(1, 8), with_fixed=True)
    path = tmp_path / "p.csv"
    write_minimalloc_csv(problem, path)
    assert read_minimalloc_csv(path).buffers == problem.buffers
    assert path.read_text().splitlines()[0] == "id,lower,upper,size,alignment,offset"


def test_plain_problem_writes_minimallocs_four_columns(tmp_path: Path) -> None:
    problem = read_minimalloc_csv(minimalloc_dir() / "input.12.csv")
    write_minimalloc_csv(problem, tmp_path / "out.csv")
    assert (tmp_path / "out.csv").read_text() == (minimalloc_dir() / "input.12.csv").read_text()


def test_solution_file_appends_the_plan_offsets(tmp_path: Path) -> None:
    problem = read_minimalloc_csv(minimalloc_dir() / "input.12.csv")
    plan = solve(problem, "bestfit")
    write_minimalloc_csv(problem, tmp_path / "sol.csv", plan)
    lines = (tmp_path / "sol.csv").read_text().splitlines()
    assert lines[0] == "id,lower,upper,size,offset"
    assert lines[1] == f"b1,0,3,4,{plan.offsets['b1']}"
    pinned = read_minimalloc_csv(tmp_path / "sol.csv")  # a solution read back pins every buffer
    assert {b.id: b.offset for b in pinned.buffers} == dict(plan.offsets)
    assert validate(problem, plan) == []


def test_csv_refuses_what_it_cannot_hold(tmp_path: Path) -> None:
    grouped = Problem((Buffer("p", 0, 2, 8), Buffer("m", 0, 1, 4)), (ContiguousGroup("p", (("m", 0),)),))
    pooled = Problem((Buffer("x", 0, 2, 8), Buffer("y", 0, 2, 8, pool=1)))
    shared = Problem((Buffer("x", 0, 2, 8), Buffer("y", 2, 4, 8)), same_offsets=(SameOffset(("x", "y")),))
    for problem, message in [(grouped, "groups"), (pooled, "pools"), (shared, "same-offset")]:
        with pytest.raises(ProblemError, match=message):
            write_minimalloc_csv(problem, tmp_path / "x.csv")


def test_solution_needs_every_offset(tmp_path: Path) -> None:
    problem = Problem((Buffer("x", 0, 2, 8), Buffer("y", 0, 2, 8)))
    with pytest.raises(ProblemError, match=r"no offset for \['y'\]"):
        write_minimalloc_csv(problem, tmp_path / "x.csv", Plan({"x": 0}, {0: 8}, "hand"))


# -- CSV dialect -----------------------------------------------------------------------


def test_inclusive_end_column_and_aliases(tmp_path: Path) -> None:
    path = write(tmp_path, "buffer_id,start,end,size\nx,0,3,8\n")
    assert read_minimalloc_csv(path).buffers == (Buffer("x", 0, 4, 8),)


def test_blank_offsets_alignment_and_lines_are_allowed(tmp_path: Path) -> None:
    path = write(tmp_path, "id,lower,upper,size,alignment,offset\nx,0,3,8,,\n\ny,1,2,4,4,8\n")
    assert read_minimalloc_csv(path).buffers == (Buffer("x", 0, 3, 8), Buffer("y", 1, 2, 4, 4, offset=8))


def test_gaps_at_either_end_trim_the_lifetime(tmp_path: Path) -> None:
    path = write(tmp_path, "id,lower,upper,size,gaps\nx,0,10,8,0-2 8-10\ny,0,10,8,\n")
    assert read_minimalloc_csv(path).buffers == (Buffer("x", 2, 8, 8), Buffer("y", 0, 10, 8))


BAD_CSV = [
    ("", r"p\.csv: empty file"),
    ("id,lower,size\nx,0,8\n", r"p\.csv:1: missing column 'upper'"),
    ("id,lower,upper,size,colour\n", r"p\.csv:1: unknown column 'colour'"),
    ("id,lower,upper,start,size\n", r"p\.csv:1: column 'lower' appears twice"),
    ("id,lower,upper,size\nx,0,2,8\ny,0,two,8\n", r"p\.csv:3: column 'upper' is not an integer: 'two'"),
    ("id,lower,upper,size\nx,0,2,8,9\n", r"p\.csv:2: 5 fields, but the header has 4"),
    ("id,lower,upper,size\nx,0,2,-8\n", r"p\.csv:2: buffer 'x' has size -8"),
    ("id,lower,upper,size\nx,3,3,8\n", r"p\.csv:2: buffer 'x' has upper 3 <= lower 3"),
    ("id,lower,upper,size\nx,0,2,8\n\nx,1,3,8\n", r"p\.csv:4: duplicate id 'x' \(first on line 2\)"),
    ("id,lower,upper,size\n,0,2,8\n", r"p\.csv:2: empty id"),
    (
        "id,lower,upper,size,alignment,offset\nx,0,2,8,4,6\n",
        r"p\.csv:2: buffer 'x': fixed offset 6 is not a multiple",
    ),
    ("id,lower,upper,size,gaps\nx,0,10,8,3-5@x\n", r"p\.csv:2: buffer 'x' has gap '3-5@x'; a gap is"),
    (
        "id,lower,upper,size,gaps\nx,0,10,8,2-5 4-6\n",
        r"p\.csv:2: buffer 'x' has overlapping gaps 2-5 and 4-6",
    ),
    ("id,lower,upper,size,gaps\nx,0,10,8,3-5@0:9\n", r"p\.csv:2: buffer 'x': gap \[3, 5\): window \[0, 9\]"),
    ("id,lower,upper,size,gaps\nx,0,10,8,0-10\n", r"p\.csv:2: buffer 'x' has gaps '0-10' covering its whole"),
    (  # issue 31, item 13: a reversed gap was dropped silently
        "id,lower,upper,size,gaps\nx,0,10,8,5-3\n",
        r"p\.csv:2: buffer 'x' has gap '5-3', which ends before it starts",
    ),
]


@pytest.mark.parametrize("text, message", BAD_CSV)
def test_malformed_csv_names_file_line_and_fault(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(FormatError, match=message):
        read_minimalloc_csv(write(tmp_path, text))


def test_capacity_from_a_name_without_one(tmp_path: Path) -> None:
    with pytest.raises(FormatError, match=r"p\.csv: capacity_from_name needs a file name like"):
        read_minimalloc_csv(write(tmp_path, "id,lower,upper,size\n"), capacity_from_name=True)


def test_missing_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(FormatError, match=r"nope\.csv: cannot read"):
        read_minimalloc_csv(tmp_path / "nope.csv")


# -- JSON ------------------------------------------------------------------------------


def test_json_round_trip_of_a_problem_with_everything(tmp_path: Path) -> None:
    problem = random_problem(
        80, seed=2, alignment=(1, 4), with_groups=True, with_fixed=True, with_same_offset=True, n_pools=2
    )
    labelled = Problem(
        problem.buffers
        + (Buffer("kv", 0, 5, 64, kind=BufferKind.MUTABLE_STATE, label="layer0.k_cache", pool=3),),
        problem.groups,
        problem.same_offsets,
        capacity=1 << 20,
        name="everything",
        pool_names={3: "cuda:0"},
    )
    assert labelled.groups and labelled.same_offsets and any(b.offset is not None for b in labelled.buffers)
    save_json(labelled, tmp_path / "p.json")
    loaded = load_json(tmp_path / "p.json")
    assert loaded == labelled and loaded.pool_label(3) == "mem_id 3 · cuda:0"


def test_json_round_trip_of_a_plan(tmp_path: Path) -> None:
    problem = random_problem(50, seed=1, n_pools=2)
    plan = solve(problem, "bestfit")
    save_json(plan, tmp_path / "plan.json")
    loaded = load_json(tmp_path / "plan.json")
    assert loaded == plan
    assert validate(problem, loaded) == []


def test_json_round_trip_keeps_how_far_a_plan_ran_past_its_limit(tmp_path: Path) -> None:
    plan = dataclasses.replace(
        solve(random_problem(20, seed=2), "bestfit"),
        seconds_over_limit=2.5,
        over_limit_stages={"validation": 2.0, "units": 0.5},
    )
    save_json(plan, tmp_path / "plan.json")
    loaded = load_json(tmp_path / "plan.json")
    assert loaded == plan and loaded.overran_in == "validation"
    data = json.loads((tmp_path / "plan.json").read_text())
    data["over_limit_stages"] = {"validation": -1}
    (tmp_path / "plan.json").write_text(json.dumps(data))
    with pytest.raises(
        ProblemError, match=r"over_limit_stages\['validation'\] must be a number of seconds >= 0"
    ):
        load_json(tmp_path / "plan.json")


@pytest.mark.parametrize(
    "text, message",
    [
        ('{\n"type": "problem",\n oops}', r"p\.json:3: not valid JSON"),
        ('{"type": "schedule", "version": 1}', r"p\.json: expected an object with \"type\""),
        ('{"type": "plan", "version": 7}', r"p\.json: unsupported version 7"),
        ('{"type": "plan", "version": 1, "solver": "x"}', r"p\.json: a plan is missing the field 'offsets'"),
        (
            '{"type": "problem", "version": 1, "name": "", "capacity": null, "groups": [], "same_offsets": [],'
            ' "buffers": [{"id": "x", "start": 0, "end": 2, "size": -1, "alignment": 1, "offset": null,'
            ' "pool": 0, "kind": "activation", "label": ""}]}',
            r"p\.json: invalid problem: buffer 'x': size must not be negative",
        ),
        (
            '{"type": "problem", "version": 1, "name": "", "capacity": null, "groups": [], "same_offsets": [],'
            ' "buffers": [], "pool_names": {"two": "cuda:0"}}',
            r"p\.json: invalid problem: the problem: \"pool_names\" has a key that is not a pool number",
        ),
    ],
)
def test_malformed_json_is_named(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(FormatError, match=message):
        load_json(write(tmp_path, text, "p.json"))


def test_json_nested_deeper_than_python_recurses_is_a_clear_error(tmp_path: Path) -> None:
    """Issue 31, item 13: 100,000 levels of nesting raised a bare RecursionError."""
    path = write(tmp_path, "[" * 100_000 + "]" * 100_000, "deep.json")
    with pytest.raises(FormatError, match=r"deep\.json: JSON nested too deeply to read"):
        load_json(path)


@pytest.mark.parametrize(
    "field, value, message",
    [
        ("offsets", [0, 8], r'"offsets" must be an object \{"buffer": offset\}, got \[0, 8\]'),
        ("arena_sizes", [16], r'"arena_sizes" must be an object \{"pool": bytes\}'),
        ("pools", "fast", r'"pools" must be an object \{"buffer": bank\}'),
    ],
)
def test_a_plan_whose_mappings_are_not_objects_is_a_clear_error(
    tmp_path: Path, field: str, value: object, message: str
) -> None:
    """Issue 31, item 13: a plan whose "offsets" was a list raised a bare AttributeError."""
    problem = Problem((Buffer("a", 0, 2, 8), Buffer("b", 1, 3, 8)))
    path = tmp_path / "plan.json"
    save_json(solve(problem, "bestfit"), path)
    data = json.loads(path.read_text())
    data[field] = value
    path.write_text(json.dumps(data))
    with pytest.raises(FormatError, match=r"plan\.json: invalid plan: the plan: " + message):
        load_json(path)


def test_a_problem_whose_buffer_is_not_an_object_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "problem.json"
    save_json(Problem((Buffer("a", 0, 2, 8),)), path)
    data = json.loads(path.read_text())
    data["buffers"] = [["a", 0, 2, 8]]
    path.write_text(json.dumps(data))
    with pytest.raises(FormatError, match=r'buffer 1 of "buffers" must be an object, got \[\'a\', 0, 2, 8\]'):
        load_json(path)
