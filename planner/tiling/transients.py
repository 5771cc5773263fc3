"""Bytes an op holds beside its inputs and output once `to_edge` has decomposed it.

`to_edge` decomposes the ops of ExecuTorch's decomposition table (`aten.hardswish`: add, clamp,
clamp, mul, div and a dim-order copy; not pt2e's quantize/dequantize, which keep their own kernels),
and runs each as that sequence, and its intermediate tensors
are live in the arena at once. The cost counts them at the op's step, read off the same recorded
decomposition `pointwise` derives pointwise-ness from: the most bytes its intermediates (every
recorded result but the last) hold at one call, each live from its call to its last read there.
"""

from __future__ import annotations

import functools
import math

import torch
from torch.fx import Node
from torch.utils._pytree import tree_flatten

from memplan.planner.tiling.pointwise import Call, decomposed_calls

_TRANSIENT = "memplan_tiling_transient"


def transient_bytes(node: Node) -> int:
    """Intermediate bytes live at once inside the node's op after `to_edge` (0 for a core op)."""
    if _TRANSIENT not in node.meta:
        node.meta[_TRANSIENT] = _transient(node)
    return node.meta[_TRANSIENT]


@functools.cache
def _edge_decompositions() -> frozenset:
    """The ops `to_edge` decomposes: ExecuTorch's own decomposition table."""
    from executorch.exir.tracer import _default_decomposition_table

    return frozenset(_default_decomposition_table())


def _transient(node: Node) -> int:
    if node.op != "call_function" or node.target not in _edge_decompositions():
        return 0
    args, kwargs = torch.fx.node.map_arg((node.args, node.kwargs), lambda a: a.meta.get("val"))
    calls = decomposed_calls(node.target, tuple(args), dict(kwargs))
    return 0 if not calls else _peak(calls)


def _peak(calls: list[Call]) -> int:
    """Most bytes the calls' intermediate results (all but the last call's) hold at one call."""
    made: dict[int, tuple[int, int]] = {}  # id(result) -> (call index, bytes)
    last: dict[int, int] = {}
    for t, call in enumerate(calls):
        for value in tree_flatten((call.args, call.kwargs))[0]:
            if isinstance(value, torch.Tensor) and id(value) in made:
                last[id(value)] = t
        if t < len(calls) - 1 and isinstance(call.out, torch.Tensor):
            made[id(call.out)] = (t, math.prod(call.out.shape) * call.out.element_size())
    peak = 0
    for t in range(len(calls)):
        live = sum(size for key, (born, size) in made.items() if born <= t <= last.get(key, born))
        peak = max(peak, live)
    return peak
