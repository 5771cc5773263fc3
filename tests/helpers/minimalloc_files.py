"""Where the MiniMalloc benchmark files are, and what their README says about them.

They ship in the repository as package data (`experiments/bench/data/minimalloc`, found through
`importlib.resources` as `memplan.experiments.bench.minimalloc.MINIMALLOC_DIR`). Missing files fail
the tests that need them, naming the path looked in (never a silent skip).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from memplan.experiments.bench.minimalloc import KNOWN, MINIMALLOC_DIR

__all__ = ["KNOWN", "minimalloc_dir"]


def minimalloc_dir() -> Path:
    """The benchmark directory; fails the calling test with the searched path if absent."""
    path = MINIMALLOC_DIR
    missing = [name for name in KNOWN if not (path / name).is_file()]
    if missing:
        pytest.fail(
            f"MiniMalloc benchmark files {missing} not found in {path}; they ship with memplan as package"
            " data (experiments/bench/data/minimalloc, [tool.setuptools.package-data] in pyproject.toml)"
        )
    return path
