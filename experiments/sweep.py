"""Sweeps: zoo models x solvers x settings, lowered through ExecuTorch, as one tidy table.

One unit of work is one export: a model lowered with `PlannerPass` for one
solver and one setting (alignment, cat fusion, time limit); it yields one row
per method. The stock ExecuTorch planner is lowered once per (model,
alignment) as its own unit, and every row is compared against it.

Finished units are appended to `runs.jsonl` in the output folder as they
complete, so an interrupted or repeated sweep into the same folder skips what
is done; `results.csv` (and `results.parquet` if pyarrow is importable),
`summary.md` and `compare.png` are rewritten from that record at the end and
cover every run the folder holds. A unit that fails becomes a row carrying
its error; it never stops the sweep.
"""

from __future__ import annotations

import contextlib
import functools
import json
import math
import time
import traceback
import warnings
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from memplan.experiments.executors import EXECUTORS, default_jobs, run_all

DEFAULT_OUT = "results"
DEFAULT_ALIGNMENTS = (16,)
DEFAULT_CAT_FUSION = (True,)
DEFAULT_TIME_LIMIT_S = 5.0
RUNS_FILE = "runs.jsonl"

# Settings that, with model and solver, identify a run (and so a resumable unit).
SETTINGS = ("alignment", "cat_fusion", "time_limit_s")
KEY = ("model", "solver", *SETTINGS)
COLUMNS = (
    "model",
    "method",
    "solver",
    *SETTINGS,
    "buffers",
    "lower_bound",
    "arena_bytes",
    "arena_over_lb",
    "stock_arena_bytes",
    "saving_vs_stock",
    "proven_optimal",
    "plan_solver",
    "solve_seconds",
    "export_seconds",
    "cats_fused",
    "copy_bytes_removed",
    "ran_ok",
    "matches_eager",
    "error",
)
TIMING_COLUMNS = ("solve_seconds", "export_seconds")
_DTYPES = {
    "alignment": "Int64",
    "buffers": "Int64",
    "lower_bound": "Int64",
    "arena_bytes": "Int64",
    "stock_arena_bytes": "Int64",
    "cats_fused": "Int64",
    "copy_bytes_removed": "Int64",
    "cat_fusion": "boolean",
    "proven_optimal": "boolean",
    "ran_ok": "boolean",
    "matches_eager": "boolean",
    "time_limit_s": "float64",
    "arena_over_lb": "float64",
    "saving_vs_stock": "float64",
    "solve_seconds": "float64",
    "export_seconds": "float64",
}


class SweepConfigError(ValueError):
    """A sweep was asked for something that does not exist or cannot work."""


@dataclass(frozen=True)
class StockRun:
    """Lower `model` with ExecuTorch's own MemoryPlanningPass at `alignment`."""

    model: str
    alignment: int

    @property
    def key(self) -> tuple:
        return ("stock", self.model, self.alignment)


@dataclass(frozen=True)
class PlanRun:
    """Lower `model` with PlannerPass(solver, settings); `check` also runs it against eager."""

    model: str
    solver: str
    alignment: int
    cat_fusion: bool
    time_limit_s: float
    check: bool = False

    @property
    def key(self) -> tuple:
        return ("plan", self.model, self.solver, self.alignment, self.cat_fusion, self.time_limit_s)


Run = StockRun | PlanRun


# -- the grid ------------------------------------------------------------------


def grid(
    models: Sequence[str],
    solvers: Sequence[str],
    alignments: Sequence[int] = DEFAULT_ALIGNMENTS,
    cat_fusion: Sequence[bool] = DEFAULT_CAT_FUSION,
    time_limit_s: float = DEFAULT_TIME_LIMIT_S,
    check: bool = False,
) -> list[Run]:
    """Every run of the sweep, model by model, each model's stock runs first.

    Model-major order, with the executor's affinity by model, lets a worker
    process reuse the model it exported for the previous run. Repeated names
    count once.
    """
    runs: list[Run] = []
    for model in dict.fromkeys(models):
        runs += [StockRun(model, a) for a in dict.fromkeys(alignments)]
        runs += [
            PlanRun(model, solver, a, fuse, float(time_limit_s), check)
            for a in dict.fromkeys(alignments)
            for fuse in dict.fromkeys(cat_fusion)
            for solver in dict.fromkeys(solvers)
        ]
    return runs


