"""How the flows compare memplan's program with the stock program: bit for bit, and finite.

Bit for bit because both programs run the same kernels on the same inputs; only where the tensors
sit differs. Finite because a NaN in both programs would hide a wrong plan: NaN equals nothing, so a
comparison that let it pass would compare nothing (export_llama without a checkpoint gave NaN in
both programs until its flow passed one).
"""

from __future__ import annotations

from typing import Any

import torch


def finite(value: Any) -> bool:
    """False for a floating tensor holding a NaN or an infinity; True for anything else."""
    return not (isinstance(value, torch.Tensor) and value.is_floating_point()) or bool(value.isfinite().all())


def identical(a: Any, b: Any) -> bool:
    """Tensors: same shape, dtype and bits; anything else: equal."""
    if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
        return a.shape == b.shape and a.dtype == b.dtype and torch.equal(a, b)
    return bool(a == b)


def identical_and_finite(mine: list[Any], theirs: list[Any]) -> bool:
    """Every value of `mine` identical to the same value of `theirs`, and every one of theirs finite."""
    return (
        len(mine) == len(theirs)
        and all(finite(t) for t in theirs)
        and all(identical(a, b) for a, b in zip(mine, theirs))
    )
