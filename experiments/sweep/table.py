"""The sweep's table: one row per (model, method, solver, settings), built from the run log.

Units are in the column names: `_bytes` for bytes, `_seconds` for seconds. A run's rows come under
these names (`zoo.lowering.Lowered.rows`); of the run's key only `time_limit_s` is spelled otherwise. A
program of several methods adds a `PROGRAM_ROW` per run: what the runtime allocates for it.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from memplan.experiments.sweep.grid import KEY, SETTINGS
from memplan.experiments.sweep.run_log import RunLog
from memplan.experiments.zoo.lowering import PROGRAM_ROW

TABLE_SETTINGS = tuple("time_limit_seconds" if s == "time_limit_s" else s for s in SETTINGS)
COLUMNS = (
    "model",
    "method",
    "solver",
    *TABLE_SETTINGS,
    "buffers",
    "lower_bound_bytes",
    "arena_bytes",
    "arena_over_lb",
    "stock_arena_bytes",
    "saving_vs_stock",
    "proven_optimal",
    "not_proven_because",
    "plan_solver",
    "levers",
    "lowering",
    "solve_seconds",
    "export_seconds",
    "cats_fused",
    "copy_removed_bytes",
    "state_copies_removed",
    "state_copy_removed_bytes",
    "ran_ok",
    "matches_eager",
    "error",
)
TIMING_COLUMNS = ("solve_seconds", "export_seconds")
DTYPES = {
    "alignment": "Int64",
    "buffers": "Int64",
    "lower_bound_bytes": "Int64",
    "arena_bytes": "Int64",
    "stock_arena_bytes": "Int64",
    "cats_fused": "Int64",
    "copy_removed_bytes": "Int64",
    "state_copies_removed": "Int64",
    "state_copy_removed_bytes": "Int64",
    "cat_fusion": "boolean",
    "reproducible": "boolean",
    "proven_optimal": "boolean",
    "ran_ok": "boolean",
    "matches_eager": "boolean",
    "time_limit_seconds": "float64",
    "arena_over_lb": "float64",
    "saving_vs_stock": "float64",
    "solve_seconds": "float64",
    "export_seconds": "float64",
}


def table(log: RunLog) -> pd.DataFrame:
    """One row per (model, method, solver, settings), sorted by those columns."""
    stock: dict[tuple[str, int, str, str], dict[str, int]] = {}
    for entry in log.entries.values():
        if entry["kind"] == "stock" and entry["result"]["error"] is None:
            run = entry["run"]
            where = (run["model"], run["alignment"], run.get("memory_map", ""), run.get("lowering", ""))
            stock[where] = dict(entry["result"]["arena_bytes"])
            if "program_arena_bytes" in entry["result"]:
                stock[where][PROGRAM_ROW] = entry["result"]["program_arena_bytes"]
    records = []
    for entry in log.entries.values():
        if entry["kind"] != "plan":
            continue
        run, result = entry["run"], entry["result"]
        base = {k: run[k] for k in KEY if k != "time_limit_s"} | {"time_limit_seconds": run["time_limit_s"]}
        base |= {"memory_map": run["memory_map"]} if run.get("memory_map") else {}
        base |= {"tiling": run["tiling"]} if run.get("tiling") else {}
        if result["error"] is not None:
            records.append({**base, "method": "", "error": result["error"]})
            continue
        where = (run["model"], run["alignment"], run.get("memory_map", ""), run.get("lowering", ""))
        arenas = stock.get(where, {})
        for row in result["rows"]:
            records.append({**base, "stock_arena_bytes": arenas.get(row["method"]), **row})
        if len(result["rows"]) > 1 and "program_arena_bytes" in result:
            records.append(_program_record(base, result, arenas.get(PROGRAM_ROW)))
    # Sweeps with a memory map add "memory_map" and per-bank columns (lowering._bank_columns).
    extra = [k for k in dict.fromkeys(k for r in records for k in r) if k not in COLUMNS]
    df = pd.DataFrame.from_records(records, columns=list(COLUMNS) + extra)
    df = df.astype(DTYPES)
    df["error"] = df["error"].astype("string")
    df["not_proven_because"] = df["not_proven_because"].astype("string")
    df["arena_over_lb"] = df["arena_bytes"] / df["lower_bound_bytes"]
    df["saving_vs_stock"] = 1 - df["arena_bytes"] / df["stock_arena_bytes"]
    order = ["model", "method", "solver", *TABLE_SETTINGS]
    return df.sort_values(order, kind="stable").reset_index(drop=True)


def _program_record(base: dict[str, Any], result: dict[str, Any], stock_bytes: int | None) -> dict[str, Any]:
    """The row of a multi-method program as a whole: the arenas as the runtime allocates them (per arena
    the largest method, summed), memplan's and stock's; per-method figures (bounds, proofs) stay empty."""
    rows = result["rows"]
    return {
        **base,
        "method": PROGRAM_ROW,
        "buffers": sum(r["buffers"] for r in rows),
        "arena_bytes": result["program_arena_bytes"],
        "stock_arena_bytes": stock_bytes,
        "levers": rows[0].get("levers"),
        "lowering": rows[0].get("lowering"),
    }