def validate_grid(
    models: Sequence[str],
    solvers: Sequence[str],
    alignments: Sequence[int],
    cat_fusion: Sequence[bool],
    time_limit_s: float,
    jobs: int,
    executor: str,
) -> None:
    """Raise `SweepConfigError` naming the bad value and the valid choices."""
    from memplan import solvers as solver_registry
    from memplan.experiments import zoo

    if not models:
        raise SweepConfigError(f"no model given; choose from: {', '.join(zoo.names())}")
    if not solvers:
        raise SweepConfigError(f"no solver given; choose from: {', '.join(solver_registry.available())}")
    for name in models:
        check_choice("model", name, zoo.names())
    for name in solvers:
        check_choice("solver", name, solver_registry.available())
    if not alignments:
        raise SweepConfigError("no alignment given; give powers of two such as 16")
    for alignment in alignments:
        check_alignment(alignment)
    if not cat_fusion:
        raise SweepConfigError("cat fusion needs at least one of: on, off")
    check_time_limit(time_limit_s)
    if jobs < 1:
        raise SweepConfigError(f"jobs must be at least 1, got {jobs}")
    if executor not in EXECUTORS:
        raise SweepConfigError(f"unknown executor {executor!r}; choose one of: {', '.join(EXECUTORS)}")


def check_choice(kind: str, value: str, valid: Sequence[str]) -> None:
    """Raise SweepConfigError naming `value` and the valid choices unless it is one of them."""
    if value not in valid:
        raise SweepConfigError(f"unknown {kind} {value!r}; choose from: {', '.join(valid)}")


def check_alignment(alignment: int) -> None:
    if alignment < 1 or alignment & (alignment - 1):
        raise SweepConfigError(f"alignment must be a power of two (1, 2, 4, ..., 16, ...), got {alignment}")


def check_time_limit(time_limit_s: float) -> None:
    if not (time_limit_s > 0 and math.isfinite(time_limit_s)):
        raise SweepConfigError(f"time limit must be a positive number of seconds, got {time_limit_s}")


def default_solvers() -> list[str]:
    """Every registered solver."""
    from memplan import solvers as solver_registry

    return solver_registry.available()


# -- one unit of work (runs in a worker process) --------------------------------


@functools.lru_cache(maxsize=4)
def _exported(name: str):
    """The zoo model with its edge program built once per worker process.

    `runtime.lower` deep-copies the edge program it caches on the model, so
    every lowering after this one skips torch.export and export_seconds
    measure lowering and planning only.
    """
    from memplan.experiments import runtime, zoo

    model = zoo.get(name)
    runtime.edge_program(model)
    return model


