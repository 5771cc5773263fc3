"""`memplan report` and `memplan diff` from the command line, on `.pte` files and on models."""

from __future__ import annotations

import html
import re
from pathlib import Path

import pytest
from helpers.cli import run_cli
from helpers.executorch_programs import LINEAR_WIDTHS, LinearChain, stock_pte

from memplan.experiments.zoo.programs import from_module
from memplan.viz.style import format_bytes

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


def test_report_takes_bare_bytes_as_one_bank_as_plan_does(ptes, tmp_path, capsys) -> None:
    """`--budget 150000` (the grammar of plan's --budget and --memory-map) is one bank, not an error."""
    before, _ = ptes
    verdicts = {}
    for budget in ("150000", "16"):
        code, out, err = run_cli(
            [
                "report",
                str(before),
                "--out",
                str(tmp_path / "r.html"),
                "--budget",
                budget,
                "--solver",
                "bestfit",
            ],
            capsys,
        )
        assert code == 0, err
        verdicts[budget] = out.splitlines()[0]
    assert verdicts["150000"].startswith("arena: fits, ")
    assert verdicts["16"].startswith("arena: does not fit by ")


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


# -- across memory banks ------------------------------------------------------------------------------

BANKS = "sram:16KiB,dram:16MiB"  # ds_cnn's 64,000 B arena fits only when most of it goes to dram
TOO_SMALL = "sram:1KiB,dram:2KiB"  # no plan across these fits
_VERDICT = re.compile(r"data-bank='(\w+)' data-needed='(\d+)' data-capacity='(\d+)'")


def _planned_across(memory_map: str):
    """ds_cnn lowered with PlannerPass(memory_map=...) directly: the plan the report must show."""
    from memplan.experiments.zoo.lowering import library_warnings_silenced, lower_planned
    from memplan.experiments.zoo.programs import load
    from memplan.solvers import DEFAULT_ALIGNMENT

    with library_warnings_silenced():
        return lower_planned(load("ds_cnn"), "bestfit", DEFAULT_ALIGNMENT, True, 2.0, memory_map=memory_map)


@pytest.fixture(scope="module")
def across() -> tuple[dict[int, int], dict[int, int], list[str]]:
    """(arena bytes per bank pool, traffic per pool, the tensors in dram) of ds_cnn planned across BANKS."""
    result = _planned_across(BANKS).planner_pass.results["forward"]
    problem, plan = result.problem, result.plan
    in_dram = [b.id for b in problem.buffers if problem.parent_of(b.id) is None and plan.pools[b.id] == 2]
    return dict(plan.arena_sizes), dict(result.traffic), in_dram


def _report(tmp_path: Path, capsys, *flags: str) -> tuple[int, str, str, str]:
    page = tmp_path / "r.html"
    code, out, err = run_cli(
        ["report", "ds_cnn", "--out", str(page), "--solver", "bestfit", "--time-limit", "2", *flags], capsys
    )
    return code, out, err, page.read_text() if page.exists() else ""


def test_report_with_a_memory_map_shows_the_banked_plans_arenas(across, tmp_path, capsys) -> None:
    arenas, _, in_dram = across
    assert arenas[1] and arenas[2] and in_dram  # the map is tight enough to use both banks
    code, out, err, page = _report(tmp_path, capsys, "--memory-map", BANKS)
    assert code == 0, err
    needed = {bank: int(need) for bank, need, _ in _VERDICT.findall(page)}
    assert needed == {"sram": arenas[1], "dram": arenas[2]}  # the map is the budget, per bank
    assert (
        out.splitlines()[0]
        == f"sram: fits, {format_bytes(16384 - arenas[1])} ({16384 - arenas[1]:,} B) to spare"
    )
    assert "mem_id 2 · dram" in page and "first-bank" not in page


def test_a_budget_that_fits_only_across_banks_gets_the_banked_plans_figures(across, tmp_path, capsys) -> None:
    arenas, traffic, in_dram = across
    code, out, err, page = _report(tmp_path, capsys, "--budget", BANKS)
    assert code == 0, err
    assert out.startswith("sram: does not fit by ")  # the plan without a map puts every arena in sram
    assert (
        f"planned across sram 16 KiB + dram 16 MiB it fits: sram {arenas[1]:,} B, dram {arenas[2]:,} B"
        f" ({len(in_dram)} tensors moved to dram: {', '.join(in_dram[:5])}" in out
    )
    assert f"{traffic[2]:,} B of traffic per call through dram" in out
    assert "every arena counts against the first bank, sram" in page


def test_a_budget_no_plan_across_the_banks_fits_says_by_how_much(tmp_path, capsys) -> None:
    from memplan.errors import BankCapacityError

    with pytest.raises(BankCapacityError) as raised:
        _planned_across(TOO_SMALL)
    short = f"does not fit even across the banks: short by {raised.value.missing:,} B in {raised.value.bank}"
    for flag in ("--budget", "--memory-map"):
        code, out, err, page = _report(tmp_path, capsys, flag, TOO_SMALL)
        assert code == 0, err
        assert short in out and html.escape(short) in page


def test_report_rejects_a_bad_memory_map_and_a_pte_with_one(ptes, tmp_path, capsys) -> None:
    code, _, err, _ = _report(tmp_path, capsys, "--memory-map", "sram:16QiB,dram:1MiB")
    assert code == 2 and "memory map 'sram:16QiB,dram:1MiB': bank 'sram': size '16QiB'" in err
    code, _, err = run_cli(
        ["report", str(ptes[0]), "--out", str(tmp_path / "r.html"), "--memory-map", BANKS], capsys
    )
    assert code == 2 and "--memory-map cannot re-plan" in err and "never moved across banks" in err
