"""Integers longer than Python converts (4,300 digits) in every place a reader takes one (issue 20, item 5).

Each is a FormatError naming the file (and line and buffer), never the bare ValueError `int()` raises,
and `bench-csv` keeps the other files' rows when one of them holds such a number.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memplan.experiments.cli import bench_csv as bench
from memplan.io import FormatError, load_json, read_minimalloc_csv

HUGE = "9" * 5000  # past sys.get_int_max_str_digits(): int(HUGE) raises ValueError


def _write(tmp_path: Path, text: str, name: str = "p.csv") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


CSV = {
    "size": (
        f"id,lower,upper,size\nx,0,2,{HUGE}\n",
        r"p\.csv:2: buffer 'x': size 99999999999999999999\.\.\. \(5,000 digits\) is beyond 2\^62",
    ),
    "lower": (f"id,lower,upper,size\nx,-{HUGE},2,8\n", r"p\.csv:2: buffer 'x': lower .* is beyond 2\^62"),
    "offset": (
        f"id,lower,upper,size,offset\nx,0,2,8,{HUGE}\n",
        r"p\.csv:2: buffer 'x': offset .* is beyond 2\^62",
    ),
    "gap": (
        f"id,lower,upper,size,gaps\nx,0,9,8,1-{HUGE}\n",
        r"p\.csv:2: buffer 'x' has gap '1-99999.*is beyond 2\^62",
    ),
    "gap window": (
        f"id,lower,upper,size,gaps\nx,0,9,8,1-2@0:{HUGE}\n",
        r"p\.csv:2: buffer 'x' has gap .*beyond 2\^62",
    ),
}


@pytest.mark.parametrize("text,message", CSV.values(), ids=list(CSV))
def test_a_5000_digit_integer_in_a_csv_is_a_format_error_naming_file_line_and_buffer(
    tmp_path: Path, text: str, message: str
) -> None:
    with pytest.raises(FormatError, match=message):
        read_minimalloc_csv(_write(tmp_path, text))


def test_a_capacity_past_2_62_in_a_file_name_is_a_format_error(tmp_path: Path) -> None:
    path = tmp_path / f"A.{'9' * 240}.csv"  # a file name stops at 255 bytes, far below int()'s limit
    path.write_text("id,lower,upper,size\nx,0,2,8\n")
    with pytest.raises(FormatError, match=r"capacity_from_name needs .* from 1 to 2\^62"):
        read_minimalloc_csv(path, capacity_from_name=True)


def test_a_5000_digit_integer_in_json_is_a_format_error_naming_the_file(tmp_path: Path) -> None:
    problem = {
        "type": "problem",
        "version": 1,
        "name": "p",
        "capacity": None,
        "buffers": [],
        "groups": [],
        "same_offsets": [],
    }
    text = json.dumps(problem).replace('"capacity": null', f'"capacity": {HUGE}')
    path = _write(tmp_path, text, "p.json")
    with pytest.raises(
        FormatError, match=r"p\.json: the integer 99999999999999999999\.\.\. \(5,000 digits\) is beyond 2\^62"
    ):
        load_json(path)


def test_bench_csv_keeps_the_good_files_rows_beside_a_5000_digit_one(tmp_path: Path) -> None:
    _write(tmp_path, "id,lower,upper,size\nx,0,2,8\ny,1,3,8\n", "good.csv")
    _write(tmp_path, f"id,lower,upper,size\nx,0,2,{HUGE}\n", "huge.csv")
    _write(tmp_path, f"id,lower,upper,size,gaps\nx,0,9,8,1-{HUGE}\n", "huge_gap.csv")
    df = bench.bench_csv(tmp_path, ["greedy"], 1.0).set_index("file")
    assert df.loc["good.csv", "arena_bytes"] == 16 and df["error"].isna()["good.csv"]
    for name in ("huge.csv", "huge_gap.csv"):
        assert "beyond 2^62" in df.loc[name, "error"], df.loc[name, "error"]
