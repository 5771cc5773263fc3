"""Files a sweep leaves in its output folder: the table, a Markdown summary, a plot.

Kept apart from the sweep so the summary can be regenerated from any saved
results table (`summary_markdown(pd.read_csv(...))`).
"""

from __future__ import annotations

import math
import os
from pathlib import Path

import pandas as pd

from memplan.errors import UsageError
from memplan.experiments.zoo.lowering import PROGRAM_ROW

CSV_FILE = "results.csv"
PARQUET_FILE = "results.parquet"
SUMMARY_FILE = "summary.md"
PLOT_FILE = "compare.png"


def check_output_files(folder: Path, also: tuple[str, ...] = ()) -> None:
    """Refuse, before any run, a folder where a file the sweep writes (or `also`) is a directory or other non-file.

    Otherwise the sweep would run every unit and then end in a traceback (IsADirectoryError) when it writes.
    """
    for name in (*also, CSV_FILE, PARQUET_FILE, SUMMARY_FILE, PLOT_FILE):
        path = folder / name
        if os.path.lexists(path) and not path.is_file():
            raise UsageError(
                f"{str(path)!r} is not a file (a directory, or a broken link); the sweep writes {name} there:"
                " move it away or choose another --out folder"
            )


def write_outputs(df: pd.DataFrame, folder: Path, fmt: str = "csv") -> list[Path]:
    """Write the table (CSV or Parquet, experiments.sweep.results), summary and plot; return the paths.

    The table in the other format, left by an earlier sweep, is removed so that
    `load_results` never reads a stale one.
    """
    from memplan.experiments.sweep import results

    written = [results.write_table(df, folder, fmt)]
    for stale in (folder / CSV_FILE, folder / PARQUET_FILE):
        if stale != written[0] and stale.exists():
            stale.unlink()
    written.append(folder / SUMMARY_FILE)
    written[-1].write_text(summary_markdown(df))
    if _succeeded(df).size:
        written.append(folder / PLOT_FILE)
        _plot(df, written[-1])
    return written


def _succeeded(df: pd.DataFrame) -> pd.DataFrame:
    """Method rows with an arena (the figure compares methods; program rows have no lower bound)."""
    return df[df["arena_bytes"].notna() & (df["method"] != PROGRAM_ROW)]