@contextlib.contextmanager
def library_warnings_silenced() -> Iterator[None]:
    """No Python warnings: torch and ExecuTorch give dozens per export, the same every time."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


def execute(run: Run) -> dict[str, Any]:
    """Do one run; never raises (a failure is reported in the result's `error`)."""
    try:
        with library_warnings_silenced():
            if isinstance(run, StockRun):
                return _stock(run)
            return _plan(run)
    except Exception as exc:  # noqa: BLE001 - any failure becomes an error row
        return {"error": _describe(exc), "rows": []}


def _describe(exc: BaseException) -> str:
    """`Type: message` on one line, plus where it was raised."""
    frame = traceback.extract_tb(exc.__traceback__)[-1] if exc.__traceback__ else None
    where = f" [{Path(frame.filename).name}:{frame.lineno}]" if frame else ""
    message = " | ".join(line.strip() for line in str(exc).splitlines() if line.strip())
    return f"{type(exc).__name__}: {message}{where}"[:2000]


def _stock(run: StockRun) -> dict[str, Any]:
    return {"error": None, "arena_bytes": stock_arenas(_exported(run.model), run.alignment)}


def stock_arenas(model, alignment: int) -> dict[str, int]:
    """Per method: the bytes ExecuTorch's own MemoryPlanningPass needs over all arenas."""
    from executorch.exir.passes import MemoryPlanningPass

    from memplan.experiments import runtime

    stock_pass = MemoryPlanningPass(**{**model.memory_planning_config, "alignment": alignment})
    program = runtime.lower(model, memory_planning_pass=stock_pass)
    return {m: sum(sizes) for m, sizes in runtime.stock_arena_bytes(program).items()}


def _plan(run: PlanRun) -> dict[str, Any]:
    model = _exported(run.model)
    lowered = lower_planned(model, run.solver, run.alignment, run.cat_fusion, run.time_limit_s)
    verdict = _check(model, lowered.program) if run.check else {}
    return {"error": None, "rows": [{**row, **verdict} for row in lowered.rows()]}


@dataclass
class Lowered:
    """A model lowered with PlannerPass: the program, the pass (with its results), the time taken."""

    program: Any
    planner_pass: Any
    export_seconds: float

    def rows(self) -> list[dict[str, Any]]:
        """One sweep row per method (without the model/solver/settings columns)."""
        from memplan.experiments import runtime
        from memplan.planner.problem import lower_bound

        emitted = runtime.stock_arena_bytes(self.program)  # non_const_buffer_sizes, whatever the planner
        rows = []
        for method, result in sorted(self.planner_pass.results.items()):
            fused, removed = _cat_numbers(getattr(result, "cat_report", None))
            rows.append(
                {
                    "method": method,
                    "buffers": len(result.problem.buffers),
                    "lower_bound": lower_bound(result.problem),
                    "arena_bytes": sum(emitted[method]),
                    "proven_optimal": bool(result.plan.proven_optimal),
                    "plan_solver": result.plan.solver,
                    "solve_seconds": result.plan.seconds,
                    "export_seconds": self.export_seconds,
                    "cats_fused": fused,
                    "copy_bytes_removed": removed,
                }
            )
        return rows


def lower_planned(model, solver: str, alignment: int, cat_fusion: bool, time_limit_s: float) -> Lowered:
    """Lower `model` to ExecuTorch with PlannerPass(solver, settings)."""
    from memplan import PlannerPass
    from memplan.experiments import runtime

    planner_pass = PlannerPass(
        solver=solver, time_limit_s=time_limit_s, alignment=alignment, cat_fusion=cat_fusion
    )
    began = time.perf_counter()
    program = runtime.lower(model, memory_planning_pass=planner_pass)
    return Lowered(program, planner_pass, time.perf_counter() - began)


def _cat_numbers(report: Any) -> tuple[int, int]:
    """(cats whose copy was removed, copy bytes removed per inference); zero when fusion was off."""
    if report is None:
        return 0, 0
    from memplan.planner.et.cat.decisions import CatStatus

    fused = sum(d.status is not CatStatus.REFUSED for d in report.decisions)
    return fused, int(report.copy_bytes_removed)


def _check(model, program) -> dict[str, Any]:
    """ran_ok / matches_eager for the program, and an `error` saying what went wrong."""
    from memplan.experiments import runtime

    try:
        got = runtime.run_pte(program.buffer, model.calls)
    except Exception as exc:  # noqa: BLE001 - a program that does not run is a result
        return {"ran_ok": False, "matches_eager": False, "error": "run: " + _describe(exc)}
    try:
        runtime.compare_outputs(model, got, runtime.eager_outputs(model))
    except AssertionError as exc:
        return {"ran_ok": True, "matches_eager": False, "error": "check: " + _describe(exc)}
    return {"ran_ok": True, "matches_eager": True}


# -- the record of finished runs -------------------------------------------------


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


# -- the table ---------------------------------------------------------------------


def table(log: RunLog) -> pd.DataFrame:
    """One row per (model, method, solver, settings), sorted by those columns."""
    stock: dict[tuple[str, int], dict[str, int]] = {}
    for entry in log.entries.values():
        if entry["kind"] == "stock" and entry["result"]["error"] is None:
            run = entry["run"]
            stock[(run["model"], run["alignment"])] = entry["result"]["arena_bytes"]
    records = []
    for entry in log.entries.values():
        if entry["kind"] != "plan":
            continue
        run, result = entry["run"], entry["result"]
        base = {k: run[k] for k in KEY}
        if result["error"] is not None:
            records.append({**base, "method": "", "error": result["error"]})
            continue
        arenas = stock.get((run["model"], run["alignment"]), {})
        for row in result["rows"]:
            records.append({**base, "stock_arena_bytes": arenas.get(row["method"]), **row})
    df = pd.DataFrame.from_records(records, columns=list(COLUMNS))
    df = df.astype(_DTYPES)
    df["error"] = df["error"].astype("string")
    df["arena_over_lb"] = df["arena_bytes"] / df["lower_bound"]
    df["saving_vs_stock"] = 1 - df["arena_bytes"] / df["stock_arena_bytes"]
    order = ["model", "method", "solver", *SETTINGS]
    return df.sort_values(order, kind="stable").reset_index(drop=True)


# -- the sweep ------------------------------------------------------------------------


def prepare_out(out: str | Path) -> Path:
    """The output folder, created and proven writable."""
    folder = Path(out)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        probe = folder / ".memplan-write-test"
        probe.write_text("")
        probe.unlink()
    except OSError as exc:
        raise SweepConfigError(
            f"cannot write to output folder {str(folder)!r}: {exc.strerror or exc}"
        ) from None
    return folder


def sweep(
    out: str | Path = DEFAULT_OUT,
    models: Sequence[str] | None = None,
    solvers: Sequence[str] | None = None,
    alignments: Sequence[int] = DEFAULT_ALIGNMENTS,
    cat_fusion: Sequence[bool] = DEFAULT_CAT_FUSION,
    time_limit_s: float = DEFAULT_TIME_LIMIT_S,
    check: bool = False,
    jobs: int | None = None,
    executor: str = "local",
    address: str | None = None,
    retry_errors: bool = False,
    progress: bool = True,
) -> pd.DataFrame:
    """Run every missing unit of the grid and write the folder's table, summary and plot.

    Defaults: the default zoo sweep, every registered solver, ExecuTorch's
    alignment (16), cat fusion on, 5 s per solve. Returns the folder's table.
    """
    from memplan.experiments import report, zoo

    models = list(zoo.names() if models is None else models)
    solvers = list(default_solvers() if solvers is None else solvers)
    jobs = default_jobs() if jobs is None else jobs
    validate_grid(models, solvers, alignments, cat_fusion, time_limit_s, jobs, executor)
    folder = prepare_out(out)
    log = RunLog(folder)
    todo = [
        run
        for run in grid(models, solvers, alignments, cat_fusion, time_limit_s, check)
        if not log.is_done(run, retry_errors)
    ]
    _run(todo, log, executor, jobs, address, progress)
    df = table(log)
    report.write_outputs(df, folder)
    return df


def _run(todo: list[Run], log: RunLog, executor: str, jobs: int, address: str | None, progress: bool) -> None:
    from tqdm import tqdm

    with tqdm(total=len(todo), desc="sweep", unit="run", disable=not progress or None) as bar:
        for run, result in run_all(
            execute, todo, executor, jobs, address, affinity=_model_of, crashed=_crashed
        ):
            log.add(run, result)
            bar.set_postfix_str(f"{run.model} {getattr(run, 'solver', 'stock')}", refresh=False)
            bar.update()


def _model_of(run: Run) -> str:
    return run.model


def _crashed(run: Run, exc: BaseException) -> dict[str, Any]:
    return {"error": f"worker process died: {_describe(exc)}", "rows": []}


def parse_list(text: str, kind: str, convert=str) -> list:
    """'a,b' -> ['a', 'b'] through `convert`; a bad item raises SweepConfigError."""
    items = [t.strip() for t in text.split(",") if t.strip()]
    try:
        return [convert(t) for t in items]
    except (ValueError, KeyError):
        raise SweepConfigError(f"bad {kind} list {text!r}") from None


def parse_switches(text: str) -> list[bool]:
    """'on,off' -> [True, False]."""
    words = {"on": True, "off": False, "true": True, "false": False, "yes": True, "no": False}
    items = [t.strip().lower() for t in text.split(",") if t.strip()]
    bad = [t for t in items if t not in words]
    if bad or not items:
        raise SweepConfigError(f"cat fusion must be a list of on/off, got {text!r}")
    return list(dict.fromkeys(words[t] for t in items))
