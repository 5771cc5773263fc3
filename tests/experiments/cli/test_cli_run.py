"""`memplan run`: the script runs as `python script.py` / `python -m module` would (its arguments, its
files, its exit code), every program it builds is memplan's, and a table per program follows."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from helpers.cli import run_cli

SCRIPT = """
import sys, torch
from executorch.exir import to_edge, ExecutorchBackendConfig
from executorch.exir.passes import MemoryPlanningPass

class Three(torch.nn.Module):
    def forward(self, x):
        return torch.cat([x.relu(), x.sigmoid(), x.tanh()], 0) * 2

program = to_edge(torch.export.export(Three(), (torch.randn(4, 8),))).to_executorch(
    ExecutorchBackendConfig(memory_planning_pass=MemoryPlanningPass(alloc_graph_input=False)))
with open(sys.argv[1], "wb") as f:
    f.write(program.buffer)
print("wrote", sys.argv[1])
if len(sys.argv) > 2:
    sys.exit(int(sys.argv[2]))
"""


@pytest.fixture
def script(tmp_path: Path) -> Path:
    path = tmp_path / "export_three.py"
    path.write_text(SCRIPT)
    return path


def test_script_keeps_its_arguments_output_and_exit_code(
    script: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "three.pte"
    code, stdout, stderr = run_cli(
        ["run", "--solver", "bestfit", "--report", str(tmp_path / "rep"), "--", str(script), str(out), "3"],
        capsys,
    )
    assert code == 3
    assert f"wrote {out}" in stdout
    assert "memplan: program 1 (forward)" in stderr and "| forward" in stderr
    rows = json.loads((tmp_path / "rep" / "report.json").read_text())[0]["rows"]
    (row,) = rows
    assert row["planned_by"] == "memplan" and row["memplan_bytes"] <= row["stock_bytes"]
    from executorch.exir._serialize._program import deserialize_pte_binary

    plan = deserialize_pte_binary(out.read_bytes()).program.execution_plan[0]
    assert sum(plan.non_const_buffer_sizes) == row["memplan_bytes"]  # the file the script wrote is memplan's
    page = (tmp_path / "rep" / "program_1.html").read_text()
    assert "plotly" in page and "forward" in page  # the interactive report of the program built


def test_module_form_and_a_script_that_raises(
    script: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))
    code, stdout, _ = run_cli(["run", "--solver", "bestfit", "-m", "export_three", "m.pte"], capsys)
    assert code == 0 and (tmp_path / "m.pte").exists() and "wrote m.pte" in stdout
    (tmp_path / "broken.py").write_text("raise RuntimeError('the script fails')\n")
    code, _, stderr = run_cli(["run", "--", "broken.py"], capsys)
    assert code == 1
    assert "RuntimeError: the script fails" in stderr and "built no ExecuTorch program" in stderr


def test_usage_errors_are_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, stderr = run_cli(["run", "--solver", "bestfit"], capsys)
    assert code == 2 and "no script or module to run" in stderr
    code, _, stderr = run_cli(["run", "--", "no_such_script.py"], capsys)
    assert code == 2 and "no such script" in stderr
    code, _, stderr = run_cli(["run", "--solver", "nosuchsolver", "--", __file__], capsys)
    assert code == 2 and "nosuchsolver" in stderr and "Traceback" not in stderr


TILED_SCRIPT = """
import sys, torch
from torch import nn
from executorch.exir import to_edge_transform_and_lower, ExecutorchBackendConfig
from executorch.exir.passes import MemoryPlanningPass

torch.manual_seed(0)
model = nn.Sequential(nn.Conv2d(3, 24, 3, 2, 1), nn.ReLU(), nn.Conv2d(24, 24, 3, 1, 1, groups=24), nn.ReLU(),
                      nn.Conv2d(24, 4, 1)).eval()
program = torch.export.export(model, (torch.randn(1, 3, 40, 40),))
built = to_edge_transform_and_lower(program).to_executorch(
    ExecutorchBackendConfig(memory_planning_pass=MemoryPlanningPass(alloc_graph_input=False)))
with open(sys.argv[1], "wb") as f:
    f.write(built.buffer)
