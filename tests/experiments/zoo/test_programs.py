"""Your own model everywhere: `file.py:factory` and `.pt2` specs on every CLI path, the public helper,
and `memplan inspect` / `memplan replan` on the command line. The model is defined only in this test.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
import torch
from helpers.cli import run_cli as _run
from helpers.executorch_programs import LINEAR_WIDTHS, LinearChain, stock_pte

import memplan
from memplan.experiments.sweep import run_log
from memplan.experiments.sweep import table as sweep_table
from memplan.experiments.zoo import programs
from memplan.experiments.zoo.models.common import zoo_recipe

MODEL_SOURCE = textwrap.dedent(
    """
    import torch
    from torch import nn


    class ThreeBranch(nn.Module):
        def __init__(self):
            super().__init__()
            self.a = nn.Conv2d(3, 8, 3, padding=1)
            self.b = nn.Conv2d(3, 8, 1)
            self.c = nn.Conv2d(3, 8, 5, padding=2)
            self.head = nn.Conv2d(24, 4, 1)

        def forward(self, x):
            return self.head(torch.cat([self.a(x), self.b(x), self.c(x)], dim=1))


    def make():
        torch.manual_seed(0)
        return ThreeBranch(), (torch.randn(1, 3, 12, 12),)


    def not_a_model():
        return 42
    """
)


@pytest.fixture(scope="module")
def model_file(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("user") / "mymodels.py"
    path.write_text(MODEL_SOURCE)
    return path


def test_plan_and_plot_take_a_factory_spec(model_file, tmp_path, capsys):
    spec = f"{model_file}:make"
    code, out, err = _run(["plan", spec, "--solver", "bestfit", "--plot", str(tmp_path / "p.pdf")], capsys)
    assert code == 0, err
    assert "forward" in out and "|" in out  # the Markdown table
    assert (tmp_path / "p.pdf").read_bytes().startswith(b"%PDF")
    code, _, err = _run(["plot", spec, "--solver", "greedy", "--out", str(tmp_path / "g.svg")], capsys)
    assert code == 0, err
    assert (tmp_path / "g.svg").stat().st_size > 1000


def test_sweep_takes_a_factory_spec_and_checks_it(model_file, tmp_path, capsys):
    spec = f"{model_file}:make"
    out = tmp_path / "run"
    code, _, err = _run(
        [
            "sweep",
            "--models",
            spec,
            "--solvers",
            "greedy,bestfit",
            "--out",
            str(out),
            "--jobs",
            "1",
            "--check",
            "--quiet",
        ],
        capsys,
    )
    assert code == 0, err
    df = sweep_table.table(run_log.RunLog(out))
    assert set(df["model"]) == {spec} and set(df["solver"]) == {"greedy", "bestfit"}
    assert df["error"].isna().all(), df["error"].tolist()
    assert df["matches_eager"].all()
    assert (df["arena_bytes"] <= df["stock_arena_bytes"]).all()


def test_a_factory_file_imports_the_module_beside_it_as_a_script_would(tmp_path, capsys, monkeypatch):
    """`memplan diff base.py:make variants.py:make_wide` from another folder: variants.py's
    `from <base> import ...` finds the file beside it, and sys.path is as it was afterwards."""
    folder = tmp_path / "models"
    folder.mkdir()
    (folder / "decoders_beside.py").write_text(MODEL_SOURCE)
    (folder / "decoders_variant.py").write_text(
        "from decoders_beside import make\n\n\ndef make_again():\n    return make()\n"
    )
    monkeypatch.chdir(tmp_path)
    before = list(__import__("sys").path)
    code, out, err = _run(
        [
            "diff",
            "models/decoders_beside.py:make",
            "models/decoders_variant.py:make_again",
            "--solver",
            "bestfit",
        ],
        capsys,
    )
    assert code == 0, err
    assert (
        out == "# decoders_beside:make -> decoders_variant:make_again\n"
        "method forward: 6 tensors matched by what computes them, 0 new, 0 gone\n"
        "no method, arena or tensor changed size\n"
    )
    assert __import__("sys").path == before


def test_bad_specs_exit_2_with_the_reason(model_file, capsys):
    cases = {
        f"{model_file}:mkae": "has no function 'mkae' (did you mean 'make'?)",
        f"{model_file}:not_a_model": "returned a int",
        "nowhere.py:make": "no such file",
        "resnt8": "did you mean 'resnet8'?",
    }
    for spec, message in cases.items():
        code, _, err = _run(["plan", spec, "--solver", "bestfit"], capsys)
        assert code == 2 and message in err, (spec, err)
        assert err.count("\n") == 1


def test_a_pt2_round_trip_plans_runs_and_matches_eager(tmp_path, capsys):
    torch.manual_seed(0)
    module = torch.nn.Sequential(torch.nn.Linear(8, 32), torch.nn.ReLU(), torch.nn.Linear(32, 8)).eval()
    example = (torch.randn(2, 8),)
    path = tmp_path / "mlp.pt2"
    torch.export.save(torch.export.export(module, example), str(path))
    model = programs.load(str(path))
    assert torch.equal(model.methods["forward"][1][0], example[0])
    planned = memplan.plan_model(str(path), "bestfit", check=True)
    assert planned.matches_eager is True
    assert planned.summary.loc[0, "arena_bytes"] <= planned.summary.loc[0, "stock_arena_bytes"]
    code, out, err = _run(["plan", str(path), "--solver", "bestfit"], capsys)
    assert code == 0 and "forward" in out, err


def test_the_public_helper_plans_a_module_and_writes_a_pte_that_runs(tmp_path):
    namespace: dict = {}
    exec(MODEL_SOURCE, namespace)  # noqa: S102 - the test's own model source
    module, example = namespace["make"]()
    planned = memplan.plan_model(module, "cpsat", example_inputs=example, time_limit_s=2, check=True)
    row = planned.summary.iloc[0]
    assert planned.methods == ["forward"] and planned.matches_eager
    assert row["arena_bytes"] < row["stock_arena_bytes"]  # cat fusion: the three branches land in place
    assert row["saving_vs_stock"] > 0
    assert "PlannedModel('model'" in repr(planned) and "<table" in planned._repr_html_()
    pte = planned.save(tmp_path / "own.pte")
    from memplan.experiments.zoo import runtime

    (out,) = runtime.run_pte(pte.read_bytes(), [("forward", example)])
    torch.testing.assert_close(out[0], module(*example), atol=1e-4, rtol=1e-4)


def test_inspect_and_replan_on_the_command_line(tmp_path, capsys):
    torch.manual_seed(0)
    from memplan.planner.pte.program import read_program

    src = tmp_path / "stock.pte"
    src.write_bytes(
        stock_pte(programs.from_module(LinearChain(LINEAR_WIDTHS), (torch.randn(2, 16),), **zoo_recipe()))
    )
    code, out, err = _run(["inspect", str(src), "--out", str(tmp_path / "i.png")], capsys)
    assert code == 0, err
    assert "lower bound for this instruction order" in out and "written_by" in out
    assert (tmp_path / "i.png").stat().st_size > 1000
    dst = tmp_path / "re.pte"
    code, out, err = _run(["replan", str(src), "--out", str(dst), "--solver", "cpsat", "--check"], capsys)
    assert code == 0, err
    assert "outputs identical" in err and "before_bytes" in out
    before, after = (read_program(p).methods["forward"] for p in (src, dst))
    assert after.planned_bytes == before.lower_bound < before.planned_bytes
    code, _, err = _run(["inspect", str(tmp_path / "nope.pte")], capsys)
    assert code == 2 and "cannot read" in err
    code, _, err = _run(["replan", str(src), "--out", str(src)], capsys)
    assert code == 2 and "--out must differ" in err
