"""transformers' ExecuTorch exporter under memplan, on tiny random-weight architectures: every method is
planned by memplan, in no more bytes than ExecuTorch's own pass, and memplan's program gives the stock
program's outputs bit for bit over several calls (state in the program carried between them)."""

from __future__ import annotations

import pytest
import transformers  # noqa: F401 - the [hf] extra; a missing install fails here, never skips

from memplan.experiments.flows import hf

DEFAULT = [
    ("llama_static_cache", "xnnpack"),
    ("bert", "portable"),
    ("vit", "xnnpack"),
    ("whisper", "portable"),
]
SWEEP = [
    pytest.param(name, backend, marks=pytest.mark.slow)
    for name in hf.ARCHITECTURES
    for backend in ("xnnpack", "portable")
    if (name, backend) not in DEFAULT
]


def check(outcome: hf.Outcome) -> None:
    assert not outcome.error, outcome.error
    program = outcome.program
    for row in program.methods:
        assert row.planner == "memplan", row.note
        assert row.memplan_bytes <= row.stock_bytes, row.method
    emitted = {
        p.name: sum(p.non_const_buffer_sizes) for p in program.program.executorch_program.execution_plan
    }
    stock = {
        p.name: sum(p.non_const_buffer_sizes) for p in program.stock_program.executorch_program.execution_plan
    }
    assert {r.method: r.memplan_bytes for r in program.methods} == emitted  # the table is the program's
    assert {r.method: r.stock_bytes for r in program.methods} == stock
    assert hf.compare(outcome)


@pytest.mark.parametrize(("name", "backend"), DEFAULT + SWEEP)
def test_architecture_exports_with_memplan_as_with_stock(name: str, backend: str) -> None:
    check(hf.export(hf.ARCHITECTURES[name], backend, time_limit_s=2))


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["xnnpack", "portable"])
def test_generate_path_prefill_and_decode(backend: str) -> None:
    outcomes = hf.export_for_generation(hf.ARCHITECTURES["llama"], backend, time_limit_s=2)
    assert len(outcomes) == 2  # prefill and decode, each its own program
    # Several calls per stage, as many as its cache holds: prefill writes its 6-token prompt after the
    # last one, so a 16-token cache takes two prefill calls (the third fails in the stock program too).
    assert [o.calls for o in outcomes] == [2, 3]  # prefill, then decode
    for outcome in outcomes:
        check(outcome)


def test_registered_exporter_and_portable_backend() -> None:
    from transformers.exporters.auto import AutoHfExporter, get_exporter_class
    from transformers.exporters.configs import ExecutorchConfig
    from transformers.exporters.exporter_executorch import _BACKEND_PREPARE, ExecutorchExporter

    from memplan.planner.substitute import hf as memplan_hf

    memplan_hf.register_portable_backend()
    assert memplan_hf.PORTABLE in _BACKEND_PREPARE
    try:
        memplan_hf.register_exporter()
        exporter = AutoHfExporter.from_config(ExecutorchConfig())
        assert isinstance(exporter, memplan_hf.MemplanExecutorchExporter)
    finally:
        from transformers.exporters.auto import register_backend
        from transformers.exporters.runners.runner_executorch import ExecutorchModelRunner

        register_backend(ExecutorchExporter, ExecutorchModelRunner)
    assert get_exporter_class("executorch") is ExecutorchExporter
