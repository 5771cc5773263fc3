"""`memplan plan` / `plot` as a new user meets them (issue 31, items 2, 4, 6, 8): the program row of a
multi-method program, `--check` against the stock program with the table printed either way, `--out`,
the lever switches, `plot` without `--solver`, a one-line hint for quantized ops, library noise dropped."""

from __future__ import annotations

import itertools
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch
from helpers.cli import run_cli

from memplan.experiments.cli import noise
from memplan.experiments.planning import PROGRAM_ROW

FACTORIES = """
import torch
from torch import nn


class StateAndCat(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("s", torch.zeros(4, 4))

    def forward(self, x):
        a, b = torch.sin(x), torch.cos(x)
        self.s.copy_(self.s + a)
        return torch.cat([a, b]) * 2


class Wide(nn.Module):
    def forward(self, x):
        return torch.cat([x * 2, x * 3, x * 4]).sum(0) + 1


class Quantized(nn.Module):
    def forward(self, x):
        q = torch.ops.quantized_decomposed.quantize_per_tensor.default(x, 0.1, 0, -128, 127, torch.int8)
        return torch.ops.quantized_decomposed.dequantize_per_tensor.default(q, 0.1, 0, -128, 127, torch.int8)


def one():
    return StateAndCat(), (torch.randn(4, 4),)


def two():
    return {"small": (StateAndCat(), (torch.randn(4, 4),)), "wide": (Wide(), (torch.randn(16, 16),))}


def quantized():
    return Quantized(), (torch.randn(4, 4),)
"""


@pytest.fixture
def spec(tmp_path: Path):
    path = tmp_path / "user_models.py"
    path.write_text(FACTORIES)
    return lambda factory: f"{path}:{factory}"


def _table_rows(out: str) -> dict[str, list[str]]:
    rows = [
        [c.strip() for c in line.strip("|").split("|")] for line in out.splitlines() if line.startswith("| ")
    ]
    return {r[0]: r for r in rows[1:]}


def test_a_two_method_program_gets_a_program_row_as_the_runtime_allocates(spec, capsys, tmp_path) -> None:
    out_file = tmp_path / "planned.pte"
    code, out, err = run_cli(
        ["plan", spec("two"), "--solver", "bestfit", "--check", "--out", str(out_file)], capsys
    )
    assert code == 0, err
    rows = _table_rows(out)
    header = next(line for line in out.splitlines() if line.startswith("| method"))
    arena = [c.strip() for c in header.strip("|").split("|")].index("arena_bytes")
    per_method = [int(rows[m][arena].replace(",", "")) for m in ("small", "wide")]
    assert int(rows[PROGRAM_ROW][arena].replace(",", "")) == max(per_method)  # one arena, shared
    assert "outputs identical to the stock program's" in err
    from executorch.runtime import Runtime

    assert Runtime.get().load_program(out_file.read_bytes()).method_names == {"small", "wide"}


def test_plan_model_summary_has_the_program_row_only_for_the_whole_program(spec) -> None:
    import memplan

    planned = memplan.plan_model(spec("two"), "bestfit")
    assert list(planned.summary["method"]) == ["small", "wide", PROGRAM_ROW]
    row = planned.summary.set_index("method").loc[PROGRAM_ROW]
    stock = [list(p.non_const_buffer_sizes) for p in planned.stock_program.executorch_program.execution_plan]
    # the methods share each arena (mem_id 1.., the state's too): per arena the largest method, summed
    assert row["stock_arena_bytes"] == sum(
        map(max, itertools.zip_longest(*[s[1:] for s in stock], fillvalue=0))
    )
    ours = [list(p.non_const_buffer_sizes) for p in planned.program.executorch_program.execution_plan]
    assert row["arena_bytes"] == sum(map(max, itertools.zip_longest(*[s[1:] for s in ours], fillvalue=0)))
    assert list(memplan.plan_model(spec("two"), "bestfit", method="wide").summary["method"]) == ["wide"]
    assert list(memplan.plan_model(spec("one"), "bestfit").summary["method"]) == ["forward"]


