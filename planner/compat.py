"""Every private ExecuTorch 1.5.1 name memplan relies on, in one place.

These are not part of ExecuTorch's public API and may change in any release;
when one does, this module is the only one to fix. Each name is re-exported
without its leading underscore. `export_context` reads ExecuTorch's call stack
because `MemoryPlanningPass.run` is not told which method it plans.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from types import FrameType
from typing import Any

from executorch.exir._serialize._program import PTEFile, deserialize_pte_binary, serialize_pte_binary
from executorch.exir.memory_planning import _contains_xnnpack_delegate as contains_xnnpack_delegate
from executorch.exir.memory_planning import (
    _extend_storage_base_lifetimes as extend_storage_base_lifetimes,
)
from executorch.exir.memory_planning import _get_mutable_buffer_specs as get_mutable_buffer_specs
from executorch.exir.memory_planning import _is_inplace_node as is_inplace_node
from executorch.exir.memory_planning import _is_out_var_node as is_out_var_node
from executorch.exir.memory_planning import _merge_bufsizes as merge_bufsizes
from executorch.exir.passes.replace_view_copy_with_view_pass import _ViewSpec as ViewSpec

__all__ = [
    "ExportContext",
    "PTEFile",
    "contains_xnnpack_delegate",
    "convert_to_linear_pass",
    "default_decomposition_table",
    "deserialize_pte_binary",
    "export_context",
    "extend_storage_base_lifetimes",
    "get_mutable_buffer_specs",
    "is_inplace_node",
    "is_out_var_node",
    "merge_bufsizes",
    "serialize_pte_binary",
    "ViewSpec",
]


def convert_to_linear_pass() -> Any:
    """XNNPACK's private `ConvertToLinearPass` (imported late: the XNNPACK backend is heavy)."""
    from executorch.backends.xnnpack._passes.convert_to_linear import ConvertToLinearPass

    return ConvertToLinearPass()


def default_decomposition_table() -> dict[Any, Any]:
    """The decompositions `to_edge` applies (`exir.tracer._default_decomposition_table`)."""
    from executorch.exir.tracer import _default_decomposition_table

    return _default_decomposition_table()


@dataclass(frozen=True)
class ExportContext:
    """Which method of which `to_executorch` call is being planned."""

    method: str
    key: Any  # the call's dict of execution programs: identifies it, lists every method
    num_methods: int


_PROGRAM_FILE = os.path.join("exir", "program", "_program.py")


def export_context(max_depth: int = 16) -> ExportContext | None:
    """The method being planned, read from the enclosing `to_executorch` frame.

    ExecuTorch 1.5.1 calls `memory_planning_pass.run(graph_module,
    graph_signature)` without the method name, from inside `for name, program
    in self._edge_programs.items()` in `EdgeProgramManager.to_executorch`; that
    loop variable is the only record of which method is being planned. Its
    `execution_programs` dict, new for every call, identifies the export.
    Returns None when `run` is called some other way.
    """
    frame: FrameType | None = sys._getframe(1)
    for _ in range(max_depth):
        if frame is None:
            return None
        code = frame.f_code
        if code.co_name == "to_executorch" and code.co_filename.endswith(_PROGRAM_FILE):
            local = frame.f_locals
            owner = local.get("self")
            name = local.get("name")
            programs = getattr(owner, "_edge_programs", None)
            if isinstance(name, str) and programs is not None:
                return ExportContext(name, local.get("execution_programs"), len(programs))
            return None
        frame = frame.f_back
    return None
