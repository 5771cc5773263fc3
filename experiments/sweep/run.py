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
import os
import sys
import traceback
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from memplan.errors import UsageError
from memplan.experiments.checks import check_choice, prepare_out
from memplan.experiments.sweep.executors import default_jobs, run_all
from memplan.experiments.sweep.grid import (
    BANK_SWEEP_SOLVERS,
    DEFAULT_ALIGNMENTS,
    DEFAULT_CAT_FUSION,
    DEFAULT_TIME_LIMIT_S,
    PlanRun,
    Run,
    StockRun,
    grid,
    tiling_options_of,
    tiling_text,
    validate_grid,
)
from memplan.experiments.sweep.run_log import RUNS_FILE, RunLog
from memplan.experiments.sweep.table import table
from memplan.experiments.zoo.lowering import library_warnings_silenced, lower_planned, stock_program

DEFAULT_OUT = "results"


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
    isolate: bool = False,
    reproducible: bool = False,
    fmt: str = "csv",
    memory_map: str = "",
    partitioner: str | None = None,
    convert_linear: bool | None = None,
    const_prop: bool | None = None,
    tiling: Any = None,
) -> pd.DataFrame:
    """Run every missing unit of the grid and write the folder's table, summary and plot.

    Defaults: the default zoo sweep, every registered solver, ExecuTorch's
    alignment (16), cat fusion on, 5 s per solve; the table as `fmt` (csv or
    parquet). Returns the folder's table. `memory_map` ("sram:64KiB,dram:16MiB")
    plans every run across those banks (default solvers: greedy = ExecuTorch's
    BankedGreedy, bestfit, cpsat) and adds per-bank columns.
    With `isolate`, runs go to worker processes even with `jobs=1`, so a
    solver that crashes the interpreter (a segfault in native code) becomes an
    error row; the `memplan sweep` command always isolates. `reproducible`
    runs every solver in its reproducible mode (solvers.solve): the same grid
    gives the same plans on any load; milp has none, so its runs are error rows.
    `partitioner`, `convert_linear` and `const_prop` lower every model that way (plan_model's options);
    by default a user's program is lowered as given and a zoo model with its recipe. `tiling` (a
    TilingOptions) tiles every method before lowering; its rows add the region, bands and extra MACs.
    """
    from memplan import solvers as solver_registry
    from memplan.experiments import zoo
    from memplan.experiments.sweep import report, results
    from memplan.experiments.zoo.programs import PARTITIONERS, lowering_text

    results.check_format(fmt)
    if partitioner is not None:
        check_choice("partitioner", partitioner, PARTITIONERS)
    lowering = lowering_text(partitioner, convert_linear, const_prop)
    models = list(zoo.names() if models is None else models)
    if solvers is None:
        solvers = list(BANK_SWEEP_SOLVERS) if memory_map else solver_registry.available()
    solvers = list(solvers)
    jobs = default_jobs() if jobs is None else jobs
    validate_grid(models, solvers, alignments, cat_fusion, time_limit_s, jobs, executor, memory_map)
    folder = prepare_out(out)
    report.check_output_files(folder, also=(RUNS_FILE,))
    with folder_lock(folder):
        log = RunLog(folder)
        todo = [
            run
            for run in grid(
                models,
                solvers,
                alignments,
                cat_fusion,
                time_limit_s,
                check,
                reproducible,
                memory_map,
                lowering,
                tiling_text(tiling),
            )
            if not log.is_done(run, retry_errors)
        ]
        _run(todo, log, executor, jobs, address, progress, isolate)
        df = table(log)
        report.write_outputs(df, folder, fmt)
    return df


LOCK_FILE = ".memplan-sweep.lock"


