"""The `memplan` command line: listings, single-model commands, and one-line errors."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from helpers.cli import run_cli as _run

from memplan import io, solvers
from memplan.experiments import zoo
from memplan.experiments.cli import main as cli
from memplan.peak_bound import lower_bound, lower_bounds

ERROR_CASES = {
    "no command": ([], "choose a command: run, sweep, plan"),
    "unknown subcommand": (["frobnicate"], "invalid choice: 'frobnicate'"),
    "unknown model": (["sweep", "--models", "cat_seed,nope"], "unknown model 'nope'; choose from: ds_cnn"),
    "unknown solver": (["sweep", "--solvers", "nope"], "unknown solver 'nope'; choose from: greedy"),
    "bad alignment": (["sweep", "--alignment", "16,12"], "alignment must be a power of two"),
    "alignment not a number": (["sweep", "--alignment", "x"], "bad alignment list 'x'"),
    "bad cat fusion": (["sweep", "--cat-fusion", "maybe"], "cat fusion must be a list of on/off"),
    "bad time limit": (["sweep", "--time-limit", "-1"], "time limit must be a positive number"),
    "time limit not a number": (["sweep", "--time-limit", "soon"], "invalid float value: 'soon'"),
    "bad jobs": (["sweep", "--jobs", "0"], "jobs must be at least 1"),
    "unknown executor": (
        ["sweep", "--executor", "slurm"],
        "invalid choice: 'slurm' (choose from 'local', 'ray')",
    ),
    "plan unknown model": (["plan", "nope"], "unknown model 'nope'; choose from: ds_cnn"),
    "plan unknown solver": (["plan", "cat_seed", "--solver", "nope"], "unknown solver 'nope'"),
    "plan unknown method": (
        ["plan", "multi_method_cache", "--solver", "greedy", "--method", "nope"],
        "unknown method of multi_method_cache 'nope'; choose from: set_cache, get_cache, attend",
    ),
    "plan bad plot file": (["plan", "cat_seed", "--plot", "out.jpg"], "must end in one of: .png, .svg, .pdf"),
    "plot bad file": (
        ["plot", "cat_seed", "--solver", "greedy", "--out", "x.jpg"],
        "must end in one of: .png",
    ),
    "export unknown model": (["export-problem", "nope", "--out", "x"], "unknown model 'nope'"),
    "budget without tiling": (["plan", "cat_seed", "--budget", "1000"], "--budget is an option of --tiling"),
    "tiling budget of two banks": (
        ["plan", "cat_seed", "--tiling", "--budget", "sram:1KiB,dram:1MiB"],
        "--budget 'sram:1KiB,dram:1MiB' names 2 banks; give one size",
    ),
    "tiling budget not a size": (
        ["plan", "cat_seed", "--tiling", "--budget", "lots"],
        "--budget 'lots': bank 'lots' is not name:size",
    ),
    "negative extra MACs": (
        ["plan", "cat_seed", "--tiling", "--max-extra-macs", "-1"],
        "max_extra_macs must be a fraction >= 0",
    ),
    "max regions without tiling": (
        ["plan", "cat_seed", "--max-regions", "2"],
        "--max-regions is an option of --tiling",
    ),
    "no regions": (["plan", "cat_seed", "--tiling", "--max-regions", "0"], "max_regions must be at least 1"),
    "two fusion values for one plan": (
        ["plan", "cat_seed", "--cat-fusion", "on,off"],
        "takes one value here",
    ),
}


@pytest.mark.parametrize("argv,message", ERROR_CASES.values(), ids=list(ERROR_CASES))
def test_mistakes_exit_2_with_one_line_and_no_traceback(argv, message, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # nothing may be written anyway; keep the repo clean if it were
    code, out, err = _run(argv, capsys)
    assert code == 2
    assert err.count("\n") == 1 and err.startswith("memplan: error: "), err
    assert message in err
    assert "Traceback" not in err + out
    assert not (tmp_path / "results").exists()


def test_an_unwritable_output_folder_exits_2(capsys, tmp_path):
    blocker = tmp_path / "a_file"
    blocker.write_text("not a folder")
    for argv in (
        ["sweep", "--models", "cat_seed", "--solvers", "greedy", "--out", str(blocker / "sub")],
        ["export-problem", "cat_seed", "--out", str(blocker / "sub")],
    ):
        code, _, err = _run(argv, capsys)
        assert code == 2 and err.count("\n") == 1
        assert f"cannot write to output folder {str(blocker / 'sub')!r}" in err


def test_the_installed_console_script_reports_mistakes_in_one_line():
    script = Path(sys.executable).with_name("memplan")
    done = subprocess.run(
        [str(script), "sweep", "--models", "nope"], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        f"memplan: error: unknown model 'nope'; choose from: {', '.join(zoo.names())};"
        " or give a .pt2 file or path/file.py:factory"
    ]


def test_models_and_solvers_list_every_name_with_a_description(capsys):
    code, out, _ = _run(["models"], capsys)
    assert code == 0
    lines = out.splitlines()
    assert [line.split()[0] for line in lines] == zoo.names()
    assert all(len(line.split(None, 1)) == 2 for line in lines)  # every name has a description
    assert any("U-Net" in line for line in lines)
    code, out, _ = _run(["solvers"], capsys)
    assert code == 0
    assert [line.split()[0] for line in out.splitlines()] == solvers.available()
    assert all(len(line.split(None, 1)) == 2 for line in out.splitlines())


def test_export_problem_writes_csv_and_json_that_planner_io_reads_back(capsys, tmp_path):
    """multi_method_cache has two pools (activations, shared state): one CSV per pool."""
    code, out, _ = _run(["export-problem", "multi_method_cache", "--out", str(tmp_path)], capsys)
    assert code == 0
    methods = sorted(zoo.get("multi_method_cache").methods)
    expected = [
        tmp_path / f"multi_method_cache.{m}.{suffix}"
        for m in methods
        for suffix in ("json", "pool1.csv", "pool2.csv")
    ]
    assert [Path(p) for p in out.split()] == expected
    for method in methods:
        problem = io.load_json(tmp_path / f"multi_method_cache.{method}.json")
        assert problem.pools == [1, 2]
        for pool in problem.pools:
            from_csv = io.read_minimalloc_csv(tmp_path / f"multi_method_cache.{method}.pool{pool}.csv")
            roots = [b for b in problem.roots() if b.pool == pool]
            assert [(b.id, b.start, b.end, b.size, b.alignment, b.offset) for b in from_csv.buffers] == [
                (b.id, b.start, b.end, b.size, b.alignment, b.offset) for b in roots
            ]
            assert lower_bound(from_csv) == lower_bounds(problem)[pool]


def test_plan_prints_one_line_per_method_and_writes_the_gantt(capsys, tmp_path):
    figure = tmp_path / "plan.svg"
    code, out, _ = _run(["plan", "multi_method_cache", "--solver", "bestfit", "--plot", str(figure)], capsys)
    assert code == 0
    lines = out.splitlines()
    assert lines[0] == (
        "multi_method_cache: solver bestfit; lowered with to_edge + ConvertToLinearPass;"
        " levers: cat fusion + state in place + slice no-ops"
    )
    cells = [[c.strip() for c in line.strip("|").split("|")] for line in lines[1:]]
    assert cells[0] == [
        "method",
        "buffers",
        "lower_bound_bytes",
        "arena_bytes",
        "stock_arena_bytes",
        "saving_vs_stock",
        "proven_optimal",
        "plan_solver",
        "solve_seconds",
        "cats_fused",
        "state_copies_removed",
    ]
    assert set(cells[1][0]) <= {"-", ":"}  # the Markdown rule under the header
    # call order, then the whole program as the runtime allocates it
    assert [row[0] for row in cells[2:]] == ["set_cache", "get_cache", "attend", "(program)"]
    assert figure.read_text().lstrip().startswith(("<?xml", "<svg"))


def test_plot_writes_a_png_for_one_method(capsys, tmp_path):
    figure = tmp_path / "gantt.png"
    code, _, err = _run(
        ["plot", "multi_method_cache", "--solver", "greedy", "--method", "attend", "--out", str(figure)],
        capsys,
    )
    assert code == 0 and str(figure) in err
    assert figure.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_bench_csv_solves_each_file_with_each_solver_and_reports_bad_files(capsys, tmp_path):
    from memplan.generate import layered_problem

    problem = layered_problem(12, seed=3, alignment=1)
    need = solvers.solve(problem, "bestfit").arena_size
    io.write_minimalloc_csv(problem, tmp_path / f"roomy.{need}.csv")
    io.write_minimalloc_csv(problem, tmp_path / f"tight.{lower_bound(problem) - 1}.csv")
    (tmp_path / "broken.7.csv").write_text("id,lower,upper,size\nx,5,2,8\n")
    code, out, _ = _run(
        [
            "bench-csv",
            str(tmp_path),
            "--solvers",
            "greedy,bestfit",
            "--time-limit",
            "2",
            "--capacity-from-name",
            "--out",
            str(tmp_path / "bench.csv"),
            "--quiet",
        ],
        capsys,
    )
    assert code == 0
    cells = [[c.strip() for c in line.strip("|").split("|")] for line in out.splitlines()]
    assert cells[0][:3] == ["file", "solver", "buffers"]
    rows = {tuple(row[:2]): row for row in cells[2:]}
    assert set(rows) == {
        (f, s)
        for f in (f"roomy.{need}.csv", f"tight.{lower_bound(problem) - 1}.csv", "broken.7.csv")
        for s in ("greedy", "bestfit")
    }
    roomy = dict(zip(cells[0], rows[(f"roomy.{need}.csv", "bestfit")]))
    assert roomy["arena_bytes"] == f"{need:,}" and roomy["fits"] == "yes"
    assert "no plan within capacity" in " ".join(rows[(f"tight.{lower_bound(problem) - 1}.csv", "bestfit")])
    assert "broken.7.csv:2" in " ".join(rows[("broken.7.csv", "greedy")])
    assert "<NA>" not in out and "nan" not in out.lower().replace("nanos", "")
    written = pd.read_csv(tmp_path / "bench.csv")
    assert len(written) == 6 and "lower_bound_bytes" in written.columns


def test_bench_csv_on_a_folder_without_csv_files_exits_2(capsys, tmp_path):
    code, _, err = _run(["bench-csv", str(tmp_path), "--solvers", "bestfit"], capsys)
    assert code == 2 and err == f"memplan: error: no .csv files in {str(tmp_path)!r}\n"


def test_bench_csv_without_a_folder_solves_the_minimalloc_problems_shipped_with_memplan(
    capsys, tmp_path, monkeypatch
):
    from helpers.minimalloc_files import KNOWN, minimalloc_dir

    minimalloc_dir()  # fails naming the folder looked in when the package data is missing
    monkeypatch.chdir(tmp_path)  # nothing beside the current folder is read
    code, out, _ = _run(["bench-csv", "--solvers", "greedy", "--capacity-from-name", "--quiet"], capsys)
    assert code == 0
    cells = [[c.strip() for c in line.strip("|").split("|")] for line in out.splitlines()]
    rows = {row[0]: dict(zip(cells[0], row)) for row in cells[2:]}
    assert set(rows) == set(KNOWN)
    assert {name: (row["buffers"], row["lower_bound_bytes"]) for name, row in rows.items()} == {
        name: (str(known.buffers), f"{known.lower_bound:,}") for name, known in KNOWN.items()
    }
    assert rows["input.12.csv"]["fits"] == "yes"


def test_any_memplan_error_ends_in_one_line_and_exit_2(capsys, monkeypatch):
    from memplan.experiments.sweep.executors import ExecutorUnavailableError

    def unavailable(args):
        raise ExecutorUnavailableError("the ray executor needs Ray: pip install 'memplan[ray]'")

    monkeypatch.setitem(cli._COMMANDS, "models", unavailable)
    code, out, err = _run(["models"], capsys)
    assert code == 2 and out == ""
    assert err == "memplan: error: the ray executor needs Ray: pip install 'memplan[ray]'\n"


TILEABLE = """
import torch
from torch import nn


