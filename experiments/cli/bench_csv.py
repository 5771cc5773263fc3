"""Solvers on a folder of MiniMalloc CSV problems (e.g. MiniMalloc's own benchmark set).

    memplan bench-csv [DIR] --solvers bestfit,cpsat --time-limit 30 [--capacity-from-name]

DIR defaults to MiniMalloc's benchmark problems, which ship with memplan
(experiments.bench.minimalloc.MINIMALLOC_DIR).

With `capacity_from_name` each file's capacity comes from its name
(`A.1048576.csv`) and a run is a decision problem: it succeeds when its plan
fits, as in MiniMalloc's benchmarks. A file that cannot be read or solved
becomes a row with its error, so one bad file does not stop the bench.
`seconds_over_limit` is how long a solve ran past the time limit and
`overran_in` the stage that took most of that time (empty when it kept to it).
"""

from __future__ import annotations

import os
import stat
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from memplan.errors import UsageError
from memplan.experiments.checks import check_choice, check_time_limit

# Ten times MiniMalloc's largest problems and the 1,000,000-buffer files of bench.scale (~30 MB).
MAX_CSV_BYTES = 1 << 30
COLUMNS = (
    "file",
    "solver",
    "buffers",
    "capacity_bytes",
    "lower_bound_bytes",
    "arena_bytes",
    "arena_over_lb",
    "fits",
    "proven_optimal",
    "solve_seconds",
    "seconds_over_limit",
    "overran_in",
    "error",
)


def bench_csv(
    folder: str | Path,
    solvers: Sequence[str],
    time_limit_s: float,
    capacity_from_name: bool = False,
    progress: bool = False,
) -> pd.DataFrame:
    """One row per (CSV file, solver), files in name order; `progress` shows a bar over the files."""
    from memplan import solvers as registry

    for name in solvers:
        check_choice("solver", name, registry.available())
    if not solvers:
        raise UsageError(f"no solver given; choose from: {', '.join(registry.available())}")
    check_time_limit(time_limit_s)
    files = csv_files(folder)
    from tqdm import tqdm

    rows = []
    for path in tqdm(files, desc="bench-csv", unit="file", disable=not progress or None):
        rows += _bench_file(path, solvers, time_limit_s, capacity_from_name)
    df = pd.DataFrame.from_records(rows, columns=list(COLUMNS))
    return df.astype(
        {c: "Int64" for c in ("buffers", "capacity_bytes", "lower_bound_bytes", "arena_bytes")}
        | {"fits": "boolean", "proven_optimal": "boolean"}
    )


def csv_files(folder: str | Path) -> list[Path]:
    """The `*.csv` entries of `folder` in name order (UsageError when there are none)."""
    folder = Path(folder)
    if not folder.is_dir():
        raise UsageError(f"{str(folder)!r} is not a folder of MiniMalloc .csv files")
    files = sorted(folder.glob("*.csv"))
    if not files:
        raise UsageError(f"no .csv files in {str(folder)!r}")
    return files


def check_out_not_an_input(out: Path, files: Sequence[Path]) -> None:
    """UsageError when writing the table to `out` would overwrite one of the problems read."""
    inputs = {os.path.realpath(f) for f in files}
    if os.path.realpath(out) in inputs:
        raise UsageError(f"--out {str(out)!r} is one of the input problems; write the table elsewhere")


def unreadable(path: Path) -> str | None:
    """Why `path` is not read (not a regular file, or over MAX_CSV_BYTES), or None. Checked on the file
    itself, through links, before opening it: a FIFO would block and /dev/zero never end."""
    try:
        info = path.stat()
    except OSError as exc:
        return f"cannot read: {exc.strerror or exc}"
    if not stat.S_ISREG(info.st_mode):
        return "not a regular file (a FIFO, socket, device or folder): not read"
    if info.st_size > MAX_CSV_BYTES:
        return f"{info.st_size:,} B, over the {MAX_CSV_BYTES:,} B a problem file may have: not read"
    return None


def _bench_file(
    path: Path, solvers: Sequence[str], time_limit_s: float, capacity_from_name: bool
) -> list[dict]:
    from memplan import solvers as registry
    from memplan.errors import InfeasibleError, ProblemError
    from memplan.io import read_minimalloc_csv
    from memplan.peak_bound import lower_bound

    refused = unreadable(path)
    if refused is not None:
        return [{"file": path.name, "solver": s, "error": refused} for s in solvers]
    try:
        problem = read_minimalloc_csv(path, capacity_from_name=capacity_from_name)
    except ProblemError as exc:
        return [{"file": path.name, "solver": s, "error": str(exc)} for s in solvers]
    except Exception as exc:  # noqa: BLE001 - a reader fault is this file's row, never the other files' loss
        return [{"file": path.name, "solver": s, "error": f"{type(exc).__name__}: {exc}"} for s in solvers]
    bound = lower_bound(problem)
    base = {
        "file": path.name,
        "buffers": len(problem.buffers),
        "capacity_bytes": problem.capacity,
        "lower_bound_bytes": bound,
    }
    rows = []
    for solver in solvers:
        try:
            plan = registry.solve(problem, solver, time_limit_s)
        except InfeasibleError as exc:  # the message's first clause says what the best plan needs
            rows.append({**base, "solver": solver, "fits": False, "error": str(exc).split(";")[0]})
            continue
        except ProblemError as exc:
            rows.append({**base, "solver": solver, "error": str(exc)})
            continue
        except Exception as exc:  # noqa: BLE001 - a solver fault is this row's result, not the bench's end
            rows.append({**base, "solver": solver, "error": f"{type(exc).__name__}: {exc}"})
            continue
        rows.append(
            {
                **base,
                "solver": solver,
                "arena_bytes": plan.arena_size,
                "arena_over_lb": plan.arena_size / bound if bound else None,
                "fits": None if problem.capacity is None else plan.arena_size <= problem.capacity,
                "proven_optimal": plan.proven_optimal,
                "solve_seconds": plan.seconds,
                "seconds_over_limit": plan.seconds_over_limit,
                "overran_in": plan.overran_in,
            }
        )
    return rows
