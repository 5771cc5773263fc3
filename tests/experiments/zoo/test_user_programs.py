"""Your model, your numbers: a user's program is lowered exactly as the user would lower it.

Models defined only here, written to a factory file as a user would: an LSTM like ExecuTorch's
`examples/models/lstm` (which ConvertToLinearPass used to crash on), through `memplan plan`, a `.pt2`
and a sweep; a small GPT-style transformer whose `memplan plan` figures equal the user's own plain
`to_executorch` builds byte for byte; and the small things around them. The checks that lower
the transformer run on a small MLP by default and on the transformer under `-m slow`.
"""

from __future__ import annotations

import copy
import subprocess
import sys
import warnings

import pandas as pd
import pytest
import torch
from executorch.exir import ExecutorchBackendConfig, to_edge
from executorch.exir.passes import MemoryPlanningPass

import memplan
from memplan.experiments.cli.main import main
from memplan.experiments.sweep.run import _describe

FACTORIES = '''
import torch
from torch import nn
from torch.nn.quantizable.modules import rnn


def lstm():
    """ExecuTorch's examples/models/lstm: rnn.LSTM(10, 20, 2), input and (h0, c0)."""
    torch.manual_seed(0)
    return rnn.LSTM(10, 20, 2).eval(), (torch.randn(5, 3, 10), (torch.randn(2, 3, 20), torch.randn(2, 3, 20)))


class Block(nn.Module):
    def __init__(self, dim=32, heads=2):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.qkv, self.proj = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)
        self.up, self.down = nn.Linear(dim, 4 * dim), nn.Linear(4 * dim, dim)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).view(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        a = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(a.transpose(1, 2).reshape(b, t, d))
        return x + self.down(torch.nn.functional.gelu(self.up(self.ln2(x))))


class GPT(nn.Module):
    def __init__(self, vocab=64, dim=32, layers=2, ctx=16):
        super().__init__()
        self.tok, self.pos = nn.Embedding(vocab, dim), nn.Embedding(ctx, dim)
        self.blocks = nn.ModuleList(Block(dim) for _ in range(layers))
        self.head = nn.Linear(dim, vocab, bias=False)

    def forward(self, idx):
        x = self.tok(idx) + self.pos(torch.arange(idx.shape[1]))
        for block in self.blocks:
            x = block(x)
        return self.head(x)


def gpt():
    torch.manual_seed(0)
    return GPT().eval(), (torch.randint(0, 64, (1, 16)),)


def mlp():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 8)).eval(), (torch.randn(2, 16),)


def broken():
    raise ValueError("the factory's own bug")
'''


# The transformer's checks run under -m slow; the MLP keeps each of them in the default run.
PROGRAMS = ["mlp", pytest.param("gpt", marks=pytest.mark.slow)]


@pytest.fixture(scope="module")
def factories(tmp_path_factory):
    folder = tmp_path_factory.mktemp("work")
    path = folder / "mymodels.py"
    path.write_text(FACTORIES)
    return path


def _run(argv, capsys) -> tuple[int, str, str]:
    try:
        code = main(argv)
    except SystemExit as exc:
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


def _own_build(module, example, planning_pass) -> list[int]:
    """The user's own plain build: export, to_edge, to_executorch, nothing else."""
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")
        edge = to_edge(torch.export.export(copy.deepcopy(module), example))
        program = edge.to_executorch(ExecutorchBackendConfig(memory_planning_pass=planning_pass))
    return list(program.executorch_program.execution_plan[0].non_const_buffer_sizes)


def test_an_lstm_like_executorchs_example_plans_and_runs(factories, capsys):
    code, out, err = _run(["plan", f"{factories}:lstm", "--solver", "bestfit", "--check"], capsys)
    assert code == 0, err
    assert (
        "mymodels:lstm: solver bestfit; lowered with to_edge; levers: cat fusion + state in place + slice no-ops\n"
        in out
    )
    assert "outputs identical to the stock program's" in err  # --check compares with the stock program


def test_the_same_lstm_from_a_pt2(factories, tmp_path, capsys):
    spec = {}
    exec(compile(FACTORIES, str(factories), "exec"), spec)
    module, example = spec["lstm"]()
    path = tmp_path / "lstm.pt2"
    torch.export.save(torch.export.export(module, example), str(path))
    code, out, err = _run(["plan", str(path), "--solver", "bestfit", "--check"], capsys)
    assert code == 0, err
    assert "lowered with to_edge;" in out


