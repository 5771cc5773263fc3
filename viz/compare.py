"""Sweep results at a glance: arena / lower bound per model and solver (1.0 = provably minimal)."""

from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd
from matplotlib.axes import Axes

from memplan.viz.style import LOWER_BOUND_COLOUR, solver_colour

REQUIRED = ("model", "method", "solver", "arena_bytes", "lower_bound_bytes")
SETTINGS = ("alignment", "cat_fusion", "time_limit_seconds")  # sweep settings that may split a solver's bars
BOUND_LINE = "lower_bound"  # gid of the line at 1.0
STOCK_SERIES = (
    "stock (ExecuTorch)"  # ExecuTorch's MemoryPlanningPass on the same program (its colour: "stock")
)

_VALUE_LABELS_UP_TO = 40  # bars; beyond this the numbers would overlap


def ratios(df: pd.DataFrame) -> pd.DataFrame:
    """One row per (case, series) with the mean arena / the case's lowest lower bound; the stock
    planner's arena is a series of its own (`STOCK_SERIES`) when the table has it.

    A case is a model, or model:method for multi-method models; a series is a
    solver, plus any sweep setting that varies in `df` (so bars never average
    over different alignments). `proven` is True when every averaged row was
    proven optimal.
    """
    missing = [c for c in REQUIRED if c not in df.columns]
    if missing:
        raise ValueError(f"compare: the sweep table lacks columns {missing}; it needs {list(REQUIRED)}")
    rows = df[
        df["arena_bytes"].notna() & df["lower_bound_bytes"].notna() & (df["lower_bound_bytes"] > 0)
    ].copy()
    methods = rows.groupby("model")["method"].nunique()
    rows["case"] = [
        f"{m}/{meth}" if methods[m] > 1 else str(m) for m, meth in zip(rows["model"], rows["method"])
    ]
    varying = [c for c in SETTINGS if c in rows.columns and rows[c].nunique(dropna=False) > 1]
    rows["series"] = [
        ", ".join([str(row["solver"])] + [f"{c}={row[c]}" for c in varying]) for _, row in rows.iterrows()
    ]
    # Solvers may plan different problems of one program (cat fusion is kept only where it
    # pays), so each arena is compared with the lowest bound of its case, as the summary does.
    case_keys = ["model", "method"] + [c for c in SETTINGS if c in rows.columns]
    lowest = rows.groupby(case_keys, dropna=False)["lower_bound_bytes"].transform("min")
    rows["ratio"] = rows["arena_bytes"].astype(float) / lowest.astype(float)
    # Marked proven only against the bound: a plan proven optimal for its own problem but above the
    # case's lowest bound (another solver's problem, after cat fusion, is smaller) is not marked.
    proven = rows["proven_optimal"].fillna(False).astype(bool) if "proven_optimal" in rows else False
    rows["proven"] = proven & (rows["arena_bytes"].astype(float) <= lowest.astype(float))
    if "stock_arena_bytes" in rows:
        rows = pd.concat([_stock_rows(rows, lowest, varying), rows], ignore_index=True)
    return (
        rows.groupby(["case", "series"], sort=False)
        .agg(ratio=("ratio", "mean"), proven=("proven", "all"))
        .reset_index()
    )


def _table_rank(series: str) -> tuple[int, int, str]:
    """Bars and legend in the summary table's column order: stock first, then the solvers in registry
    order (cheap to exact), each with its varying settings."""
    from memplan import solvers as registry

    solver = series.split(",")[0]
    rank = {name: i for i, name in enumerate(registry.available())}
    return (solver != STOCK_SERIES, rank.get(solver, len(rank)), series)


def _stock_rows(rows: pd.DataFrame, lowest: pd.Series, varying: list[str]) -> pd.DataFrame:
    """One bar per case and varying setting: ExecuTorch's own planner on the same program."""
    stock = rows[rows["stock_arena_bytes"].notna()].assign(
        ratio=lambda r: r["stock_arena_bytes"].astype(float) / lowest[r.index].astype(float), proven=False
    )
    stock["series"] = [
        ", ".join([STOCK_SERIES] + [f"{c}={row[c]}" for c in varying]) for _, row in stock.iterrows()
    ]
    return stock.drop_duplicates(["case", "series"])


def compare(df: pd.DataFrame, ax: Axes | None = None) -> Axes:
    """Grouped bars of arena / lower bound: a group per model, a bar per solver (its fixed colour), and
    one for ExecuTorch's stock planner on the same program when the table has `stock_arena_bytes`.

    Bars rise from a base just below the lower-bound line at 1.0, so a bar at
    exactly 1.000 is still drawn and small excesses stay visible. `*` over a
    bar marks a plan proven optimal whose arena meets the case's lower bound, for any number of bars
    (series in the summary table's order: stock, then the solvers in registry order); the values are printed
    up to 40 bars.
    """
    table = ratios(df)
    cases = list(dict.fromkeys(table["case"]))
    series = sorted(dict.fromkeys(table["series"]), key=_table_rank)
    if ax is None:
        _, ax = plt.subplots(figsize=(max(6.0, 0.6 * len(cases) + 3), 4.5))
    width = 0.8 / max(len(series), 1)
    top = float(table["ratio"].max()) if len(table) else 1.0
    span = max(top - 1.0, 0.02)
    base = 1.0 - 0.08 * span
    numbers = len(table) <= _VALUE_LABELS_UP_TO
    for n, name in enumerate(series):
        part = table[table["series"] == name]
        xs = [cases.index(c) - 0.4 + width * (n + 0.5) for c in part["case"]]
        bars = ax.bar(
            xs,
            part["ratio"] - base,
            width=width,
            bottom=base,
            label=name,
            color=solver_colour(name),
            gid=f"bars_{name}",
        )
        if numbers:
            texts = [f"{r:.3f}{'*' if p else ''}" for r, p in zip(part["ratio"], part["proven"])]
            ax.bar_label(bars, labels=texts, fontsize=6, rotation=90, padding=2)
        else:
            ax.bar_label(bars, labels=["*" if p else "" for p in part["proven"]], fontsize=7, padding=1)
    ax.axhline(
        1.0, color=LOWER_BOUND_COLOUR, linestyle="--", linewidth=1.0, label="lower bound", gid=BOUND_LINE
    )
    ax.set_ylim(base, 1.0 + 1.15 * span)
    ax.set_xticks(range(len(cases)), cases, rotation=45, ha="right", fontsize=8)
    ax.set_ylabel("arena / lower bound")
    ax.set_title("arena over the lower bound (* = proven optimal: the arena meets the bound)")
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1))
    return ax
