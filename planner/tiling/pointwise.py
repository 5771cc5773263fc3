"""Whether an op torch does not tag `Tag.pointwise` is pointwise in space, read off its decomposition.

Some elementwise ops lack the tag (`aten.hardswish` in torch 2.x), and a region must not end at them
for that. Instead of a list of names, the op's own decomposition (torch's `decomposition_table`) is
traced with `make_fx` on meta tensors of the call's shapes and dtypes, and the op counts as pointwise
when every op of that trace is tagged pointwise (or, recursively up to `MAX_DEPTH`, is itself derived
pointwise) and every tensor in it broadcasts to the output's shape: no reduction (softmax's `amax`),
no index or view (upsample's `arange`/`_unsafe_index`), so every output element reads its own
position of the inputs. A trace that fails means unknown, so not pointwise.

Verdicts are cached per op overload and call signature (the shapes, dtypes and non-tensor arguments),
since a decomposition may branch on them.
"""

from __future__ import annotations

from typing import Any

import torch
from torch._decomp import decomposition_table
from torch.fx import Node
from torch.fx.experimental.proxy_tensor import make_fx
from torch.utils._pytree import tree_flatten, tree_unflatten

MAX_DEPTH = 3  # nested decompositions followed before giving up

_VERDICTS: dict[tuple, bool] = {}


def is_pointwise(node: Node) -> bool:
    """True when the node's op is tagged pointwise, or derived so from its decomposition on the node's
    shapes and dtypes (its arguments' `val`)."""
    return _pointwise(node, 0)


def derived_pointwise(op: Any, args: tuple, kwargs: dict[str, Any] | None = None) -> bool:
    """True when `op(*args, **kwargs)` decomposes into pointwise ops on same-position elements.

    Tensors in `args`/`kwargs` may be real, fake or meta; only their shapes and dtypes are used.
    """
    return _derived(op, tuple(args), dict(kwargs or {}), 0)


def _derived(op: Any, args: tuple, kwargs: dict[str, Any], depth: int) -> bool:
    flat, spec = tree_flatten((args, kwargs))
    signature = tuple(
        (tuple(int(d) for d in a.shape), a.dtype) if isinstance(a, torch.Tensor) else repr(a) for a in flat
    )
    key = (op, signature, depth)
    if key not in _VERDICTS:
        _VERDICTS[key] = _trace_verdict(op, flat, spec, depth)
    return _VERDICTS[key]


def _trace_verdict(op: Any, flat: list, spec: Any, depth: int) -> bool:
    decomposition = decomposition_table.get(op)
    tensors = [i for i, a in enumerate(flat) if isinstance(a, torch.Tensor)]
    if decomposition is None or depth >= MAX_DEPTH or not tensors:
        return False

    def call(*inputs: torch.Tensor) -> Any:
        values = list(flat)
        for i, t in zip(tensors, inputs, strict=True):
            values[i] = t
        args, kwargs = tree_unflatten(values, spec)
        return decomposition(*args, **kwargs)

    examples = [torch.empty(flat[i].shape, dtype=flat[i].dtype, device="meta") for i in tensors]
    try:
        graph = make_fx(call, tracing_mode="real")(*examples).graph
    except Exception:  # a decomposition that cannot run on meta tensors: its dependence is unknown
        return False
    result = next(n for n in graph.nodes if n.op == "output").args[0]
    if not isinstance(result, Node) or _shape(result) is None:
        return False  # several outputs (or none): not one elementwise value
    out = _shape(result)
    assert out is not None
    if not all(_broadcasts(_shape(n), out) for n in graph.nodes if n.op != "output"):
        return False
    return all(_pointwise(n, depth + 1) for n in graph.nodes if n.op == "call_function")


def _pointwise(node: Node, depth: int) -> bool:
    """Tagged pointwise, or derived so at `depth` nested decompositions."""
    if torch.Tag.pointwise in getattr(node.target, "tags", ()):
        return True
    args, kwargs = torch.fx.node.map_arg((node.args, node.kwargs), lambda a: a.meta.get("val"))
    return _derived(node.target, tuple(args), dict(kwargs), depth)


def _shape(node: Node) -> tuple[int, ...] | None:
    val = node.meta.get("val")
    return tuple(int(d) for d in val.shape) if isinstance(val, torch.Tensor) else None


def _broadcasts(shape: tuple[int, ...] | None, out: tuple[int, ...]) -> bool:
    """True for a non-tensor (None) or a tensor whose shape broadcasts to `out` without changing it."""
    if shape is None:
        return True
    if len(shape) > len(out):
        return False
    return all(s in (1, o) for s, o in zip(reversed(shape), reversed(out), strict=False))
