"""Out-variant kernels known to be safe when `out` is the same memory as one of their inputs.

Writing a new state value where the state lives makes the producing op read
and write the same bytes when it reads the old state (`index_put(k_cache,
idx, v, out=k_cache)`). That is only correct if the portable kernel reads
each element before it writes it (or copies the input into `out` first).
Each entry here is established by a runtime test of its own
(`tests/test_state_kernels.py`), which runs the kernel with `out` aliasing
the named argument in `executorch.runtime` over several calls and compares
with eager PyTorch; an op that is not listed is refused with
`kernel_not_alias_safe`. Keys are out-variant overloads as they appear after
`ToOutVarPass`; values are the schema names of the arguments `out` may alias.
"""

from __future__ import annotations

import torch

ALIAS_SAFE_ARGS: dict[torch._ops.OpOverload, frozenset[str]] = {
    # memcpy(out, self) then writes the indexed positions from `values`.
    torch.ops.aten.index_put.out: frozenset({"self"}),
    # memcpy(out, self) then writes the slice from `src`.
    torch.ops.aten.slice_scatter.out: frozenset({"self"}),
    # Elementwise: element i of `out` is computed from element i of an input of the same shape.
    torch.ops.aten.add.out: frozenset({"self", "other"}),
    torch.ops.aten.sub.out: frozenset({"self", "other"}),
    torch.ops.aten.mul.out: frozenset({"self", "other"}),
}


def alias_safe_args(op: torch._ops.OpOverload) -> frozenset[str]:
    """The arguments of `op` that its `out` may alias (empty: none is known to be safe)."""
    return ALIAS_SAFE_ARGS.get(op, frozenset())
