"""Memory traffic as the emitted program counts it: the bytes of every instruction's tensor arguments.

Under a memory map, what a plan buys is how much of the program's traffic the
fast banks serve. The measure is read off the emitted program
(`emitted_traffic`): every kernel or delegate call's tensor arguments (lists
expanded; an out-variant kernel names its `out` tensor twice, as the argument
and as the result), each counted at its bytes, in the arena it lives in.

The planner predicts the same count from the graph it receives
(`argument_counts`), following the emitter (exir/emit/_emitter.py): an
operator call names its schema arguments and then its results, a delegate
call its inputs and then its outputs; `memory.view` of a static planned
tensor is elided (a dynamic one is an `et_view` call on base and view);
allocations, tuple projections and frees move no bytes. A lever that deletes
instructions (a fused cat, a no-op slice) takes their arguments off the count
(`without_instructions`), so the solvers weigh banks by the program that will
be emitted.
"""

from __future__ import annotations

import dataclasses
import math
import operator
from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping

import torch
from executorch.exir import memory, schema
from executorch.exir.delegate import executorch_call_delegate
from executorch.exir.memory_planning import get_node_tensor_specs
from executorch.exir.scalar_type import ScalarType
from executorch.exir.tensor import TensorSpec
from torch.utils._pytree import tree_flatten

from memplan.problem import Problem

ELEMENT_BYTES = {  # bytes per element of each scalar type a program's tensors carry
    ScalarType.BYTE: 1,
    ScalarType.CHAR: 1,
    ScalarType.SHORT: 2,
    ScalarType.INT: 4,
    ScalarType.LONG: 8,
    ScalarType.HALF: 2,
    ScalarType.FLOAT: 4,
    ScalarType.DOUBLE: 8,
    ScalarType.COMPLEX32: 4,
    ScalarType.COMPLEX64: 8,
    ScalarType.COMPLEX128: 16,
    ScalarType.BOOL: 1,
    ScalarType.QINT8: 1,
    ScalarType.QUINT8: 1,
    ScalarType.QINT32: 4,
    ScalarType.BFLOAT16: 2,
    ScalarType.BITS16: 2,
    ScalarType.FLOAT8E5M2: 1,
    ScalarType.FLOAT8E4M3FN: 1,
    ScalarType.FLOAT8E5M2FNUZ: 1,
    ScalarType.FLOAT8E4M3FNUZ: 1,
    ScalarType.UINT16: 2,
    ScalarType.UINT32: 4,
    ScalarType.UINT64: 8,
}

# Calls the emitter turns into no instruction that touches tensor bytes.
_NO_INSTRUCTION = (memory.alloc, memory.free, operator.getitem)
_CONTROL_FLOW = (
    torch.ops.higher_order.cond,
    torch.ops.higher_order.map_impl,
    torch.ops.higher_order.while_loop,
    torch.ops.higher_order.scan,
)


def instruction_arguments(node: torch.fx.Node) -> list[TensorSpec]:
    """The tensor specs the instruction emitted for `node` names, in order, repeats kept ([] for none)."""
    if node.op != "call_function" or node.target in _NO_INSTRUCTION:
        return []
    if node.target is memory.view:
        spec = node.meta.get("spec")
        if isinstance(spec, TensorSpec) and spec.is_static_shape_tensor:
            return []  # elided: the view is its base's bytes under another shape
        return [*_specs_of(node.args[0]), *get_node_tensor_specs(node)]
    if node.target in _CONTROL_FLOW:
        return []  # jumps and moves; its submodules' instructions are their own graphs
    arguments = node.args[1:] if node.target is executorch_call_delegate else node.args
    found = [spec for arg in tree_flatten((arguments, node.kwargs))[0] for spec in _specs_of(arg)]
    return found + list(get_node_tensor_specs(node))


def _specs_of(arg: object) -> list[TensorSpec]:
    return list(get_node_tensor_specs(arg)) if isinstance(arg, torch.fx.Node) else []


def argument_counts(spec_of: Mapping[str, TensorSpec], nodes: Iterable[torch.fx.Node]) -> dict[str, int]:
    """Per buffer id: how many times the emitted instructions of `nodes` (a graph's, in order) name it."""
    counts: dict[str, int] = defaultdict(int)
    for bid, _ in _named(spec_of, nodes):
        counts[bid] += 1
    return dict(counts)


def argument_bytes(spec_of: Mapping[str, TensorSpec], nodes: Iterable[torch.fx.Node]) -> dict[str, int]:
    """Per buffer id: the bytes the emitted instructions of `nodes` move through it, each naming at
    the tensor's own bytes (not its aligned allocation): the emitted program's count, before emission."""
    moved: dict[str, int] = defaultdict(int)
    for bid, spec in _named(spec_of, nodes):
        moved[bid] += spec.nbytes()
    return dict(moved)


def _named(
    spec_of: Mapping[str, TensorSpec], nodes: Iterable[torch.fx.Node]
) -> Iterator[tuple[str, TensorSpec]]:
    """(buffer id, spec) for every time an instruction of `nodes` names a planned tensor."""
    bid_of = {id(spec): bid for bid, spec in spec_of.items()}
    for node in nodes:
        for spec in instruction_arguments(node):
            if (bid := bid_of.get(id(spec))) is not None:
                yield bid, spec


def without_instructions(
    problem: Problem, spec_of: Mapping[str, TensorSpec], removed: Iterable[torch.fx.Node]
) -> Problem:
    """The problem with the arguments of the `removed` nodes' instructions taken off each buffer's accesses."""
    taken = argument_counts(spec_of, removed)
    if not taken:
        return problem
    return dataclasses.replace(
        problem,
        buffers=tuple(
            dataclasses.replace(b, accesses=max(0, b.accesses - taken[b.id])) if b.id in taken else b
            for b in problem.buffers
        ),
    )


def emitted_traffic(program: schema.Program) -> dict[str, dict[int, int]]:
    """Per method, per mem_id: the bytes of every kernel and delegate call's planned tensor arguments.

    Tensors without an arena (constants, unplanned inputs) are not counted; every chain is.
    """
    out: dict[str, dict[int, int]] = {}
    for plan in program.execution_plan:
        moved: dict[int, int] = defaultdict(int)
        for chain in plan.chains:
            for instruction in chain.instructions:
                call = instruction.instr_args
                if not isinstance(call, (schema.KernelCall, schema.DelegateCall)):
                    continue
                for index in call.args:
                    for tensor in _tensors_named(plan.values, index):
                        info = tensor.allocation_info
                        if info is not None:
                            moved[info.memory_id] += (
                                math.prod(tensor.sizes) * ELEMENT_BYTES[tensor.scalar_type]
                            )
        out[plan.name] = dict(moved)
    return out


def _tensors_named(values: list[schema.EValue], index: int) -> list[schema.Tensor]:
    val = values[index].val
    if isinstance(val, schema.Tensor):
        return [val]
    if isinstance(val, (schema.TensorList, schema.OptionalTensorList)):
        return [v for i in val.items if i >= 0 and isinstance(v := values[i].val, schema.Tensor)]
    return []
