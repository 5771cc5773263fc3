"""One table style for the CLI and every script: GitHub Markdown (pandas `to_markdown`, via tabulate).

Missing values print as an empty cell (never `<NA>` or `nan`); integers get thousands separators;
`saving` columns print as signed percentages with positive = smaller than the reference (a saving).
"""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd

PERCENT_COLUMNS = ("saving_vs_stock", "saving")


def markdown(df: pd.DataFrame, formats: Mapping[str, str] | None = None) -> str:
    """`df` as a Markdown table, values formatted for reading (index dropped)."""
    formats = dict(formats or {})
    shown = pd.DataFrame(index=df.index)
    for column in df.columns:
        shown[column] = [_cell(v, column, formats.get(column)) for v in df[column]]
    return shown.to_markdown(index=False, disable_numparse=True, stralign="right")


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
        return f"{number:.3f}" if column.endswith("seconds") else f"{number:.4g}"
    return str(value)