def make():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 24, 3, 2, 1), nn.ReLU(), nn.Conv2d(24, 24, 3, 1, 1, groups=24), nn.ReLU(),
                          nn.Conv2d(24, 4, 1))
    return model.eval(), (torch.randn(1, 3, 32, 32),)
"""


def test_plan_with_tiling_prints_the_tiled_region(capsys, tmp_path):
    path = tmp_path / "tileable.py"
    path.write_text(TILEABLE)
    code, out, _ = _run(["plan", f"{path}:make", "--solver", "bestfit", "--tiling", "--check"], capsys)
    assert code == 0
    assert (
        "levers: cat fusion + state in place + slice no-ops + reorder + elementwise in place + tiling" in out
    )
    assert "forward: tiled " in out and "row bands" in out


def test_elementwise_in_place_is_switched_on_or_off_by_its_flag(capsys, tmp_path):
    path = tmp_path / "tileable.py"
    path.write_text(TILEABLE)
    lines = {}
    for flags in (["--elementwise-in-place", "on"], ["--tiling", "--elementwise-in-place", "off"]):
        code, out, _ = _run(["plan", f"{path}:make", "--solver", "bestfit", *flags, "--check"], capsys)
        assert code == 0
        lines[flags[-1]] = out.splitlines()[0]
    assert "elementwise in place" in lines["on"] and "tiling" not in lines["on"]
    assert "elementwise in place" not in lines["off"] and "tiling" in lines["off"]
    code, _, err = _run(["plan", f"{path}:make", "--elementwise-in-place", "maybe"], capsys)
    assert code == 2 and "--elementwise-in-place" in err


def test_plan_tiling_budget_takes_the_bank_grammar(capsys, tmp_path):
    """`--budget` with --tiling reads sizes as --memory-map and report's --budget do (units, one bank)."""
    path = tmp_path / "tileable.py"
    path.write_text(TILEABLE)
    lines = {}
    for budget in ("39KiB", "sram:20000"):
        code, out, err = _run(
            ["plan", f"{path}:make", "--solver", "bestfit", "--tiling", "--budget", budget, "--quiet"], capsys
        )
        assert code == 0, err
        lines[budget] = next(line for line in out.splitlines() if line.startswith("forward: "))
    assert lines["39KiB"].startswith("forward: tiled ") and "peak 49,152 -> " in lines["39KiB"]
    tiled_peak = int(re.search(r"peak 49,152 -> ([\d,]+) B", lines["39KiB"]).group(1).replace(",", ""))
    assert tiled_peak <= 39 * 1024
    assert lines["sram:20000"].startswith("forward: not tiled (budget_unreachable)")