def test_a_sweep_of_the_lstm_checks_it_and_says_how_it_was_lowered(factories, tmp_path, capsys):
    df = memplan.sweep(
        out=tmp_path / "runs",
        models=[f"{factories}:lstm"],
        solvers=["greedy", "bestfit"],
        check=True,
        jobs=1,
    )
    assert df["error"].isna().all(), df["error"].tolist()
    assert df["matches_eager"].all()
    assert set(df["lowering"]) == {"to_edge"}
    assert set(df["levers"]) == {"cat fusion + state in place + slice no-ops"}
    summary = (tmp_path / "runs" / "summary.md").read_text()
    assert f"| {factories}:lstm | to_edge |" in summary and "Levers on in every solver's run" in summary
    err = capsys.readouterr().err  # not a terminal here: a line per run instead of a bar
    assert "sweep: 1/3 " in err and "sweep: 3/3 " in err


@pytest.mark.parametrize("name", PROGRAMS)
def test_memplan_plan_figures_equal_the_users_own_builds_byte_for_byte(factories, capsys, name):
    planned = memplan.plan_model(f"{factories}:{name}", "bestfit")
    spec = {}
    exec(compile(FACTORIES, str(factories), "exec"), spec)
    module, example = spec[name]()
    stock = _own_build(module, example, MemoryPlanningPass())
    mine = _own_build(module, example, memplan.PlannerPass(solver="bestfit"))
    row = planned.summary.iloc[0]
    assert (row["stock_arena_bytes"], row["arena_bytes"]) == (sum(stock), sum(mine))
    assert planned.results["forward"].stock_sizes == stock
    assert planned.summary.attrs["lowering"] == "to_edge"
    code, out, _ = _run(["plan", f"{factories}:{name}", "--solver", "bestfit"], capsys)
    assert code == 0 and f"{sum(stock):,}" in out and f"{sum(mine):,}" in out


@pytest.mark.parametrize("name", PROGRAMS)
def test_lowering_options_are_the_users_choice(factories, name):
    planned = memplan.plan_model(
        f"{factories}:{name}",
        "bestfit",
        partitioner="xnnpack",
        convert_linear=True,
        const_prop=True,
        stock=False,
    )
    assert planned.summary.attrs["lowering"] == (
        "to_edge_transform_and_lower(xnnpack) + ConvertToLinearPass + const prop"
    )
    assert planned.program.executorch_program.execution_plan[0].delegates


def test_export_problem_of_a_file_spec_names_files_after_the_program(factories, tmp_path, capsys):
    code, out, err = _run(["export-problem", f"{factories}:mlp", "--out", str(tmp_path / "p")], capsys)
    assert code == 0, err
    assert (tmp_path / "p" / "mymodels_mlp.forward.json").is_file()
    assert all(":" not in p.name for p in (tmp_path / "p").iterdir())


def test_a_sweep_error_row_keeps_the_cause_innermost_first(factories, tmp_path):
    df = memplan.sweep(out=tmp_path / "runs", models=[f"{factories}:broken"], solvers=["bestfit"], jobs=1)
    (error,) = df["error"].dropna()
    assert error.startswith("ValueError: the factory's own bug [mymodels.py:"), error
    assert "-> ProgramSpecError: mymodels:broken() failed" in error


def test_describe_walks_the_whole_chain():
    try:
        try:
            try:
                raise KeyError("inner")
            except KeyError as e:
                raise ValueError("middle") from e
        except ValueError:
            raise RuntimeError("outer")  # noqa: B904 - implicit context, also kept
    except RuntimeError as exc:
        text = _describe(exc)
    assert text.index("KeyError") < text.index("ValueError: middle") < text.index("RuntimeError: outer")


def test_a_sweep_where_every_run_failed_exits_1(factories, tmp_path, capsys, monkeypatch):
    from memplan.experiments.sweep import run

    monkeypatch.setattr(run, "sweep", lambda **kw: _all_failed(kw["out"]))
    code, _, err = _run(
        ["sweep", "--models", f"{factories}:broken", "--out", str(tmp_path / "r"), "--quiet"], capsys
    )
    assert code == 1 and "1 rows, 1 with an error" in err


def _all_failed(out) -> pd.DataFrame:
    return pd.DataFrame({"model": ["m"], "method": [""], "solver": ["bestfit"], "error": ["ValueError: x"]})


def test_inspect_of_something_that_is_no_program_is_a_usage_error(factories, capsys):
    code, _, err = _run(["inspect", str(factories)], capsys)
    assert code == 2 and "not an ExecuTorch program" in err and "Traceback" not in err


def test_replan_to_a_missing_folder_fails_before_replanning(factories, tmp_path, capsys):
    pte = tmp_path / "x.pte"
    pte.write_bytes(b"anything: the folder is checked first")
    code, _, err = _run(["replan", str(pte), "--out", str(tmp_path / "nope" / "y.pte")], capsys)
    assert code == 2 and "no folder" in err


