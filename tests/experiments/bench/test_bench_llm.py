"""experiments.bench.llm: case selection and tables from recorded cases."""

from __future__ import annotations

import json

import pytest
import torch
from torch import nn

from memplan.experiments.bench import llm as bench_llm


def _case(shape: str, layers: int, mode: str, stock_s: float, memplan_s: float) -> dict:
    run = {"arena": 4096, "tensors": 1000, "phases": {"pass run": 1.0}}
    ours = dict(
        run, seconds=memplan_s, lower_bound=2048, proven=True, phases={"pass run": 0.5, "extract": 0.2}
    )
    return {
        "shape": shape,
        "layers": layers,
        "mode": mode,
        "runs": {"stock": [dict(run, seconds=stock_s)], "memplan": [ours]},
        "peak_rss": 2**31,
    }


def test_tables_from_a_jsonl_file_give_the_ratio_and_the_phases(tmp_path, capsys) -> None:
    path = tmp_path / "cases.jsonl"
    path.write_text(json.dumps(_case("smollm2-135m", 48, "two-method", 20.0, 22.0)) + "\n")
    bench_llm.main(["--tables-from", str(path)])
    out = capsys.readouterr().out
    assert (
        "| smollm2-135m | 48 | two-method | 1,000 | 4,096 | 4,096 | 2,048 | yes | 20.0 | 22.0 | 1.10 | 2.0 |"
        in out
    )
    assert "| smollm2-135m | two-method | 1.00 | 0.50 | 0.20 |" in out


def test_deep_cases_run_only_for_the_selected_models_and_modes(monkeypatch) -> None:
    ran: list[tuple[str, int, str]] = []

    def fake(shape: str, layers: int, mode: str, repeat: int) -> dict:
        ran.append((shape, layers, mode))
        return _case(shape, layers, mode, 1.0, 1.0)

    monkeypatch.setattr(bench_llm, "_in_subprocess", fake)
    bench_llm.main(
        ["--models", "smollm2-135m", "--modes", "two-method", "--deep", "smollm2-135m:48:two-method"]
    )
    assert ran == [("smollm2-135m", 30, "two-method"), ("smollm2-135m", 48, "two-method")]
    ran.clear()
    bench_llm.main(["--models", "qwen3-0.6b", "--modes", "decode", "--layers", "qwen3-0.6b=3"])
    assert ran == [("qwen3-0.6b", 3, "decode")]


@pytest.mark.parametrize("argv", [["--models", "gpt5"], ["--modes", "train"]])
def test_unknown_models_and_modes_are_refused(argv: list[str], capsys) -> None:
    with pytest.raises(SystemExit):
        bench_llm.main(argv)
    assert "unknown" in capsys.readouterr().err


class _StateAndCat(nn.Module):
    """A state written in place and a cat: every default phase of the pass runs on it."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("state", torch.zeros(4, 8))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        a, b = torch.sin(x), torch.cos(x)
        self.state.copy_(self.state + a)
        return torch.cat([a, b]) * 2


def test_lower_once_times_every_phase_of_the_pass_on_a_tiny_model() -> None:
    from memplan.experiments.zoo.programs import from_module

    model = from_module(_StateAndCat(), (torch.randn(4, 8),), name="state_and_cat")
    result = bench_llm.lower_once(model, "memplan")
    always = {"state in place", "extract", "cat fusion analysis + solve", "solve", "write plan"}
    always |= {"insert frees", "storage-reuse check", "pass run"}
    assert always <= {label for label, seconds in result["phases"].items() if seconds > 0}
    assert result["arena"] > 0 and result["proven"] in (True, False)


def test_timed_phases_puts_the_pass_functions_back() -> None:
    import memplan.solvers

    before = memplan.solvers.solve
    with bench_llm.timed_phases():
        assert memplan.solvers.solve is not before
        assert memplan.solvers.solve.__wrapped__ is before
    assert memplan.solvers.solve is before


def test_a_phase_that_names_no_function_is_an_error(monkeypatch) -> None:
    monkeypatch.setitem(bench_llm.PHASES, "gone", ("planner", ("no_such_function",)))
    with pytest.raises(LookupError, match="gone"), bench_llm.timed_phases():
        pass
