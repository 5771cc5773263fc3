"""What Cadence's compiler needs from Python that Python 3.11 lacks, and a guard against one of its bugs."""

from __future__ import annotations

import contextlib
import sys
import typing
from collections.abc import Iterator

import typing_extensions

CADENCE_COMPILER = "executorch.backends.cadence.aot.compiler"


def cadence_passes_importable() -> None:
    """Cadence's graph passes (fuse_ops, imported by its compiler) import `typing.override`, new in
    Python 3.12; on 3.11 the same decorator comes from typing_extensions. Call before importing them."""
    if not hasattr(typing, "override"):
        typing.override = typing_extensions.override  # type: ignore[attr-defined]


@contextlib.contextmanager
def preserve_ops_kept() -> Iterator[None]:
    """Cadence's module-level `TO_EDGE_PRESERVE_OPS` holds, afterwards, the contents it had before.

    ExecuTorch 1.5.1's edge verifier extends the config's `preserve_ops` list with itself
    (verifier.py, `_preserve_ops.extend(edge_compile_config.preserve_ops)`), and Cadence passes its
    module-level list: every Cadence lowering in a process multiplies it (4 -> 16 -> 64 -> 256
    entries), so each later lowering verifies against a longer list (a 2-second test took 11 minutes
    after the others). Wrap every Cadence lowering a process repeats.
    """
    compiler = sys.modules.get(CADENCE_COMPILER)
    before = list(compiler.TO_EDGE_PRESERVE_OPS) if compiler is not None else None
    try:
        yield
    finally:
        compiler = sys.modules.get(CADENCE_COMPILER)
        if compiler is not None:
            if before is None:  # imported meanwhile: the module defines it without repeats
                before = list(dict.fromkeys(compiler.TO_EDGE_PRESERVE_OPS))
            compiler.TO_EDGE_PRESERVE_OPS[:] = before
