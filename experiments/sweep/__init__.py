"""Sweeps: `grid` (what may be asked), `executors` (where runs go), `run` (one sweep), `run_log`
(runs.jsonl), `table` (one row per run and method), `report` (summary and plot), `results` (read back)."""
