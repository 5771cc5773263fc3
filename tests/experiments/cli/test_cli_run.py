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
    assert row["bands"] >= 2 and 0 < row["extra_macs"] <= 0.15 and " -> " in row["region"]
    from executorch.exir._serialize._program import deserialize_pte_binary

    def arena(path: Path) -> int:
        return sum(deserialize_pte_binary(path.read_bytes()).program.execution_plan[0].non_const_buffer_sizes)

    assert arena(tiled) == row["memplan_bytes"] < arena(plain)