def test_no_library_noise_on_import(tmp_path):
    done = subprocess.run(
        [sys.executable, "-c", "import memplan.planner.pass_, memplan.experiments.zoo.runtime"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "Failed to load" not in done.stderr and "KernelPreference" not in done.stderr, done.stderr


def test_ratios_keep_their_decimals_and_text_aligns_left():
    from memplan.experiments.markdown import markdown

    text = markdown(pd.DataFrame({"method": ["forward"], "arena_over_lb": [1.0003], "bytes": [1234]}))
    header, rule, row = text.splitlines()
    assert "1.0003" in row and "1,234" in row
    assert rule.startswith("|:-") and rule.rstrip().endswith(":|")


def test_inspect_counts_repeated_delegates():
    from memplan.experiments.cli.inspect import _counted

    assert _counted(["XnnpackBackend"] * 15 + ["Other"]) == "XnnpackBackend x15, Other"


def test_progress_lines_when_stderr_is_no_terminal(capsys):
    from memplan.experiments.flags import progress

    assert list(progress(["a", "b"], 2, "bench")) == ["a", "b"]
    assert capsys.readouterr().err.splitlines() == ["bench: 1/2 a", "bench: 2/2 b"]


def test_the_sweep_summary_of_a_memory_map_names_the_map_and_the_state_arena():
    from memplan.experiments.sweep.report import _bank_lines

    group = pd.DataFrame(
        {
            "model": ["two"],
            "method": ["decode"],
            "solver": ["bestfit"],
            "arena_bytes": [1200],
            "memory_map": ["sram:1KiB,dram:1MiB"],
            "sram_bytes": [1000],
            "dram_bytes": [100],
            "sram_traffic_share": [0.9],
            "dram_traffic_share": [0.055],
        }
    )
    text = "\n".join(_bank_lines(group))
    assert "Memory map sram:1KiB,dram:1MiB" in text and "traded for traffic" in text
    assert "| two/decode | bestfit | 1,200 | 1,000 | 0.900 | 100 | 0.055 | 100 | 0.045 |" in text


def test_compare_plot_has_a_stock_bar():
    from memplan.viz.compare import STOCK_SERIES, ratios

    df = pd.DataFrame(
        {
            "model": ["m", "m"],
            "method": ["forward", "forward"],
            "solver": ["greedy", "bestfit"],
            "arena_bytes": [120, 100],
            "lower_bound_bytes": [100, 100],
            "stock_arena_bytes": [150, 150],
            "proven_optimal": [False, False],
        }
    )
    table = ratios(df).set_index("series")["ratio"]
    assert table[STOCK_SERIES] == 1.5 and table["greedy"] == 1.2


def test_the_gantt_title_names_the_xnnpack_padding_the_table_counts():
    from types import SimpleNamespace

    from memplan.experiments.cli.one_model import _padding_note

    assert (
        _padding_note(SimpleNamespace(padding=64)) == " (the program adds 64 B of XNNPACK padding per arena)"
    )
    assert _padding_note(SimpleNamespace(padding=0)) == ""


def test_zoo_models_keep_their_recipe_and_a_users_module_is_lowered_as_given(capsys):
    from memplan.experiments import zoo
    from memplan.experiments.zoo import programs

    assert zoo.get("ds_cnn").lowering == "to_edge + ConvertToLinearPass + const prop"
    assert zoo.get("ds_cnn_xnnpack").lowering == (
        "to_edge_transform_and_lower(xnnpack) + ConvertToLinearPass + const prop"
    )
    assert zoo.get("lstm").lowering == "to_edge + const prop"
    assert zoo.get("multi_method_cache").lowering == "to_edge + ConvertToLinearPass"
    mine = programs.from_module(torch.nn.Linear(4, 4), (torch.randn(2, 4),))
    assert mine.lowering == "to_edge" and not mine.convert_to_linear and mine.backend_config == {}
    assert (
        _run(["models"], capsys)[1]
        .splitlines()[0]
        .endswith("lowered with to_edge + ConvertToLinearPass + const prop")
    )


@pytest.mark.parametrize("name", PROGRAMS)
def test_a_sweep_lowers_a_users_program_as_asked(factories, tmp_path, name):
    from memplan.experiments.zoo.programs import lowering_options, lowering_text

    text = lowering_text("xnnpack", None, False)
    assert text == "partitioner=xnnpack,const_prop=0"
    assert lowering_options(text) == {"partitioner": "xnnpack", "const_prop": False}
    df = memplan.sweep(
        out=tmp_path / "runs",
        models=[f"{factories}:{name}"],
        solvers=["bestfit"],
        jobs=1,
        partitioner="xnnpack",
    )
    assert df["error"].isna().all(), df["error"].tolist()
    assert list(df["lowering"]) == ["to_edge_transform_and_lower(xnnpack)"]
    assert df["stock_arena_bytes"].notna().all()
