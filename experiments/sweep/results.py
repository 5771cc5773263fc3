"""The results API: a sweep folder read back as one typed DataFrame, and the table written as CSV or Parquet.

`load_results(folder)` gives the same columns and dtypes whichever file the folder holds: nullable
integers (`Int64`) for byte counts, nullable booleans (`boolean`) for `proven_optimal`, `ran_ok`,
`matches_eager`, `string` for names and errors, so a missing value is `<NA>`, never a float NaN
that turns integers into floats. Parquet needs pyarrow (`pip install 'memplan[parquet]'`).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pandas as pd

from memplan.errors import UsageError
from memplan.experiments.sweep.table import COLUMNS, DTYPES

CSV_FILE = "results.csv"
PARQUET_FILE = "results.parquet"
FORMATS = ("csv", "parquet")
STRING_COLUMNS = (
    "model",
    "method",
    "solver",
    "not_proven_because",
    "plan_solver",
    "levers",
    "lowering",
    "error",
)


def require_pyarrow() -> None:
    """Raise UsageError saying how to get pyarrow unless it is importable."""
    if importlib.util.find_spec("pyarrow") is None:
        raise UsageError("the parquet format needs pyarrow: pip install 'memplan[parquet]' (or pyarrow)")


def check_format(fmt: str) -> str:
    if fmt not in FORMATS:
        raise UsageError(f"unknown format {fmt!r}; choose from: {', '.join(FORMATS)}")
    if fmt == "parquet":
        require_pyarrow()
    return fmt


class SweepResults(pd.DataFrame):
    """`load_results`' table: a DataFrame that, in Jupyter, shows the solvers compared (arena / lower
    bound per model and method, their geometric means as bars) instead of its forty columns. Tables
    derived from it (a filter, a pivot) are plain DataFrames."""

    @property
    def _constructor(self) -> type[pd.DataFrame]:
        return pd.DataFrame

    def _repr_html_(self) -> str:  # type: ignore[override]
        from memplan.experiments.sweep.notebook import results_html

        return results_html(self)


def typed(df: pd.DataFrame) -> pd.DataFrame:
    """The results columns with their nullable dtypes (columns it does not know are left alone)."""
    for column, dtype in DTYPES.items():
        if column in df.columns:
            df[column] = _as(df[column], dtype)
    for column in STRING_COLUMNS:
        if column in df.columns:
            df[column] = df[column].astype("string")
    if "method" in df.columns:
        df["method"] = df["method"].fillna("")
    return df


def _as(column: pd.Series, dtype: str) -> pd.Series:
    if dtype == "boolean" and column.dtype == object:
        words = {"True": True, "False": False, "true": True, "false": False}
        column = column.map(lambda v: words.get(v, v) if isinstance(v, str) else v)
    return column.astype(dtype)


def write_table(df: pd.DataFrame, folder: Path, fmt: str = "csv") -> Path:
    """Write the results table as `results.csv` or `results.parquet`; return the path."""
    check_format(fmt)
    if fmt == "parquet":
        path = folder / PARQUET_FILE
        df.to_parquet(path, index=False)
    else:
        path = folder / CSV_FILE
        df.to_csv(path, index=False)
    return path


def load_results(folder: str | Path) -> SweepResults:
    """A sweep folder's results table, typed: from results.parquet, results.csv or the run log (a
    DataFrame; `SweepResults` only adds how it shows itself in Jupyter)."""
    folder = Path(folder)
    if (folder / PARQUET_FILE).is_file():
        require_pyarrow()
        return SweepResults(typed(pd.read_parquet(folder / PARQUET_FILE)))
    if (folder / CSV_FILE).is_file():
        return SweepResults(typed(pd.read_csv(folder / CSV_FILE, keep_default_na=True)))
    from memplan.experiments.sweep.run_log import RUNS_FILE, RunLog
    from memplan.experiments.sweep.table import table

    if (folder / RUNS_FILE).is_file():
        return SweepResults(typed(table(RunLog(folder))))
    raise UsageError(
        f"{str(folder)!r} holds no sweep results ({CSV_FILE}, {PARQUET_FILE} or {RUNS_FILE}); run memplan sweep --out {folder}"
    )


__all__ = ["COLUMNS", "SweepResults", "FORMATS", "check_format", "load_results", "typed", "write_table"]
