"""MiniMalloc's benchmark problems: where they are, what their README says about them, how to read one.

The files ship inside memplan, as package data of `memplan.experiments.bench` (`data/minimalloc/`,
Apache-2.0, Google LLC: the folder's README and LICENSE), so a clone or an installed wheel has them and
no test, benchmark or example reads a file outside the package. One table of the README's facts
serves the benchmarks and the tests.
"""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path
from typing import NamedTuple

from memplan.io import read_minimalloc_csv
from memplan.problem import Problem

# An installed package is a folder on disk (setuptools, editable or not), so the resource is a Path.
MINIMALLOC_DIR = Path(str(files("memplan.experiments.bench") / "data" / "minimalloc"))
CAPACITY = 1_048_576  # the "challenging" instances are decision problems at this capacity


class Known(NamedTuple):
    """One instance's facts from the benchmarks' README.md."""

    buffers: int
    lower_bound: int
    best_known: int  # the best known peak; optimal where it equals the lower bound (not for D, J)
    paper_seconds: float | None  # MiniMalloc's time to decide it at CAPACITY, in its paper


KNOWN: dict[str, Known] = {
    "A.1048576.csv": Known(154, 1_048_576, 1_048_576, 4.9),
    "B.1048576.csv": Known(170, 1_048_576, 1_048_576, 3.7),
    "C.1048576.csv": Known(203, 1_039_360, 1_039_360, 0.6),
    "D.1048576.csv": Known(213, 986_112, 1_038_336, 2.7),
    "E.1048576.csv": Known(215, 1_048_576, 1_048_576, 3.7),
    "F.1048576.csv": Known(296, 1_048_576, 1_048_576, 5.4),
    "G.1048576.csv": Known(308, 1_048_576, 1_048_576, 1.2),
    "H.1048576.csv": Known(316, 1_048_576, 1_048_576, 1.8),
    "I.1048576.csv": Known(374, 1_048_576, 1_048_576, 3.9),
    "J.1048576.csv": Known(409, 989_184, 1_041_408, 0.9),
    "K.1048576.csv": Known(454, 1_048_576, 1_048_576, 0.6),
    "input.12.csv": Known(5, 12, 12, None),
}

CHALLENGING: dict[str, Known] = {name.split(".")[0]: k for name, k in KNOWN.items() if k.paper_seconds}


def minimalloc_problem(name: str, directory: Path = MINIMALLOC_DIR) -> Problem:
    """Challenging instance `name` ("A" ... "K") as MiniMalloc poses it, at CAPACITY."""
    return read_minimalloc_csv(directory / f"{name}.{CAPACITY}.csv")
