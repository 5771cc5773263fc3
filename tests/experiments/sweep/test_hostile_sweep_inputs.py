"""Hostile sweep inputs (issue 20, item 5): memory maps and output folders refused before any run.

A map that parsed but could not be planned made every run an error row and the sweep exit 0; a
directory where the sweep writes a file ended it in a traceback after every run was done.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from memplan.errors import UsageError
from memplan.experiments.cli import main as cli
from memplan.experiments.sweep import run as sweep
from memplan.planner.memory.bank_maps import parse_memory_map

BAD_MAPS = {
    "arabic-indic digits": (
        "sram:\u0661\u0662KiB",
        r"bank 'sram': size '\u0661\u0662KiB' is not a number \(ASCII digits\)",
    ),
    "superscript digit": (
        "sram:\u00b2KiB",
        r"bank 'sram': size '\u00b2KiB' is not a number \(ASCII digits\)",
    ),
    "10^30 bytes": ("sram:1" + "0" * 30 + "B", r"bank 'sram': size '1000.* is beyond 2\^62 bytes"),
    "5000 digits": ("sram:" + "9" * 5000, r"bank 'sram': size '99999.*\(5,000 characters\) is beyond 2\^62"),
    "2^62 GiB": ("sram:4611686018427387904GiB", r"bank 'sram': size .* is beyond 2\^62 bytes"),
    "alignment 3": ("sram:12KiB:3", r"bank 'sram': alignment '3' is not a power of two"),
    "alignment 0": ("tcm:512,sram:12KiB:0", r"bank 'sram': alignment '0' is not a power of two"),
    "superscript alignment": ("sram:12KiB:\u00b2", r"bank 'sram': alignment '\u00b2' is not a power of two"),
}


@pytest.mark.parametrize("spec,message", BAD_MAPS.values(), ids=list(BAD_MAPS))
def test_a_bad_memory_map_is_refused_at_parse_time_naming_the_map_and_bank(spec: str, message: str) -> None:
    with pytest.raises(ValueError, match=r"memory map '.*: " + message):
        parse_memory_map(spec)


def test_good_maps_parse_with_spaces_around_fields_and_units() -> None:
    target = parse_memory_map(" tcm : 512 : 64 , sram:12 KiB,dram:4GiB:1")
    assert [(b.name, b.size, b.alignment) for b in target.banks] == [
        ("tcm ", 512, 64),
        ("sram", 12 * 1024, None),
        ("dram", 4 * 1024**3, 1),
    ]


@pytest.mark.parametrize("spec", ["sram:\u0661\u0662KiB", "sram:" + "1" + "0" * 30 + "B", "sram:12KiB:3"])
def test_the_sweep_command_refuses_a_bad_map_in_one_line_with_exit_2(
    spec, capsys, tmp_path, monkeypatch
) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as exit_:
        cli.main(["sweep", "--models", "cat_seed", "--memory-map", spec, "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert exit_.value.code == 2
    assert err.count("\n") == 1 and err.startswith("memplan: error: memory map ")
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("name", ["runs.jsonl", "results.csv", "summary.md", "compare.png"])
def test_a_directory_where_the_sweep_writes_a_file_is_refused_before_any_run(
    name: str, tmp_path: Path
) -> None:
    (tmp_path / name).mkdir()
    with pytest.raises(UsageError, match=rf"{name}' is not a file .* the sweep writes {name} there"):
        sweep.sweep(out=tmp_path, models=["cat_seed"], solvers=["greedy"], progress=False, jobs=1)
    assert sorted(p.name for p in tmp_path.iterdir()) == [name]  # no run was recorded


def test_the_sweep_command_refuses_a_runs_jsonl_directory_with_exit_2(capsys, tmp_path: Path) -> None:
    (tmp_path / "runs.jsonl").mkdir()
    with pytest.raises(SystemExit) as exit_:
        cli.main(["sweep", "--models", "cat_seed", "--solvers", "greedy", "--out", str(tmp_path), "--quiet"])
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and err.count("\n") == 1
    assert "runs.jsonl' is not a file" in err and "Traceback" not in err
