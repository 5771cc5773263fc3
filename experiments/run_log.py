"""The record of a sweep's finished runs: `runs.jsonl` in the output folder, one JSON line per run."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

from memplan.experiments.sweep_grid import PlanRun, Run, StockRun, SweepConfigError

RUNS_FILE = "runs.jsonl"


class RunLog:
    """Finished runs of one output folder, one JSON line each; later lines win."""

    def __init__(self, folder: Path) -> None:
        self.path = folder / RUNS_FILE
        self.entries: dict[tuple, dict[str, Any]] = {}
        if self.path.exists():
            for number, line in enumerate(self.path.read_text().splitlines(), 1):
                if not line.strip():
                    continue
                try:
                    entry = json.loads(line)
                    run = _run_from(entry["run"])
                except (ValueError, KeyError, TypeError) as exc:
                    raise SweepConfigError(
                        f"{self.path}:{number}: not a sweep record ({exc}); use another --out folder"
                    ) from None
                self.entries[run.key] = entry

    def is_done(self, run: Run, retry_errors: bool = False) -> bool:
        entry = self.entries.get(run.key)
        if entry is None:
            return False
        if entry["result"]["error"] is not None:
            return not retry_errors
        if isinstance(run, PlanRun) and run.check:
            return all(row.get("ran_ok") is not None for row in entry["result"]["rows"])
        return True

    def add(self, run: Run, result: dict[str, Any]) -> None:
        entry = {
            "kind": "stock" if isinstance(run, StockRun) else "plan",
            "run": asdict(run),
            "result": result,
        }
        self.entries[run.key] = entry
        with self.path.open("a") as f:
            f.write(json.dumps(entry) + "\n")


def _run_from(record: dict[str, Any]) -> Run:
    if "solver" in record:
        return PlanRun(**record)
    return StockRun(**record)
