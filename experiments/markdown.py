"""One table style for the CLI and every script: GitHub Markdown.

`markdown` prints a whole DataFrame with aligned columns (pandas `to_markdown`, via tabulate);
`StreamedTable` prints the same cells a row at a time, for benchmarks whose rows take seconds or
minutes each (a long run shows each result as it comes, and a cut-short run keeps its rows).
Missing values print as an empty cell (never `<NA>` or `nan`); integers get thousands separators;
`saving` columns print as signed percentages with positive = smaller than the reference (a saving);
ratios (`x_over_y`) with four decimals. Numbers align right, text left.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from typing import TextIO

import pandas as pd

PERCENT_COLUMNS = ("saving_vs_stock", "saving")


def markdown(df: pd.DataFrame, formats: Mapping[str, str] | None = None) -> str:
    """`df` as a Markdown table, values formatted for reading (index dropped)."""
    formats = dict(formats or {})
    shown = pd.DataFrame(index=df.index)
    for column in df.columns:
        shown[column] = [_cell(v, column, formats.get(column)) for v in df[column]]
    align = tuple("right" if _numeric(df[c]) else "left" for c in df.columns)
    return shown.to_markdown(index=False, disable_numparse=True, colalign=align)


def markdown_with_notes(
    df: pd.DataFrame, note: str, key: Sequence[str], formats: Mapping[str, str] | None = None
) -> str:
    """`df` as `markdown` without its `note` column, then one line per row whose `note` holds text
    (a reason too long for a cell): `* <key values>: <note>`."""
    if note not in df:
        return markdown(df, formats)
    lines = [
        f"* {' / '.join(str(row[k]) for k in key)}: {row[note]}"
        for _, row in df.iterrows()
        if isinstance(row[note], str) and row[note]
    ]
    table = markdown(df.drop(columns=[note]), formats)
    return table + "".join(f"\n{line}" for line in ([""] + lines if lines else []))


def _numeric(column: pd.Series) -> bool:
    """Numbers align right, text (and yes/no) left."""
    return pd.api.types.is_numeric_dtype(column) and not pd.api.types.is_bool_dtype(column)


class StreamedTable:
    """A Markdown table printed as it is filled: the header when made, then each row, flushed."""

    def __init__(
        self, columns: Sequence[str], formats: Mapping[str, str] | None = None, file: TextIO | None = None
    ) -> None:
        self.columns = list(columns)
        self.formats = dict(formats or {})
        self.file = file
        self._print("| " + " | ".join(self.columns) + " |")
        self._print("|" + "---|" * len(self.columns))

    def row(self, cells: Sequence[object]) -> None:
        """Print one row; `cells` in column order, formatted as `markdown` formats them."""
        if len(cells) != len(self.columns):
            raise ValueError(f"{len(cells)} cells for the {len(self.columns)} columns {self.columns}")
        shown = [_cell(v, c, self.formats.get(c)) for v, c in zip(cells, self.columns)]
        self._print("| " + " | ".join(shown) + " |")

    def _print(self, line: str) -> None:
        print(line, file=self.file or sys.stdout, flush=True)


def shorten(text: str, width: int) -> str:
    """`text` cut to at most `width` characters at a word boundary, with '...' when cut."""
    text = " ".join(str(text).split())
    if len(text) <= width:
        return text
    cut = text[: max(width - 3, 1)]
    if " " in cut:
        cut = cut[: cut.rindex(" ")]
    return cut.rstrip(" ,;:") + "..."


def saving_text(value: float | None) -> str:
    """A saving as '+8.6%' (smaller than the reference) or '-3.0%' (larger); '' when unknown."""
    return "" if value is None or pd.isna(value) else f"{value:+.1%}"


def _cell(value: object, column: str, fmt: str | None) -> str:
    if value is None or (not isinstance(value, (list, tuple, str)) and pd.isna(value)):
        return ""
    if fmt is not None:
        return format(value, fmt)
    if column in PERCENT_COLUMNS or column.startswith("saving"):
        return saving_text(float(value))  # type: ignore[arg-type]
    if pd.api.types.is_bool(value):
        return "yes" if value else "no"
    if pd.api.types.is_integer(value):
        return f"{int(value):,}"  # type: ignore[call-overload]
    if pd.api.types.is_float(value):
        number = float(value)  # type: ignore[arg-type]
        if column.endswith("seconds"):
            return f"{number:.3f}"
        return f"{number:.4f}" if "_over_" in column else f"{number:.4g}"  # a ratio: 1.0003, never 1
    return str(value)
