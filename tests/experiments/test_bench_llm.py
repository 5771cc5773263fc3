"""experiments.bench.llm: case selection and tables from recorded cases."""

from __future__ import annotations

import json

import pytest

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
