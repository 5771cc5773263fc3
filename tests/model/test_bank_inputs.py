"""Bank fields that are wrong are named where they are read: in the model and in JSON (issue 20, item 5)."""

from __future__ import annotations

import json
import math

import pytest

from memplan.errors import ProblemError
from memplan.io import FormatError, load_json
from memplan.plan import Plan
from memplan.problem import Bank, Buffer, Problem
from memplan.validate import ViolationKind, validate


@pytest.mark.parametrize(
    ("cost", "match"),
    [
        (True, "cost must be a number, got True"),
        ("1", "cost must be a number, got '1'"),
        (math.nan, r"cost must be between 0 and 1e\+06.*nan"),
        (math.inf, r"cost must be between 0 and 1e\+06.*inf"),
        (1e308, r"cost must be between 0 and 1e\+06.*1e\+308"),
        (10**5000, r"cost must be between 0 and 1e\+06 .*, got an integer of more than 60 digits"),
        (-0.5, r"cost must be between 0 and 1e\+06.*-0.5"),
    ],
    ids=["bool", "str", "nan", "inf", "1e308", "5000-digit int", "negative"],
)
def test_a_bank_cost_must_be_a_number_from_0_to_a_million(cost: object, match: str) -> None:
    with pytest.raises(ProblemError, match=rf"bank 'sram': {match}"):
        Bank("sram", 1, 64, cost=cost)  # type: ignore[arg-type]


def test_a_cost_given_as_an_integer_is_a_float() -> None:
    assert Bank("sram", 1, 64, cost=3).cost == 3.0 and isinstance(Bank("sram", 1, 64, cost=3).cost, float)


def test_a_buffer_fixed_where_no_bank_it_may_go_to_keeps_it_aligned_is_refused() -> None:
    banks = (Bank("a", 1, 64, alignment=8), Bank("b", 2, 64, alignment=16))
    with pytest.raises(
        ProblemError, match=r"'f' pins 'f' at offset 4, .*'a' needs a multiple of 8, 'b' .* 16"
    ):
        Problem((Buffer("f", 0, 2, 8, offset=4, pool=1, banks=(1, 2)),), banks=banks)
    ok = Problem((Buffer("f", 0, 2, 8, offset=8, pool=1, banks=(1, 2)),), banks=banks)  # bank a keeps 8
    assert ok.buffer("f").offset == 8


def test_the_validator_reports_a_fixed_buffer_in_a_bank_that_breaks_its_offset() -> None:
    banks = (Bank("a", 1, 64, alignment=8), Bank("b", 2, 64, alignment=16))
    problem = Problem((Buffer("f", 0, 2, 8, offset=8, pool=1, banks=(1, 2)),), banks=banks)
    assert validate(problem, Plan({"f": 8}, {1: 16, 2: 0}, "hand", pools={"f": 1})) == []
    (wrong,) = validate(problem, Plan({"f": 8}, {1: 0, 2: 16}, "hand", pools={"f": 2}))
    assert wrong.kind is ViolationKind.WRONG_BANK and "alignment 16" in wrong.message


def _problem_json(**changes: object) -> dict:
    data = {
        "type": "problem",
        "version": 1,
        "name": "p",
        "capacity": None,
        "buffers": [
            {"id": "a", "start": 0, "end": 2, "size": 8, "alignment": 1, "offset": None, "pool": 1}
            | {"kind": "activation", "label": "", "banks": [1, 2]}
        ],
        "banks": [
            {"name": "sram", "pool": 1, "capacity": 64, "cost": 0.0},
            {"name": "dram", "pool": 2, "capacity": 64},
        ],
        "groups": [],
        "same_offsets": [],
    }
    for key, value in changes.items():
        if key == "buffer_banks":
            data["buffers"][0]["banks"] = value  # type: ignore[index]
        elif key.startswith("bank_"):
            data["banks"][0][key[5:]] = value  # type: ignore[index]
        else:
            data[key] = value
    return data


@pytest.mark.parametrize(
    ("changes", "match"),
    [
        ({"banks": "sram"}, r'the problem: "banks" must be a list, got \'sram\''),
        (
            {"banks": ["sram"]},
            r'bank 1 of "banks" must be an object with name, pool and capacity, got \'sram\'',
        ),
        ({"banks": [{"name": "sram", "pool": 1}]}, r'bank 1 of "banks" lacks capacity'),
        ({"bank_name": 7}, r'bank 1 of "banks": name must be a string, got 7'),
        ({"bank_capacity": "64"}, r"bank 'sram': capacity must be an integer, got '64'"),
        ({"bank_cost": True}, r"bank 'sram': cost must be a number, got True"),
        ({"bank_cost": 1e308}, r"bank 'sram': cost must be between 0 and 1e\+06"),
        ({"bank_cost": "cheap"}, r"bank 'sram': cost must be a number, got 'cheap'"),
        ({"bank_alignment": [8]}, r"bank 'sram': alignment must be an integer, got \[8\]"),
        ({"buffer_banks": 5}, r'buffer \'a\': "banks" must be a list, got 5'),
        ({"buffer_banks": ["1"]}, r"buffer 'a': bank must be an integer, got '1'"),
    ],
)
def test_json_bank_fields_of_the_wrong_type_are_named(tmp_path, changes: dict, match: str) -> None:
    path = tmp_path / "p.json"
    path.write_text(json.dumps(_problem_json(**changes)))
    with pytest.raises(FormatError, match=rf"p\.json: invalid problem: {match}"):
        load_json(path)


def test_json_with_well_formed_banks_loads(tmp_path) -> None:
    path = tmp_path / "p.json"
    path.write_text(json.dumps(_problem_json()))
    problem = load_json(path)
    assert isinstance(problem, Problem) and [b.cost for b in problem.banks] == [0.0, 1.0]
