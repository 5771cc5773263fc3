"""Shared by every test folder: figures drawn off screen and closed after each test; helper modules importable;
Cadence's preserve-ops list restored after each test.

pytest puts this folder on sys.path (rootdir conftest, prepend import mode), so the helper package
beside it, `helpers` (cli, executorch_programs, minimalloc_files, strategies), is imported by name everywhere.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator

import matplotlib
import pytest

from memplan.planner.algorithms.cadence.importable import preserve_ops_kept

matplotlib.use("Agg")  # before any test imports pyplot: no display on CI


@pytest.fixture(autouse=True)
def close_figures() -> Iterator[None]:
    """Every figure a test opened is closed after it (matplotlib keeps them alive otherwise)."""
    yield
    if "matplotlib.pyplot" in sys.modules:
        sys.modules["matplotlib.pyplot"].close("all")


@pytest.fixture(autouse=True)
def cadence_preserve_ops_restored() -> Iterator[None]:
    """Every test leaves Cadence's preserve-ops list as it found it (planner.algorithms.cadence.importable)."""
    with preserve_ops_kept():
        yield
