"""ExecuTorch's own export scripts under memplan (export_llama with a small params JSON and a random
checkpoint, the wheel's XNNPACK example exporters): memplan plans every method in no more bytes than
stock, and the programs give the stock programs' outputs bit for bit, and finite, over several calls
(the KV cache carried)."""

from __future__ import annotations

from pathlib import Path

import pytest

from memplan.experiments.flows import executorch_flows as flows

DEFAULT = ["export_llama xnnpack", "aot_compiler add_mul portable"]


@pytest.mark.parametrize(
    "name", DEFAULT + [pytest.param(n, marks=pytest.mark.slow) for n in flows.FLOWS if n not in DEFAULT]
)
def test_script_planned_by_memplan_runs_as_stock(name: str, tmp_path: Path) -> None:
    flow = flows.FLOWS[name]
    run = flows.run_module(flow, tmp_path, time_limit_s=2)
    assert run.programs, "the script built no program"
    for program in run.programs:
        for row in program.methods:
            assert row.planner == "memplan", row.note
            assert row.memplan_bytes <= row.stock_bytes
        assert flows.same_outputs(program.program, program.stock_program, flows.inputs_of(flow, 3))
    written = sorted(tmp_path.glob("*.pte"))
    assert written, "the script wrote no .pte"
    assert (
        written[-1].read_bytes() == run.programs[-1].program.buffer
    )  # the file the script wrote is memplan's
