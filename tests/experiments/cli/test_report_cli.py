"""`memplan report` and `memplan diff` from the command line, on `.pte` files and on models."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers.cli import run_cli
from helpers.executorch_programs import LINEAR_WIDTHS, LinearChain, stock_pte

from memplan.experiments.zoo.programs import from_module

GROWN = [16, 48, 192, 96, 96]  # the second linear's output doubles


def _pte(tmp_path: Path, name: str, widths: list[int]) -> Path:
    import torch

    torch.manual_seed(0)
    path = tmp_path / f"{name}.pte"
    path.write_bytes(stock_pte(from_module(LinearChain(widths), (torch.randn(2, 16),), name=name)))
    return path


@pytest.fixture(scope="module")
def ptes(tmp_path_factory) -> tuple[Path, Path]:
    folder = tmp_path_factory.mktemp("pte")
    return _pte(folder, "before", LINEAR_WIDTHS), _pte(folder, "after", GROWN)


def test_diff_names_the_tensor_that_grew_and_fails_past_max_growth(ptes, capsys) -> None:
    from memplan.planner.pte.program import read_program

    before, after = ptes
    code, out, err = run_cli(["diff", str(before), str(after), "--max-growth", "5%"], capsys)
    assert code == 1 and "more than --max-growth 5.0%" in err
    old = {f"v{t.value}": t for t in read_program(before).methods["forward"].tensors}
    new = {f"v{t.value}": t for t in read_program(after).methods["forward"].tensors}
    grown = [v for v in old if v in new and new[v].nbytes > old[v].nbytes]
    assert grown
    for v in grown:
        delta = new[v].nbytes - old[v].nbytes
        assert f"tensor forward/{v} ({new[v].writer}): grew by {delta:,} B" in out
    assert "method forward: grew by" in out

    code, out, _ = run_cli(["diff", str(before), str(before), "--max-growth", "5%"], capsys)
    assert code == 0 and "grew" not in out


def test_report_of_a_pte_compares_the_file_with_memplans_replan(ptes, tmp_path, capsys) -> None:
    before, _ = ptes
    out_file = tmp_path / "r.html"
    code, out, err = run_cli(
        [
            "report",
            str(before),
            "--out",
            str(out_file),
            "--budget",
            "sram:1KiB,dram:1MiB",
            "--solver",
            "bestfit",
        ],
        capsys,
    )
    assert code == 0, err
    page = out_file.read_text()
    assert "this file" in page and "memplan re-plan (bestfit)" in page
    assert "a .pte holds no source lines" in page
    assert out.startswith("sram: does not fit by") and "dram: fits" in out


def test_report_rejects_a_bad_budget_and_out(tmp_path, capsys) -> None:
    code, _, err = run_cli(
        ["report", "cat_seed", "--out", str(tmp_path / "r.html"), "--budget", "sram"], capsys
    )
    assert code == 2 and "budget" in err
    code, _, err = run_cli(["report", "cat_seed", "--out", str(tmp_path / "r.png")], capsys)
    assert code == 2 and ".html" in err


def test_diff_of_two_models_names_the_grown_node(tmp_path, capsys) -> None:
    source = tmp_path / "chain.py"
    source.write_text(
        "import torch\n"
        "import torch.nn as nn\n\n"
        "def net(hidden):\n"
        "    return nn.Sequential(nn.Linear(8, hidden), nn.ReLU(), nn.Linear(hidden, 8)).eval(), (torch.randn(2, 8),)\n\n"
        "def small():\n    return net(16)\n\n"
        "def big():\n    return net(64)\n"
    )
    code, out, _ = run_cli(["diff", f"{source}:small", f"{source}:big", "--solver", "bestfit"], capsys)
    assert code == 0
    assert "tensor forward/aten_relu_default (relu.out): grew by 384 B (+300.0%), 128 -> 512 B" in out
