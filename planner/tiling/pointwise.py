"""Whether an op torch does not tag `Tag.pointwise` is pointwise in space, read off its decomposition.

Some elementwise ops lack the tag (`aten.hardswish` in torch 2.x; the quantize/dequantize ops of
pt2e quantization, `quantized_decomposed::*_per_tensor`), and a region must not end at them for that.
Instead of a list of names, the op's own decomposition is run on meta tensors of the call's shapes
and dtypes under a dispatch mode that records every op it calls: torch's `decomposition_table`
entry, or else the op's `CompositeExplicitAutograd` kernel (how `quantized_decomposed` defines its
ops: `quantize_per_tensor` is mul, round, add, clamp, `_to_copy`). The op counts as pointwise when
every recorded op is tagged pointwise (or, recursively up to `MAX_DEPTH`, is itself derived pointwise)
and every tensor in the trace broadcasts to the output's shape: no reduction (softmax's `amax`), no
index or view (upsample's `arange`/`_unsafe_index`, a per-channel dequantize's `permute`), so every
output element reads its own position of the inputs. A trace that fails means unknown, so not
pointwise.

Verdicts are cached per op overload and call signature (the shapes, dtypes and non-tensor arguments),
since a decomposition may branch on them.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch._decomp import decomposition_table
from torch.fx import Node
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten, tree_unflatten

MAX_DEPTH = 3  # nested decompositions followed before giving up

_VERDICTS: dict[tuple, bool] = {}


@dataclass(frozen=True)
class Call:
    """One op a decomposition ran: its arguments and its result (meta tensors)."""

    op: Any
    args: tuple
    kwargs: dict[str, Any]
    out: Any


class _Recorder(TorchDispatchMode):
    """Records every op dispatched while active (ops they call inside are not seen again)."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[Call] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        self.calls.append(Call(func, tuple(args), dict(kwargs), out))
        return out


def is_pointwise(node: Node) -> bool:
    """True when the node's op is tagged pointwise, or derived so from its decomposition on the node's
    shapes and dtypes (its arguments' `val`)."""
    args, kwargs = torch.fx.node.map_arg((node.args, node.kwargs), lambda a: a.meta.get("val"))
    return _pointwise(node.target, tuple(args), dict(kwargs), 0)


def derived_pointwise(op: Any, args: tuple, kwargs: dict[str, Any] | None = None) -> bool:
    """True when `op(*args, **kwargs)` decomposes into pointwise ops on same-position elements.

    Tensors in `args`/`kwargs` may be real, fake or meta; only their shapes and dtypes are used.
    """
    return _derived(op, tuple(args), dict(kwargs or {}), 0)


def decomposition(op: Any) -> Callable[..., Any] | None:
    """What `op` is made of: torch's decomposition, or its CompositeExplicitAutograd kernel."""
    found = decomposition_table.get(op)
    if found is not None:
        return found
    key = torch._C.DispatchKey.CompositeExplicitAutograd
    if isinstance(op, torch._ops.OpOverload) and op.has_kernel_for_dispatch_key(key):
        return functools.partial(op._op_dk, key)
    return None


def decomposed_calls(op: Any, args: tuple, kwargs: dict[str, Any]) -> list[Call] | None:
    """The ops `op(*args, **kwargs)` decomposes into, run on meta tensors of the same shapes and
    dtypes; None when it has no decomposition or it cannot run on meta tensors."""
    split = decomposition(op)
    flat, spec = tree_flatten((args, kwargs))
    if split is None or not any(isinstance(a, torch.Tensor) for a in flat):
        return None
    metas = [
        torch.empty(a.shape, dtype=a.dtype, device="meta") if isinstance(a, torch.Tensor) else a for a in flat
    ]
    meta_args, meta_kwargs = tree_unflatten(metas, spec)
    try:
        with _Recorder() as recorder:
            split(*meta_args, **meta_kwargs)
    except Exception:  # a decomposition that cannot run on meta tensors: its dependence is unknown
        return None
    return recorder.calls


def _derived(op: Any, args: tuple, kwargs: dict[str, Any], depth: int) -> bool:
    flat, _ = tree_flatten((args, kwargs))
    signature = tuple(
        (tuple(int(d) for d in a.shape), a.dtype) if isinstance(a, torch.Tensor) else repr(a) for a in flat
    )
    key = (op, signature, depth)
    if key not in _VERDICTS:
        _VERDICTS[key] = _trace_verdict(op, args, kwargs, depth)
    return _VERDICTS[key]


def _trace_verdict(op: Any, args: tuple, kwargs: dict[str, Any], depth: int) -> bool:
    calls = None if depth >= MAX_DEPTH else decomposed_calls(op, args, kwargs)
    if not calls or not isinstance(calls[-1].out, torch.Tensor):
        return False  # no decomposition, or several outputs (or none): not one elementwise value
    out = tuple(int(d) for d in calls[-1].out.shape)
    for call in calls:
        tensors, _ = tree_flatten((call.args, call.kwargs, call.out))
        if not all(_broadcasts(t, out) for t in tensors if isinstance(t, torch.Tensor)):
            return False
    return all(_pointwise(c.op, c.args, c.kwargs, depth + 1) for c in calls)


def _pointwise(op: Any, args: tuple, kwargs: dict[str, Any], depth: int) -> bool:
    """Tagged pointwise, or derived so at `depth` nested decompositions."""
    if torch.Tag.pointwise in getattr(op, "tags", ()):
        return True
    return _derived(op, args, kwargs, depth)


def _broadcasts(tensor: torch.Tensor, out: tuple[int, ...]) -> bool:
    """True for a tensor whose shape broadcasts to `out` without changing it."""
    shape = tuple(int(d) for d in tensor.shape)
    if len(shape) > len(out):
        return False
    return all(s in (1, o) for s, o in zip(reversed(shape), reversed(out), strict=False))
