"""The record of a sweep's finished runs: `runs.jsonl` in the output folder, one JSON line per run."""

from __future__ import annotations

import json
import warnings
from dataclasses import asdict
from pathlib import Path
from typing import Any

from memplan.errors import UsageError
from memplan.experiments.sweep.grid import PlanRun, Run, StockRun

RUNS_FILE = "runs.jsonl"


class RunLog:
    """Finished runs of one output folder, one JSON line each; later lines win."""

    def __init__(self, folder: Path) -> None:
        self.path = folder / RUNS_FILE
        self.entries: dict[tuple, dict[str, Any]] = {}
        if self.path.exists():
            self._load()

    def _load(self) -> None:
        """Read the record. A torn last line (a sweep killed mid-write) and a NUL-filled tail (a
        crashed file system) are dropped with a warning and cut from the file, so their runs are done
        again. Anything else unreadable (a torn line followed by good ones, JSON that is not a sweep
        record) is an error: the folder holds something this sweep did not write."""
        data = self.path.read_bytes()
        kept = 0  # bytes of the file up to the end of its last good line
        position = 0
        torn: list[tuple[int, str]] = []  # (line number, why) of unreadable lines
        cut = 0  # of those, lines with text (not only NUL bytes): a torn write leaves one
        foreign = False  # JSON that is not a sweep record: never dropped
        for number, raw in enumerate(data.split(b"\n"), 1):
            line_end = min(position + len(raw) + 1, len(data))
            position += len(raw) + 1
            if not raw.strip(b" \t\r\x00"):
                if b"\x00" in raw:
                    torn.append((number, "NUL bytes"))
                continue
            try:
                entry = json.loads(raw.decode("utf-8"))
            except ValueError as exc:  # not JSON (UnicodeDecodeError is a ValueError too): torn?
                torn.append((number, str(exc)))
                cut += 1
                continue
            try:
                run = _run_from(entry["run"])
            except (KeyError, TypeError, ValueError) as exc:
                torn.append((number, repr(exc)))
                foreign = True
                break
            if torn:
                raise UsageError(
                    f"{self.path}:{torn[0][0]}: not a sweep record ({torn[0][1]}); use another --out folder"
                )
            entry["run"] = asdict(run)  # records from before a setting existed get its default
            self.entries[run.key] = entry
            kept = line_end
        if foreign or cut > 1:
            raise UsageError(
                f"{self.path}:{torn[0][0]}: not a sweep record ({torn[0][1]}); use another --out folder"
            )
        if torn:
            warnings.warn(
                f"{self.path}:{torn[0][0]}: dropped {len(torn)} unreadable line(s) at the end (a sweep"
                " stopped while writing?); their runs will be done again",
                stacklevel=3,
            )
        if torn or (kept and not data[:kept].endswith(b"\n")):
            with self.path.open("r+b") as f:
                f.truncate(kept)
                if kept and not data[:kept].endswith(b"\n"):
                    f.seek(kept)
                    f.write(b"\n")  # the next record starts on a line of its own

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
