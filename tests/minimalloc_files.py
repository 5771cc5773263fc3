"""Where the MiniMalloc benchmark files are, and what their README says about them.

CI keeps them at `../shared/benchmarks/minimalloc` relative to the repository
root. Missing files fail the tests that need them (never a silent skip).
"""

from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

# file -> (buffers, lower bound, best known peak), from the benchmarks' README.md.
KNOWN = {
    "A.1048576.csv": (154, 1_048_576, 1_048_576),
    "B.1048576.csv": (170, 1_048_576, 1_048_576),
    "C.1048576.csv": (203, 1_039_360, 1_039_360),
    "D.1048576.csv": (213, 986_112, 1_038_336),
    "E.1048576.csv": (215, 1_048_576, 1_048_576),
    "F.1048576.csv": (296, 1_048_576, 1_048_576),
    "G.1048576.csv": (308, 1_048_576, 1_048_576),
    "H.1048576.csv": (316, 1_048_576, 1_048_576),
    "I.1048576.csv": (374, 1_048_576, 1_048_576),
    "J.1048576.csv": (409, 989_184, 1_041_408),
    "K.1048576.csv": (454, 1_048_576, 1_048_576),
    "input.12.csv": (5, 12, 12),
}


def minimalloc_dir() -> Path:
    """The benchmark directory; fails the calling test with the searched path if absent."""
    path = (REPO.parent / "shared" / "benchmarks" / "minimalloc").resolve()
    missing = [name for name in KNOWN if not (path / name).is_file()]
    if missing:
        pytest.fail(
            f"MiniMalloc benchmark files {missing} not found in {path}; CI expects them at"
            " ../shared/benchmarks/minimalloc relative to the repository root"
        )
    return path