def test_bench_csv_shows_how_long_a_solve_ran_past_its_limit_and_in_which_stage(
    capsys, tmp_path, monkeypatch
):
    """Validation is made to take 5 s on a clock the test moves (nothing is timed): with a 2 s limit
    the row says 3 s over, in validation; a solve inside its limit shows 0 and no stage."""
    from helpers.fake_clock import slow_validation_of

    from memplan.generate import layered_problem

    slow_validation_of(monkeypatch, "bestfit", 5.0)
    io.write_minimalloc_csv(layered_problem(12, seed=3, alignment=1), tmp_path / "small.csv")
    code, out, _ = _run(
        ["bench-csv", str(tmp_path), "--solvers", "greedy,bestfit", "--time-limit", "2", "--quiet"], capsys
    )
    assert code == 0
    cells = [[c.strip() for c in line.strip("|").split("|")] for line in out.splitlines()]
    rows = {row[1]: dict(zip(cells[0], row)) for row in cells[2:]}
    assert (
        float(rows["bestfit"]["seconds_over_limit"]) == 3.0 and rows["bestfit"]["overran_in"] == "validation"
    )
    assert float(rows["greedy"]["seconds_over_limit"]) == 0.0 and rows["greedy"]["overran_in"] == ""


def test_plan_across_banks_prints_what_each_bank_holds(capsys):
    """`plan --memory-map` plans as `PlannerPass(memory_map=...)` does and says per bank what it holds."""
    from memplan import PlannerPass
    from memplan.experiments.zoo import runtime
    from memplan.planner.memory.bank_maps import parse_memory_map

    banks = "sram:16KiB,dram:16MiB"
    code, out, _ = _run(["plan", "ds_cnn", "--solver", "bestfit", "--memory-map", banks, "--quiet"], capsys)
    assert code == 0
    pass_ = PlannerPass(solver="bestfit", memory_map=parse_memory_map(banks))
    runtime.lower(zoo.get("ds_cnn"), memory_planning_pass=pass_)
    sizes, traffic = pass_.results["forward"].buffer_sizes, pass_.results["forward"].traffic
    assert sizes[1] < 16 * 1024 < sizes[2]  # the 32,000 B activations cannot sit in sram
    assert f"forward banks: sram {sizes[1]:,} of 16,384 B, stock " in out
    assert f"{traffic[1]:,} B moved per call; dram {sizes[2]:,} of 16,777,216 B, stock " in out
    code, _, err = _run(["plan", "ds_cnn", "--solver", "milp", "--memory-map", banks], capsys)
    assert code == 2 and "cannot plan across the banks of --memory-map" in err
