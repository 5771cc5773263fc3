"""memplan in Hugging Face transformers' ExecuTorch exporter (`transformers.exporters`, 5.23).

The exporter builds its `MemoryPlanningPass` in `_get_backend_config` (or passes no config), inside
`ExecutorchExporter.export_program`, the one method every export goes through (`export`,
`export_for_generation`, `AutoHfExporter`). `MemplanExecutorchExporter` is that exporter with the
method run under `substituted(...)`: the one line a transformers user changes is the exporter's name.

    exported = MemplanExecutorchExporter(solver="cpsat").export(model, inputs, ExecutorchConfig())
    exporter.programs  # per exported component: stock bytes against memplan's, per method

`register_exporter()` makes it the exporter `AutoHfExporter` picks for `ExecutorchConfig`
(transformers' `register_backend`); `register_portable_backend()` adds `backend="portable"`
(nothing delegated: ExecuTorch's portable kernels) to the exporter's `_BACKEND_PREPARE` table,
its registration point for backends. transformers is imported only here, on first use.
"""

from __future__ import annotations

from typing import Any

from memplan import solvers
from memplan.planner.substitute.results import ProgramResult
from memplan.planner.substitute.session import substituted

PORTABLE = "portable"


def _exporter_base() -> type:
    try:
        from transformers.exporters.exporter_executorch import ExecutorchExporter
    except ImportError as e:  # pragma: no cover - the [hf] extra is missing
        raise ImportError(
            "memplan's transformers integration needs transformers with its exporters:"
            " pip install 'memplan[hf]'"
        ) from e
    return ExecutorchExporter


def _make_exporter_class() -> type:
    base = _exporter_base()

    class MemplanExecutorchExporter(base):  # type: ignore[misc, valid-type]
        """transformers' `ExecutorchExporter`, memory-planned by memplan (`substituted`'s options)."""

        def __init__(
            self,
            solver: str = solvers.DEFAULT_SOLVER,
            *,
            time_limit_s: float | None = solvers.DEFAULT_TIME_LIMIT_S,
            build_stock: bool = False,
            **options: Any,
        ) -> None:
            super().__init__()
            self.memplan_options = {"solver": solver, "time_limit_s": time_limit_s, **options}
            self.build_stock = build_stock
            self.programs: list[ProgramResult] = []

        def export_program(self, model: Any, sample_inputs: Any, config: Any) -> Any:
            with substituted(build_stock=self.build_stock, **self.memplan_options) as run:
                exported = super().export_program(model, sample_inputs, config)
            for program in run.programs:
                program.index = len(self.programs) + 1
                self.programs.append(program)
            return exported

    return MemplanExecutorchExporter


_CLASS: type | None = None


def exporter_class() -> type:
    """`MemplanExecutorchExporter`, made on first use (it subclasses transformers' exporter)."""
    global _CLASS
    if _CLASS is None:
        _CLASS = _make_exporter_class()
    return _CLASS


def __getattr__(name: str) -> Any:
    if name == "MemplanExecutorchExporter":
        return exporter_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def register_exporter() -> None:
    """Make `AutoHfExporter.from_config(ExecutorchConfig(...))` return memplan's exporter."""
    from transformers.exporters.auto import register_backend
    from transformers.exporters.runners.runner_executorch import ExecutorchModelRunner

    register_backend(exporter_class(), ExecutorchModelRunner)


def register_portable_backend() -> None:
    """`ExecutorchConfig(backend="portable")`: lower without a partitioner, for ExecuTorch's portable kernels."""
    from transformers.exporters import exporter_executorch

    exporter_executorch._BACKEND_PREPARE.setdefault(PORTABLE, _prepare_for_portable)


def _prepare_for_portable(model: Any, sample_inputs: dict[str, Any]) -> tuple[Any, dict[str, Any], list]:
    """As transformers prepares for XNNPACK (CPU, contiguous inputs, batched experts), no partitioner."""
    from transformers.exporters import exporter_executorch

    model, sample_inputs, _ = exporter_executorch.prepare_for_xnnpack(model, sample_inputs)
    return model, sample_inputs, []
