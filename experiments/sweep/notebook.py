"""A sweep's results table as a Jupyter cell shows it: what the sweep holds in one sentence, arena /
lower bound per model and method for each solver, and the solvers' geometric means as small inline
SVG bars (memplan.html). The table itself is the DataFrame (`.head()`, `.columns`)."""

from __future__ import annotations

import html
import math

import pandas as pd

from memplan.experiments.zoo.lowering import PROGRAM_ROW
from memplan.html import bar_chart
from memplan.viz.style import solver_colour


def results_html(df: pd.DataFrame) -> str:
    methods = df[df["method"] != PROGRAM_ROW]
    ok = methods[methods["arena_bytes"].notna() & methods["arena_over_lb"].notna()]
    failed = int(methods["error"].notna().sum()) if "error" in methods else 0
    said = (
        f"{len(df)} rows: {methods['model'].nunique()} models, {methods['solver'].nunique()} solvers,"
        f" {failed} failed runs; the table itself: .head(), .columns"
    )
    if ok.empty:
        return f"<div class='memplan'>{html.escape(said)}</div>"
    ratio = ok.pivot_table(
        index=["model", "method"], columns="solver", values="arena_over_lb", aggfunc="mean"
    )
    means = ok.groupby("solver")["arena_over_lb"].apply(
        lambda s: math.exp(s.astype(float).map(math.log).mean())
    )
    bars = [(str(solver), float(value), solver_colour(str(solver))) for solver, value in means.items()]
    chart = bar_chart("arena / lower bound, geometric mean (1.000 = provably minimal)", bars, base=1.0)
    table = ratio.to_html(float_format=lambda v: f"{v:.3f}", na_rep="")
    return f"<div class='memplan'><div>{html.escape(said)}</div>{chart}<div>arena / lower bound</div>{table}</div>"