@contextlib.contextmanager
def folder_lock(folder: Path) -> Iterator[None]:
    """One sweep at a time per output folder: a second one is refused at once (UsageError), instead of
    both running every job. The lock is the kernel's (flock), so a killed sweep leaves none behind."""
    import fcntl

    with open(folder / LOCK_FILE, "a+") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            holder = handle.read().strip() or "another process"
            raise UsageError(
                f"another sweep ({holder}) is writing to {str(folder)!r}; wait for it or choose another --out"
            ) from None
        handle.truncate(0)
        handle.write(f"pid {os.getpid()}")
        handle.flush()
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _run(
    todo: list[Run], log: RunLog, executor: str, jobs: int, address: str | None, progress: bool, isolate: bool
) -> None:
    from tqdm import tqdm

    lines = progress and not sys.stderr.isatty()  # tqdm draws nothing there (CI logs, nohup)
    with tqdm(total=len(todo), desc="sweep", unit="run", disable=not progress or None) as bar:
        for done, (run, result) in enumerate(
            run_all(
                execute, todo, executor, jobs, address, affinity=_model_of, crashed=_crashed, isolate=isolate
            ),
            start=1,
        ):
            log.add(run, result)
            what = f"{run.model} {getattr(run, 'solver', 'stock')}"
            bar.set_postfix_str(what, refresh=False)
            bar.update()
            if lines:
                status = "error" if result.get("error") else "done"
                print(f"sweep: {done}/{len(todo)} {what}: {status}", file=sys.stderr, flush=True)


def _model_of(run: Run) -> str:
    return run.model


def _crashed(run: Run, exc: BaseException) -> dict[str, Any]:
    return {"error": f"worker process died: {_describe(exc)}", "rows": []}


@functools.lru_cache(maxsize=4)
def _exported(name: str, lowering: str = ""):
    """The model (zoo name or program spec) with its edge program built once per worker process.

    `runtime.lower` deep-copies the edge program it caches on the model, so
    every lowering after this one skips torch.export and export_seconds
    measure lowering and planning only.
    """
    from memplan.experiments.zoo import programs, runtime

    model = programs.with_lowering(programs.load(name), **programs.lowering_options(lowering))
    runtime.edge_program(model)
    return model


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
    """Every error of the chain on one line, the innermost (the cause) first, each `Type: message [where]`."""
    chain: list[BaseException] = []
    link: BaseException | None = exc
    while link is not None and all(link is not seen for seen in chain):
        chain.append(link)
        link = link.__cause__ or (None if link.__suppress_context__ else link.__context__)
    return " -> ".join(_one_error(e) for e in reversed(chain))[:2000]


def _one_error(exc: BaseException) -> str:
    """`Type: message` on one line, plus where it was raised."""
    frame = traceback.extract_tb(exc.__traceback__)[-1] if exc.__traceback__ else None
    where = f" [{Path(frame.filename).name}:{frame.lineno}]" if frame else ""
    message = " | ".join(line.strip() for line in str(exc).splitlines() if line.strip())
    return f"{type(exc).__name__}: {message}{where}"


def _stock(run: StockRun) -> dict[str, Any]:
    from memplan.experiments.zoo import runtime

    model = _exported(run.model, run.lowering)
    sizes = runtime.stock_arena_bytes(stock_program(model, run.alignment, run.memory_map))
    return {
        "error": None,
        "arena_bytes": {m: sum(s) for m, s in sizes.items()},
        "program_arena_bytes": runtime.program_arena_bytes(sizes),
    }


def _plan(run: PlanRun) -> dict[str, Any]:
    model = _exported(run.model, run.lowering)
    lowered = lower_planned(
        model,
        run.solver,
        run.alignment,
        run.cat_fusion,
        run.time_limit_s,
        run.reproducible,
        memory_map=run.memory_map,
        tiling=tiling_options_of(run.tiling),
    )
    verdict = _check(model, lowered.program) if run.check else {}
    rows = [{**row, "lowering": model.lowering, **verdict} for row in lowered.rows()]
    return {"error": None, "rows": rows, "program_arena_bytes": lowered.program_arena_bytes}


def _check(model, program) -> dict[str, Any]:
    """ran_ok / matches_eager for the program, and an `error` saying what went wrong."""
    from memplan.experiments.zoo import runtime

    try:
        got = runtime.run_pte(program.buffer, model.calls)
    except Exception as exc:  # noqa: BLE001 - a program that does not run is a result
        return {"ran_ok": False, "matches_eager": False, "error": "run: " + _describe(exc)}
    try:
        runtime.compare_outputs(model, got, runtime.eager_outputs(model))
    except AssertionError as exc:
        return {"ran_ok": True, "matches_eager": False, "error": "check: " + _describe(exc)}
    return {"ran_ok": True, "matches_eager": True}