"""


def test_tiling_tiles_what_the_script_lowers_and_the_table_shows_the_region(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    script = tmp_path / "export_cnn.py"
    script.write_text(TILED_SCRIPT)
    plain, tiled = tmp_path / "plain.pte", tmp_path / "tiled.pte"
    assert run_cli(["run", "--solver", "bestfit", "--", str(script), str(plain)], capsys)[0] == 0
    code, _, stderr = run_cli(
        ["run", "--solver", "bestfit", "--tiling", "--max-extra-macs", "0.15", "--report", str(tmp_path / "r"),
         "--", str(script), str(tiled)],
        capsys,
    )  # fmt: skip
    assert code == 0
    header = next(line for line in stderr.splitlines() if line.startswith("| method"))
    assert [c.strip() for c in header.strip("|").split("|")][-3:] == ["region", "bands", "extra_macs"]
    (row,) = json.loads((tmp_path / "r" / "report.json").read_text())[0]["rows"]
    assert row["bands"] >= 2 and 0 <= row["extra_macs"] <= 0.15 and " -> " in row["region"]
    from executorch.exir._serialize._program import deserialize_pte_binary

    def arena(path: Path) -> int:
        return sum(deserialize_pte_binary(path.read_bytes()).program.execution_plan[0].non_const_buffer_sizes)

    assert arena(tiled) == row["memplan_bytes"] < arena(plain)


@pytest.mark.parametrize("flag", ["-h", "--help"])
def test_help_prints_run_help_and_exits_0(flag: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, stdout, stderr = run_cli(["run", flag], capsys)
    assert code == 0 and stderr == ""
    assert stdout.startswith("usage: memplan run") and "--quiet" in stdout and "--slice-noop" in stdout


@pytest.mark.parametrize("interpreter", ["python", "python3", sys.executable])
def test_an_interpreter_as_first_word_runs_the_script_it_names(
    interpreter: str, script: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "three.pte"
    code, stdout, stderr = run_cli(
        ["run", "--solver", "bestfit", "--", interpreter, str(script), str(out)], capsys
    )
    assert code == 0 and f"wrote {out}" in stdout and out.stat().st_size > 0
    assert "| forward" in stderr


def test_an_interpreter_with_m_runs_the_module_and_interpreter_options_are_refused(
    script: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))
    code, stdout, _ = run_cli(
        ["run", "--solver", "bestfit", "--", "python3", "-m", "export_three", "m.pte"], capsys
    )
    assert code == 0 and "wrote m.pte" in stdout
    code, _, stderr = run_cli(["run", "--", "python", "-u", str(script)], capsys)
    assert code == 2 and stderr.count("\n") == 1
    assert "'python -u': memplan runs the script in its own Python" in stderr


def test_quiet_prints_no_table_but_names_a_method_the_stock_pass_planned(
    script: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from memplan.planner import pass_

    code, stdout, stderr = run_cli(
        ["run", "--quiet", "--solver", "bestfit", str(script), str(tmp_path / "q.pte")], capsys
    )
    assert code == 0 and "wrote" in stdout
    assert "| forward" not in stderr and "planned by" not in stderr

    def failing(self, *args):
        raise RuntimeError("forced failure for the test")

    monkeypatch.setattr(pass_, "plan_graph", failing)
    code, _, stderr = run_cli(["run", "--quiet", "--", str(script), str(tmp_path / "s.pte")], capsys)
    assert code == 0 and "| forward" not in stderr
    assert "memplan: program 1 (forward): forward planned by stock: " in stderr
    assert "forced failure for the test" in stderr


def test_plan_spellings_of_the_levers_work_on_run_as_the_no_flags_do(
    script: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    levers = {}
    for flags in (
        [],
        ["--cat-fusion", "off", "--state-in-place", "off", "--slice-noop", "off"],
        ["--no-cat-fusion", "--no-state-in-place"],
    ):
        rep = tmp_path / f"rep{len(levers)}"
        code, _, _ = run_cli(
            [
                "run",
                "--solver",
                "bestfit",
                *flags,
                "--report",
                str(rep),
                str(script),
                str(tmp_path / "x.pte"),
            ],
            capsys,
        )
        assert code == 0
        (row,) = json.loads((rep / "report.json").read_text())[0]["rows"]
        levers[" ".join(flags)] = row["levers"]
    assert "cat fusion" in levers[""]
    assert levers["--cat-fusion off --state-in-place off --slice-noop off"] == ""
    assert "cat fusion" not in levers["--no-cat-fusion --no-state-in-place"]
    code, _, stderr = run_cli(["run", "--cat-fusion", "maybe", str(script)], capsys)
    assert code == 2 and "--cat-fusion" in stderr and "Traceback" not in stderr


def test_a_wrong_guess_of_the_input_holder_is_searched_and_lowered_again(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The search runs when the script lowers, before its pass exists, and guesses the input is in the
    arena (`--tiling-input arena`, the default); the script's pass leaves it to the caller, so
    `to_executorch` tiles and lowers again: the same program as `--tiling-input caller` gets at once.
    A script that transforms the lowered programs before `to_executorch` keeps the first tiling, and
    the table says which flag searches as it plans."""
    rows = {}
    transformed = TILED_SCRIPT.replace(").to_executorch(", ").transform([]).to_executorch(")
    for name, text, holder in (
        ("guess", TILED_SCRIPT, "arena"),
        ("told", TILED_SCRIPT, "caller"),
        ("transformed", transformed, "arena"),
    ):
        script = tmp_path / f"{name}.py"
        script.write_text(text)
        code, _, stderr = run_cli(
            ["run", "--solver", "bestfit", "--tiling", "--tiling-input", holder, "--report", str(tmp_path / name),
             "--", str(script), str(tmp_path / f"{name}.pte")],
            capsys,
        )  # fmt: skip
        assert code == 0, stderr
        (rows[name],) = json.loads((tmp_path / name / "report.json").read_text())[0]["rows"]
    guess, told, transformed_row = rows["guess"], rows["told"], rows["transformed"]
    assert "searched again" in guess["region"] and "searched again" not in told["region"], rows
    assert guess["region"].split(";")[0] == told["region"] and guess["bands"] == told["bands"], rows
    assert guess["memplan_bytes"] == told["memplan_bytes"], rows
    assert "--tiling-input caller" in transformed_row["region"], transformed_row
    assert (
        transformed_row["region"].split(";")[0] != told["region"] or transformed_row["bands"] != told["bands"]
    )
    assert told["memplan_bytes"] <= transformed_row["memplan_bytes"], rows
    code, _, stderr = run_cli(["run", "--tiling-input", "caller", "--", str(tmp_path / "told.py")], capsys)
    assert code == 2 and "--tiling-input is an option of --tiling" in stderr