def _plot(df: pd.DataFrame, path: Path) -> None:
    # A bare Figure, not pyplot: switching pyplot's backend here would stop a
    # notebook that runs a sweep from showing its own plots afterwards.
    from matplotlib.figure import Figure

    from memplan import viz

    fig = Figure(figsize=(max(6.0, 0.6 * df["model"].nunique() + 3), 4.5))
    ax = viz.compare(_succeeded(df), ax=fig.add_subplot())
    levers = sorted(set(df["levers"].dropna())) if "levers" in df else []
    if levers:  # the solvers' bars had these on; the stock bar never has any
        ax.set_title(f"{ax.get_title()}\nsolvers with levers: {'; '.join(levers)}", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


# -- Markdown ------------------------------------------------------------------------


def summary_markdown(df: pd.DataFrame) -> str:
    """Per settings: arena / lower bound and saving vs stock for each model and solver; the whole
    programs of several methods after them."""
    programs = df[df["method"] == PROGRAM_ROW]
    df = df[df["method"] != PROGRAM_ROW]
    solvers = _solver_order(df["solver"])
    failed = df[df["error"].notna()]
    lines = [
        "# memplan sweep",
        "",
        _rows_sentence(df, programs, solvers) + f"; {len(failed)} rows with an error.",
        "",
        "Cell: arena / lower bound (1.000 = provably minimal), then the saving vs the stock"
        " ExecuTorch planner (positive = smaller arena); `*` = proven optimal: the solver proved it,"
        " or the arena is the emitted program's lower bound (greedy's plan too), shown only where that"
        " bound is the case's lowest (a solver whose program kept less fusion, its bound higher, gets no"
        " `*`: others do better). The lower bound is the lowest over the solvers' programs (cat fusion,"
        " kept only where it pays for a solver, lowers it), so it bounds every column.",
    ]
    if "reproducible" not in df:  # a table from before the setting existed
        df = df.assign(reproducible=False)
    for (alignment, fusion, limit, reproducible), group in df.groupby(
        ["alignment", "cat_fusion", "time_limit_seconds", "reproducible"], dropna=False
    ):
        mode = ", reproducible mode" if reproducible is True else ""
        lines += [
            "",
            f"## alignment {alignment}, cat fusion {'on' if fusion else 'off'}, time limit {limit:g} s{mode}",
            "",
            _levers_line(group),
            "",
        ]
        lines += _settings_table(group, solvers)
        lines += _bank_lines(group)
    lines += _program_lines(programs)
    lines += _unknown_bound_lines(df)
    lines += _lowering_lines(df)
    if len(failed):
        lines += [
            "",
            "## Errors",
            "",
            "| model | method | solver | settings | error |",
            "|---|---|---|---|---|",
        ]
        for row in failed.itertuples():
            error = str(row.error).replace("|", "\\|")
            error = error if len(error) <= 160 else error[:157] + "..."
            settings = f"align {row.alignment}, fusion {'on' if row.cat_fusion else 'off'}, {row.time_limit_seconds:g} s"
            lines.append(f"| {row.model} | {row.method} | {row.solver} | {settings} | {error} |")
    return "\n".join(lines) + "\n"


def _levers_line(group: pd.DataFrame) -> str:
    """Which levers every solver had on, so `greedy` reads as ExecuTorch's algorithm on that program."""
    found = sorted(set(group["levers"].dropna())) if "levers" in group else []
    if not found:
        return "Levers: not recorded in this table."
    return (
        f"Levers on in every solver's run: {'; '.join(found)}. `stock` is ExecuTorch's own planner on the"
        " program as lowered, without them; `greedy` is ExecuTorch's algorithm on the program the levers"
        " gave it."
    )


def _bank_lines(group: pd.DataFrame) -> list[str]:
    """Under a memory map: the map, and per row the bytes and traffic share of each bank and of the
    arenas outside the map (state shared across methods), since the solvers then minimise traffic and
    may trade a larger arena for it."""
    maps = sorted(set(group["memory_map"].dropna())) if "memory_map" in group else []
    banks = [c.removesuffix("_traffic_share") for c in group.columns if c.endswith("_traffic_share")]
    if not maps or not banks:
        return []
    lines = [
        "",
        f"Memory map {'; '.join(maps)}: the solvers minimise the traffic-weighted cost (most-read bytes in"
        " the fastest bank), so an arena may be larger than the smallest possible, traded for traffic."
        " Traffic outside the map's banks is the state shared across methods (an arena of its own).",
        "",
        "| model | solver | arena | "
        + " | ".join(f"{b} bytes | {b} traffic" for b in banks)
        + " | outside the map: bytes | traffic |",
        "|---|---|---:|" + "---:|---:|" * len(banks) + "---:|---:|",
    ]
    for row in group[group["arena_bytes"].notna()].itertuples():
        label = row.model if row.method in ("", "forward") else f"{row.model}/{row.method}"
        shares = [getattr(row, f"{b}_traffic_share") for b in banks]
        inside = sum(
            int(getattr(row, f"{b}_bytes")) for b in banks if not pd.isna(getattr(row, f"{b}_bytes"))
        )
        cells = [label, row.solver, _int(row.arena_bytes)]
        for b, share in zip(banks, shares):
            cells += [_int(getattr(row, f"{b}_bytes")), "" if pd.isna(share) else f"{share:.3f}"]
        outside_share = 1 - sum(0 if pd.isna(x) else float(x) for x in shares)
        cells += [_int(int(row.arena_bytes) - inside), f"{max(outside_share, 0.0):.3f}"]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def _rows_sentence(df: pd.DataFrame, programs: pd.DataFrame, solvers: list[str]) -> str:
    """How many rows, and what they count: one per method, solver and settings (a model of several
    methods gives several); the program rows apart."""
    methods = df.loc[df["method"] != "", ["model", "method"]].drop_duplicates()
    settings = df[["alignment", "cat_fusion", "time_limit_seconds"]].drop_duplicates()
    text = (
        f"{len(df)} rows, one per method, solver and settings: {len(methods)} methods of"
        f" {df['model'].nunique()} models x {len(solvers)} solvers ({', '.join(solvers)})"
        f" x {len(settings)} setting(s)"
    )
    return text + (f", plus {len(programs)} whole-program rows" if len(programs) else "")


def _program_lines(programs: pd.DataFrame) -> list[str]:
    """Programs of several methods as the runtime allocates them (per arena the largest method, summed)."""
    if not len(programs):
        return []
    lines = [
        "",
        "## Whole programs of several methods",
        "",
        "The runtime loads every method and sizes each arena for the largest method; these rows compare"
        " that total, memplan's against stock's.",
        "",
        "| model | solver | arena | stock | saving |",
        "|---|---|---:|---:|---:|",
    ]
    for row in programs.itertuples():
        saving = "" if pd.isna(row.saving_vs_stock) else f"{row.saving_vs_stock:+.1%}"
        cells = [row.model, row.solver, _int(row.arena_bytes), _int(row.stock_arena_bytes), saving]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def _unknown_bound_lines(df: pd.DataFrame) -> list[str]:
    """The rows whose emitted program's lower bound could not be derived, each with why (one line)."""
    from memplan.planner.stages.result import UNKNOWN_BOUND

    if "not_proven_because" not in df:  # a table from before the column existed
        return []
    unknown = df[df["not_proven_because"].fillna("").str.startswith(UNKNOWN_BOUND)]
    if not len(unknown):
        return []
    lines = ["", "## Lower bounds not derived", "", "| model | method | solver | why |", "|---|---|---|---|"]
    for row in unknown.itertuples():
        why = str(row.not_proven_because).removeprefix(UNKNOWN_BOUND).lstrip(": ").replace("|", "\\|")
        lines.append(f"| {row.model} | {row.method} | {row.solver} | {why} |")
    return lines


def _lowering_lines(df: pd.DataFrame) -> list[str]:
    """How each model was lowered (its recipe, or the program as given)."""
    if "lowering" not in df or df["lowering"].isna().all():
        return []
    lines = ["", "## How each model was lowered", "", "| model | lowering |", "|---|---|"]
    for model, ways in df.dropna(subset=["lowering"]).groupby("model")["lowering"]:
        lines.append(f"| {model} | {'; '.join(sorted(set(ways)))} |")
    return lines


def _solver_order(names: pd.Series) -> list[str]:
    """Solvers in registry order (cheap to exact), unknown names last."""
    from memplan import solvers as registry

    rank = {name: i for i, name in enumerate(registry.available())}
    return sorted(set(names), key=lambda n: (rank.get(n, len(rank)), n))


def _settings_table(group: pd.DataFrame, solvers: list[str]) -> list[str]:
    """Rows per model (and method), a column per solver; ratios against the case's lowest bound.

    With cat fusion each solver's problem can differ (fusion is kept only
    where it pays for that solver), and fusion lowers the bound, so the
    lowest bound of a case bounds every solver's arena and makes the columns
    comparable.
    """
    group = group.assign(best_lb=group.groupby(["model", "method"])["lower_bound_bytes"].transform("min"))
    group = group.assign(ratio=group["arena_bytes"] / group["best_lb"])
    header = "| model | buffers | lower bound | stock | " + " | ".join(solvers) + " |"
    lines = [header, "|---|---:|---:|---:|" + "---:|" * len(solvers)]
    for (model, method), rows in group.groupby(["model", "method"], sort=True):
        label = model if method in ("", "forward") else f"{model}/{method}"
        ok = rows[rows["arena_bytes"].notna()]
        cells = [
            label,
            _int(ok["buffers"].max()) if len(ok) else "",
            _int(ok["best_lb"].iloc[0]) if len(ok) else "",
            _int(ok["stock_arena_bytes"].iloc[0]) if len(ok) else "",
        ]
        by_solver = {r.solver: r for r in rows.itertuples()}
        cells += [_cell(by_solver.get(s)) for s in solvers]
        lines.append("| " + " | ".join(cells) + " |")
    means = []
    for s in solvers:
        ok = group[(group["solver"] == s) & group["arena_bytes"].notna()]
        if not len(ok):
            means.append("")
            continue
        ratio = math.exp(ok["ratio"].astype(float).map(math.log).mean())
        saving = ok["saving_vs_stock"].dropna()
        means.append(f"{ratio:.3f}" + (f" ({saving.mean():+.1%})" if len(saving) else ""))
    lines.append("| **geometric mean (mean saving)** | | | | " + " | ".join(means) + " |")
    return lines


def _int(value) -> str:
    return "" if pd.isna(value) else f"{int(value):,}"


def _cell(row) -> str:
    if row is None:
        return ""
    if pd.isna(row.arena_bytes):
        return "error"
    text = f"{row.ratio:.3f}"
    if not pd.isna(row.saving_vs_stock):
        text += f" ({row.saving_vs_stock:+.1%})"
    if _true(row.proven_optimal) and row.lower_bound_bytes == row.best_lb:  # its proof covers the case
        text += "*"
    if _false(row.matches_eager):
        text += " MISMATCH"
    return text


def _true(value) -> bool:
    return not pd.isna(value) and bool(value)


def _false(value) -> bool:
    return not pd.isna(value) and not bool(value)
