"""The extract stage: one graph's tensors as the problem the given algorithm plans.

`extract` (planner.graph.extract) reads the tensors with ExecuTorch's own
semantics; here the memory map's banks, the algorithm's own constraints, its
form and one pool per device are added, and the submodule reservations set
where ExecuTorch's algorithms read them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

import torch
from torch.export.exported_program import ExportGraphSignature

from memplan.planner.algorithms.translation import Translation
from memplan.planner.graph.extract import Extraction, extract
from memplan.planner.memory.bank_maps import with_memory_map
from memplan.planner.memory.devices import DeviceArenas, split_by_device
from memplan.planner.stages.solver import Algorithm

Flags = tuple[bool, bool, bool]  # (alloc_graph_input, alloc_graph_output, alloc_mutable_buffers) of one graph


def extracted(
    graph_module: torch.fx.GraphModule,
    signature: ExportGraphSignature | None,
    alignment: int,
    flags: Flags,
    submodules: Callable[[], Sequence[int]] | Sequence[int] = (),
    name: str = "",
) -> Extraction:
    """`graph.extract` of one graph with its `flags` (the submodules' reservation: `submodules`)."""
    alloc_input, alloc_output, alloc_mutable = flags
    return extract(
        graph_module,
        signature,
        alignment=alignment,
        alloc_graph_input=alloc_input,
        alloc_graph_output=alloc_output,
        alloc_mutable_buffers=alloc_mutable,
        submodules=submodules,
        name=name,
    )


def in_form(ex: Extraction, algorithm: Algorithm) -> Extraction:
    """The extraction with its problem in the form the given algorithm plans (shared objects or not)."""
    if not algorithm.shared_objects:
        return ex
    return dataclasses.replace(ex, problem=dataclasses.replace(ex.problem, shared_objects=True))


def constrained(
    ex: Extraction,
    graph_module: torch.fx.GraphModule,
    where: str,
    algorithm: Algorithm,
    alignment: int,
    devices: bool,
) -> tuple[Extraction, DeviceArenas]:
    """The extraction with the memory map's banks, the algorithm's own constraints, its form and (with
    `devices`) one pool per device; the submodule reservations set where ExecuTorch's algorithms read them."""
    if algorithm.memory_map is not None:
        ex = with_memory_map(ex, graph_module, algorithm.memory_map, alignment)
    translation = algorithm.translation
    if isinstance(translation, Translation) and translation.constrain is not None:
        ex = translation.constrain(ex, graph_module, where)
    ex = in_form(ex, algorithm)
    arenas = DeviceArenas()
    if devices:
        ex, arenas = split_by_device(ex, where)
    reserved = [0] * (max(ex.reserved, default=0) + 1)
    for pool, size in ex.reserved.items():
        reserved[pool] = size
    graph_module.input_mem_buffer_sizes = reserved  # type: ignore[assignment]  # what ExecuTorch's greedy reads
    return ex, arenas
