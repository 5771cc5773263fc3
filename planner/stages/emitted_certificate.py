"""A lower bound on the emitted program's own lower bound, read off the graph about to be emitted.

`pte` derives an emitted method's problem from its instruction stream: a tensor lives from the first
instruction naming it to the last (graph inputs from the start, outputs to the end); a tensor first
named as read, whose bytes nothing wrote before, is state, live for the whole method; tensors sharing
bytes while live are one block, rounded up to the alignment. The instructions are the graph's nodes
in order, each naming what `instruction_arguments` says (the traffic count relies on the same, and is
tested against emitted programs). So at any one instruction, the planned tensors live there by those
rules occupy, per arena, at least the union of their byte ranges, in every layout `pte` accepts: that
union at the busiest instruction is at most the emitted lower bound. Lifetimes are only ever taken
shorter than `pte`'s (inputs and outputs are not extended), which keeps the figure a lower bound.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch
from executorch.exir.delegate import executorch_call_delegate
from executorch.exir.memory_planning import get_node_tensor_specs
from executorch.exir.tensor import TensorSpec
from torch.utils._pytree import tree_flatten

import memplan.timeline as timeline
from memplan.arith import align_up
from memplan.planner.memory.instruction_traffic import instruction_arguments


@dataclass
class _Named:
    """One planned tensor's first and last naming instruction (graph node positions)."""

    spec: TensorSpec
    first: int
    last: int
    first_node: torch.fx.Node

    @property
    def range(self) -> tuple[int, int]:
        assert self.spec.mem_offset is not None
        return self.spec.mem_offset, self.spec.mem_offset + self.spec.nbytes()


def certified_bound(program: Any, alignment: int, shared: bool) -> dict[int, int]:
    """Per arena: the bytes `program` (an ExportedProgram) keeps live at its busiest instruction.

    Ranges are rounded out to `alignment` as `pte` rounds blocks, unless some planned offset is not a
    multiple of it (`pte` then plans at less) or state may stay at its bytes unrounded (`shared`:
    other methods plan in its arena).
    """
    graph = program.graph_module.graph
    named: dict[int, _Named] = {}
    planned: list[TensorSpec] = []
    for step, node in enumerate(graph.nodes):
        planned += [s for s in get_node_tensor_specs(node) if s.mem_offset is not None]
        for spec in instruction_arguments(node):
            if spec.mem_id is not None and spec.mem_offset is not None and spec.nbytes():
                named.setdefault(id(spec), _Named(spec, step, step, node)).last = step
    end = len(graph.nodes)
    for entry in _state(program, named):
        entry.first, entry.last = 0, end
    rounded = not shared and all(s.mem_offset % alignment == 0 for s in planned)
    by_arena: dict[int, list[_Named]] = defaultdict(list)
    for entry in named.values():
        assert entry.spec.mem_id is not None
        by_arena[entry.spec.mem_id].append(entry)
    bounds = {}
    for mem_id, lives in by_arena.items():
        _, busiest = timeline.peak([(e.first, e.last + 1, e.spec.nbytes()) for e in lives])
        live = [e.range for e in lives if e.first <= busiest <= e.last]
        bounds[mem_id] = _union(live, alignment if rounded else 1)
    return bounds


def _state(program: Any, named: dict[int, _Named]) -> list[_Named]:
    """The buffers `pte` reads as state: no user input, first named as a kernel's positional argument
    (read, not an `out`), over bytes no input holds and no tensor named earlier took."""
    user_inputs = set(program.graph_signature.user_inputs)
    held = [
        e.range
        for e in named.values()
        if e.first_node.op == "placeholder" and e.first_node.name in user_inputs
    ]
    found = []
    for node in program.graph_module.graph.nodes:
        if node.op != "placeholder" or node.name in user_inputs:
            continue
        for spec in get_node_tensor_specs(node):
            entry = named.get(id(spec))
            if entry is None or not _read_first(entry):
                continue
            earlier = [
                e.range for e in named.values() if e.first < entry.first and e.spec.mem_id == spec.mem_id
            ]
            if not any(_overlaps(r, entry.range) for r in earlier + held):
                found.append(entry)
    return found


def _read_first(entry: _Named) -> bool:
    """True when the first instruction naming the tensor reads it: a kernel's positional argument
    (a schema's `out` arguments are keyword-only; a delegate's arguments may be outputs)."""
    node = entry.first_node
    if node.op != "call_function" or node.target is executorch_call_delegate:
        return False
    positional = [a for a in tree_flatten(node.args)[0] if isinstance(a, torch.fx.Node)]
    return any(spec is entry.spec for a in positional for spec in get_node_tensor_specs(a))


def _overlaps(a: tuple[int, int], b: tuple[int, int]) -> bool:
    return a[0] < b[1] and b[0] < a[1]


def reaches(bounds: Mapping[int, int], arena_sizes: Mapping[int, int]) -> bool:
    """True when every arena's certified bytes equal the plan's arena there."""
    return {k: v for k, v in bounds.items() if v} == {k: v for k, v in arena_sizes.items() if v}


def _union(ranges: list[tuple[int, int]], alignment: int) -> int:
    """Bytes the ranges cover, each rounded out to `alignment`."""
    covered, reach = 0, 0
    for lo, hi in sorted((lo // alignment * alignment, align_up(hi, alignment)) for lo, hi in ranges):
        covered += max(0, hi - max(lo, reach))
        reach = max(reach, hi)
    return covered
