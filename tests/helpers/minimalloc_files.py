"""Where the MiniMalloc benchmark files are, and what their README says about them.

CI keeps them at `../shared/benchmarks/minimalloc` relative to the repository
root. Missing files fail the tests that need them (never a silent skip).
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
            f"MiniMalloc benchmark files {missing} not found in {path}; CI expects them at"
            " ../shared/benchmarks/minimalloc relative to the repository root"
        )
    return path