def test_a_failed_check_prints_the_table_then_one_error_line(spec, capsys, monkeypatch) -> None:
    from memplan.experiments.zoo import runtime

    real = runtime.run_pte
    runs: list[int] = []

    def second_run_off_by_one(pte, calls):
        runs.append(1)
        outputs = real(pte, calls)
        return [[t + 1 for t in call] for call in outputs] if len(runs) == 2 else outputs

    monkeypatch.setattr(runtime, "run_pte", second_run_off_by_one)
    code, out, err = run_cli(["plan", spec("one"), "--solver", "bestfit", "--check"], capsys)
    assert code == 1
    assert "forward" in _table_rows(out)
    assert err.strip().splitlines()[-1].startswith("memplan: error: check failed: call 0 (forward) output")
    runs.clear()
    code, _, err = run_cli(["plan", spec("one"), "--solver", "bestfit", "--check", "--atol", "1.5"], capsys)
    assert code == 0, err
    assert "within 1.5 of the stock program's" in err


def test_lever_switches_reach_the_pass(spec, capsys) -> None:
    code, out, err = run_cli(
        [
            "plan",
            spec("one"),
            "--solver",
            "bestfit",
            "--state-in-place",
            "off",
            "--slice-noop",
            "on",
            "--quiet",
        ],
        capsys,
    )
    assert code == 0, err
    assert "levers: cat fusion + slice no-ops\n" in out
    assert "memplan: " not in err  # --quiet: no progress lines
    code, _, err = run_cli(["plan", spec("one"), "--state-in-place", "maybe"], capsys)
    assert code == 2 and "--state-in-place must be a list of on/off" in err


def test_plan_says_what_it_is_doing_and_refuses_a_bad_out_before_planning(spec, capsys, tmp_path) -> None:
    code, _, err = run_cli(["plan", spec("one"), "--solver", "bestfit"], capsys)
    assert code == 0 and "memplan: user_models:one: exporting and planning with bestfit" in err
    code, _, err = run_cli(["plan", spec("one"), "--out", str(tmp_path / "x.txt")], capsys)
    assert code == 2 and "must end in .pte" in err and "exporting" not in err


def test_plot_defaults_its_solver_like_plan(spec, capsys, tmp_path) -> None:
    figure = tmp_path / "plan.png"
    code, _, err = run_cli(["plot", spec("one"), "--out", str(figure)], capsys)
    assert code == 0, err
    assert "planning with cpsat" in err and figure.stat().st_size > 0


def test_quantized_ops_without_a_partitioner_give_a_one_line_hint(spec, capsys) -> None:
    code, _, err = run_cli(["plan", spec("quantized"), "--solver", "bestfit"], capsys)
    assert code == 2
    (last,) = [line for line in err.splitlines() if line.startswith("memplan: error")]
    assert "--partitioner xnnpack" in last and "Traceback" not in err


def test_library_noise_is_dropped_at_the_command_line_edge() -> None:
    code = textwrap.dedent(
        """
        import os, sys, logging
        from memplan.experiments.cli.noise import filtered_stderr
        with filtered_stderr():
            os.write(2, b"[cpuinfo_utils.cpp:71] Reading file /sys/devices/soc0/image_version\\n")
            logging.getLogger("torchao").warning("Failed to load /x/torchao/_C_mxfp8.so: Could not load")
            print("memplan: kept", file=sys.stderr)
        print("after", file=sys.stderr)
        """
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stderr == "memplan: kept\nafter\n"
    assert noise.is_noise(b"Failed to load /v/torchao/_C_cutlass_90a.abi3.so: Could not load this library")
    assert not noise.is_noise(b"Failed to load my_model.pt2")
    assert torch.tensor(1)  # torch imported above: the filter works in a process that has it
