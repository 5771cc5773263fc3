"""A copy of an `EdgeProgramManager`'s programs as they were before `to_executorch`, weights shared.

`to_executorch` rewrites its edge programs in place (write-backs, out variants, memory planning), so
planning a method again — with the stock pass after memplan's failed, or to build the stock program for
comparison — needs the programs as they were. Graphs, signatures and node metadata are copied (specs
included: planning writes into them); tensors (weights, constants, buffers) are shared, never copied.
"""

from __future__ import annotations

import copy
from typing import Any

import torch
import torch.utils._pytree as pytree
from executorch.exir.lowered_backend_module import LoweredBackendModule
from executorch.exir.tensor import TensorSpec
from torch.export import ExportedProgram

from memplan.planner.compat import ViewSpec


def programs_copy(programs: dict[str, ExportedProgram]) -> dict[str, ExportedProgram]:
    """A copy of each program, its tensors shared with the original."""
    return {name: _program_copy(program) for name, program in programs.items()}


def manager_copy(manager: Any) -> Any:
    """A shallow copy of an `EdgeProgramManager` with copied programs (`programs_copy`)."""
    twin = copy.copy(manager)
    twin._edge_programs = programs_copy(manager._edge_programs)
    return twin


def _program_copy(program: ExportedProgram) -> ExportedProgram:
    memo: dict[int, Any] = {}
    for tensor in _tensors(program):
        memo[id(tensor)] = tensor
    twin = copy.deepcopy(program, memo)
    for module in twin.graph_module.modules():
        if isinstance(module, torch.fx.GraphModule):
            for node in module.graph.nodes:  # fx copies node.meta shallowly; specs are written in place
                if "spec" in node.meta:
                    spec = pytree.tree_map(lambda leaf: _spec_copy(leaf, memo), node.meta["spec"])
                    node.meta = {**node.meta, "spec": spec}
    return twin


def _spec_copy(spec: Any, memo: dict[int, Any]) -> Any:
    """A copy of one spec; a view's (`_ViewSpec`, whose attribute access runs through its base) field
    by field, its base copied once for all its views."""
    if not isinstance(spec, ViewSpec):
        return copy.deepcopy(spec, memo)
    if id(spec) not in memo:
        twin = object.__new__(type(spec))
        for name, value in object.__getattribute__(spec, "__dict__").items():
            object.__setattr__(
                twin, name, _spec_copy(value, memo) if isinstance(value, TensorSpec) else value
            )
        memo[id(spec)] = twin
    return memo[id(spec)]


def _tensors(program: ExportedProgram) -> list[torch.Tensor]:
    """Every tensor the program holds: its state, constants and the graph modules' own attributes."""
    found = [*program.state_dict.values(), *program.constants.values()]
    for module in program.graph_module.modules():
        found += [t for t in module.__dict__.values() if isinstance(t, torch.Tensor)]
        found += list(module.state_dict(keep_vars=True).values())
        if isinstance(module, LoweredBackendModule):
            original = module.original_module
            found += [*original.state_dict.values(), *original.constants.values()]
    return [t for t in pytree.tree_leaves(found) if isinstance(t, torch.Tensor)]
