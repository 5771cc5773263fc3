"""Shared by every test folder: figures drawn off screen and closed after each test; helper modules importable;
Cadence's preserve-ops list restored after each test.

pytest puts this folder on sys.path (rootdir conftest, prepend import mode), so the helper modules
beside it (`et_helpers`, `strategies`, `minimalloc_files`) are imported by their plain names everywhere.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator

import matplotlib
import pytest

matplotlib.use("Agg")  # before any test imports pyplot: no display on CI


@pytest.fixture(autouse=True)
def close_figures() -> Iterator[None]:
    """Every figure a test opened is closed after it (matplotlib keeps them alive otherwise)."""
    yield
    if "matplotlib.pyplot" in sys.modules:
        sys.modules["matplotlib.pyplot"].close("all")


CADENCE_COMPILER = "executorch.backends.cadence.aot.compiler"


@pytest.fixture(autouse=True)
def cadence_preserve_ops_restored() -> Iterator[None]:
    """Cadence's module-level `TO_EDGE_PRESERVE_OPS` holds the contents it had before the test.

    ExecuTorch 1.5.1's edge verifier extends the config's `preserve_ops` list with itself
    (verifier.py, `_preserve_ops.extend(edge_compile_config.preserve_ops)`), and Cadence passes its
    module-level list: every Cadence lowering multiplies it, so each later lowering in the same process
    verifies against a longer list (a 2-second test took 11 minutes after the others in the default run).
    """
    compiler = sys.modules.get(CADENCE_COMPILER)
    before = list(compiler.TO_EDGE_PRESERVE_OPS) if compiler is not None else None
    yield
    compiler = sys.modules.get(CADENCE_COMPILER)
    if compiler is None:
        return
    if before is None:  # imported during this test: the module defines it without repeats
        before = list(dict.fromkeys(compiler.TO_EDGE_PRESERVE_OPS))
    compiler.TO_EDGE_PRESERVE_OPS[:] = before
