"""`memplan`: sweeps, single-model plans, Gantt plots, problem export, .pte inspection and re-planning,
reports, `memplan run`, CSV benchmarks.

Only dispatch and printing live here; the flags are experiments.cli.parser's, the work is in
experiments.sweep, experiments.cli.one_model, .inspect, .report, .run, .bench_csv and .listing. Any `MemplanError`
(memplan.errors: an unknown model or solver, a bad setting, an unwritable output is a `UsageError`)
ends with one `memplan: error: ...` line and exit code 2; a model or program that cannot be planned
ends with that line and exit code 1.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import traceback
from collections.abc import Sequence
from pathlib import Path

from memplan.errors import MemplanError, ModelError, UsageError
from memplan.experiments.cli.parser import (
    FAILURE_EXIT,
    USAGE_EXIT,
    build_parser,
    fail,
    levers_of,
    lowering_of,
    one_switch,
    tiling_of,
)


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["run"]:  # the script's own arguments are not memplan's: split them off first
        from memplan.experiments.cli import run

        try:
            own, target = run.split(argv[1:])
        except MemplanError as exc:
            fail(str(exc), USAGE_EXIT)
        args = parser.parse_args(["run", *own])  # -h / --help prints run's help and exits here
        if target is None:
            fail(f"no script or module to run; usage: {run.USAGE}", USAGE_EXIT)
        args.target = target
    else:
        args = parser.parse_args(argv)
    if args.command is None:
        parser.error("choose a command: " + ", ".join(_COMMANDS))
    from memplan.experiments.cli.noise import filtered_stderr

    try:
        with filtered_stderr():
            return _COMMANDS[args.command](args)
    except ModelError as exc:  # the user's own model failed: not a usage mistake
        _traceback_if_verbose(args, exc)
        fail(str(exc) + ("" if args.verbose else " (--verbose shows the full traceback)"), FAILURE_EXIT)
    except MemplanError as exc:
        _traceback_if_verbose(args, exc)
        fail(str(exc), USAGE_EXIT)
    except KeyboardInterrupt:
        fail("interrupted", FAILURE_EXIT)


def _traceback_if_verbose(args: argparse.Namespace, exc: BaseException) -> None:
    """With --verbose, the whole chain (the user's own error first) before the one-line error."""
    if args.verbose:
        traceback.print_exception(exc, file=sys.stderr)


def _sweep(args: argparse.Namespace) -> int:
    from memplan.experiments import checks
    from memplan.experiments.sweep import report
    from memplan.experiments.sweep import run as sweep

    df = sweep.sweep(
        out=args.out,
        models=checks.parse_list(args.models, "model") if args.models else None,
        solvers=args.solvers,
        alignments=checks.parse_list(args.alignment, "alignment", int),
        cat_fusion=checks.parse_switches(args.cat_fusion),
        time_limit_s=args.time_limit,
        check=args.check,
        jobs=args.jobs,
        executor=args.executor,
        address=args.address,
        retry_errors=args.retry_errors,
        progress=not args.quiet,
        isolate=True,
        reproducible=args.reproducible,
        fmt=args.format,
        memory_map=args.memory_map,
        **lowering_of(args),
        **tiling_of(args),
    )
    if not args.quiet:
        print(report.summary_markdown(df))
    failed = int(df["error"].notna().sum())
    print(f"{len(df)} rows, {failed} with an error; written to {args.out}/", file=sys.stderr)
    return FAILURE_EXIT if len(df) and failed == len(df) else 0


def _plan(args: argparse.Namespace) -> int:
    from memplan.experiments.cli import one_model

    if args.plot:
        one_model.check_figure_path(args.plot)
    if args.out:
        one_model.check_pte_path(args.out)
    if args.atol is not None and (not args.check or not args.atol >= 0):
        raise UsageError(f"--atol {args.atol} needs --check and a number >= 0")
    result = _planned(args, one_model)
    print(one_model.format_summary(result), flush=True)
    if args.memory_map:
        print(one_model.format_banks(result), flush=True)
    if args.check:
        from memplan.experiments.zoo.pte_check import CheckError

        try:
            calls = one_model.check_against_stock(result, args.atol)
        except CheckError as exc:
            fail(f"check failed: {exc}", FAILURE_EXIT)
        same = "identical to" if args.atol is None else f"within {args.atol:g} of"
        print(f"check: {calls} calls, outputs {same} the stock program's", file=sys.stderr)
    if args.out:
        print(f"wrote {one_model.save_pte(result, args.out)}", file=sys.stderr)
    if args.plot:
        print(f"wrote {one_model.save_gantt(result, args.plot)}", file=sys.stderr)
    return 0


def _plot(args: argparse.Namespace) -> int:
    from memplan.experiments.cli import one_model

    one_model.check_figure_path(args.out)
    result = _planned(args, one_model, with_stock=False)
    print(f"wrote {one_model.save_gantt(result, args.out)}", file=sys.stderr)
    return 0


def _planned(args, one_model, with_stock: bool = True):
    from memplan.errors import ProblemError
    from memplan.experiments.planning import plan_model

    (fusion,) = one_switch(args.cat_fusion)
    if args.memory_map:
        from memplan.experiments.sweep.grid import check_memory_map

        check_memory_map(args.memory_map, [args.solver])
    try:
        return plan_model(
            args.model,
            args.solver,
            method=args.method,
            time_limit_s=args.time_limit,
            alignment=args.alignment,
            cat_fusion=fusion,
            stock=with_stock,
            memory_map=args.memory_map,
            progress=None if args.quiet else _progress_line,
            **levers_of(args),
            **lowering_of(args),
            **tiling_of(args),
        )
    except ProblemError as exc:  # planning itself failed: not a usage mistake
        fail(str(exc).splitlines()[0], FAILURE_EXIT)
    except Exception as exc:
        hint = one_model.lowering_hint(exc)
        if hint is None:
            raise
        fail(hint, USAGE_EXIT)


def _progress_line(line: str) -> None:
    print(f"memplan: {line}", file=sys.stderr, flush=True)


def _inspect(args: argparse.Namespace) -> int:
    from memplan.experiments import checks
    from memplan.experiments.cli import inspect as inspect_pte
    from memplan.experiments.cli import one_model
    from memplan.experiments.zoo.lowering import library_warnings_silenced
    from memplan.planner.pte.program import read_program
    from memplan.planner.pte.structure import PteError

    checks.check_alignment(args.alignment)
    if args.out:
        one_model.check_figure_path(args.out)
    try:
        with library_warnings_silenced():
            program = read_program(args.program, args.alignment)
    except PteError as exc:  # not a program we can read: the user's mistake, like an unknown model
        fail(str(exc), USAGE_EXIT)
    print(inspect_pte.format_program(program, tensors=not args.brief), end="")
    if args.out:
        try:
            print(f"wrote {inspect_pte.save_figure(program, args.out)}", file=sys.stderr)
        except ValueError as exc:
            fail(str(exc), FAILURE_EXIT)
    return 0


def _replan(args: argparse.Namespace) -> int:
    from pathlib import Path

    from memplan import solvers
    from memplan.experiments import checks
    from memplan.experiments.cli import inspect as inspect_pte
    from memplan.experiments.zoo.lowering import library_warnings_silenced
    from memplan.planner.pte.replan import replan
    from memplan.planner.pte.structure import PteError

    checks.check_choice("solver", args.solver, solvers.available())
    checks.check_alignment(args.alignment)
    checks.check_time_limit(args.time_limit)
    out = Path(args.out)
    if os.path.realpath(out) == os.path.realpath(args.program):  # realpath: no error on a symlink loop
        raise UsageError("--out must differ from the input program")
    if not out.parent.is_dir():  # before minutes of re-planning, not after
        raise UsageError(f"cannot write {args.out!r}: no folder {str(out.parent)!r}")
    try:
        with library_warnings_silenced():
            result = replan(args.program, args.solver, args.time_limit, args.alignment)
    except PteError as exc:
        fail(str(exc), USAGE_EXIT)
    print(inspect_pte.format_replan(result), end="")
    if args.check and not result.changed:
        print("check: nothing was re-planned, the output is the input's bytes", file=sys.stderr)
    elif args.check:
        from memplan.experiments.zoo.pte_check import CheckError, OriginalFailsError, check_same_outputs

        try:
            with library_warnings_silenced():
                calls = check_same_outputs(result.program.data, result.data)
        except OriginalFailsError as exc:
            fail(f"cannot check, {args.out} not written: {exc}", USAGE_EXIT)
        except CheckError as exc:
            fail(f"check failed, {args.out} not written: {exc}", FAILURE_EXIT)
        print(f"check: {calls} calls, outputs identical to {args.program}", file=sys.stderr)
    try:
        out.write_bytes(result.data)
    except OSError as exc:
        raise UsageError(f"cannot write {args.out!r}: {exc.strerror or exc}") from None
    print(
        f"wrote {out}" + ("" if result.changed else " (unchanged: no method could be improved)"),
        file=sys.stderr,
    )
    return 0


def _export_problem(args: argparse.Namespace) -> int:
    from memplan.experiments.cli import one_model

    (fusion,) = one_switch(args.cat_fusion)
    written, notes = one_model.export_problems(
        args.model, args.out, args.alignment, fusion, **lowering_of(args)
    )
    for path in written:
        print(path)
    for note in notes:
        print(f"note: {note}", file=sys.stderr)
    return 0


def _bench_csv(args: argparse.Namespace) -> int:
    from memplan.experiments.cli import bench_csv as bench
    from memplan.experiments.markdown import markdown

    out = Path(args.out) if args.out else None
    if out is not None and out.suffix.lower() not in (".csv", ".parquet"):
        raise UsageError(f"--out {args.out!r} must end in .csv or .parquet")
    if out is not None and out.suffix.lower() == ".parquet":
        from memplan.experiments.sweep.results import require_pyarrow

        require_pyarrow()
    if out is not None:
        bench.check_out_not_an_input(out, bench.csv_files(args.dir))
    df = bench.bench_csv(
        args.dir,
        args.solvers,
        args.time_limit,
        capacity_from_name=args.capacity_from_name,
        progress=not args.quiet,
    )
    print(markdown(df))
    if out is not None:
        try:
            df.to_parquet(out, index=False) if out.suffix.lower() == ".parquet" else df.to_csv(
                out, index=False
            )
        except OSError as exc:
            raise UsageError(f"cannot write {args.out!r}: {exc.strerror or exc}") from None
        print(f"wrote {out}", file=sys.stderr)
    return 0


def _program_report(args: argparse.Namespace, spec: str, memory_map: str = ""):
    from memplan import solvers
    from memplan.errors import ProblemError
    from memplan.experiments.checks import check_choice
    from memplan.experiments.cli import report

    check_choice("solver", args.solver, solvers.available())
    (fusion,) = one_switch(args.cat_fusion)
    try:
        return report.program_report(
            spec, args.solver, args.time_limit, args.alignment, fusion, memory_map, **lowering_of(args)
        )
    except ProblemError as exc:
        fail(str(exc).splitlines()[0], FAILURE_EXIT)


def _across_banks(args: argparse.Namespace, budget: str):
    """memplan's plan of the model across the budget's banks (None for a .pte)."""
    from memplan.experiments.cli import report

    (fusion,) = one_switch(args.cat_fusion)
    return report.across_banks(
        args.model, budget, args.solver, args.time_limit, args.alignment, fusion, **lowering_of(args)
    )


def _lever_tries(args: argparse.Namespace, data) -> list:
    """Each lever and lowering the report's model did not use, measured (none for a .pte)."""
    from memplan.experiments.cli import report

    (fusion,) = one_switch(args.cat_fusion)
    return report.lever_tries(
        args.model,
        data,
        args.solver,
        args.time_limit,
        args.alignment,
        fusion,
        args.memory_map,
        args.try_time_limit,
        progress=lambda line: print(line, file=sys.stderr),
        **lowering_of(args),
    )


def _report(args: argparse.Namespace) -> int:
    from memplan.experiments.cli import report
    from memplan.viz.report import parse_budget, verdicts, write

    if not args.out and not args.model_explorer:
        raise UsageError("memplan report needs --out FILE.html, --model-explorer FILE.json or both")
    out = report.check_out(args.out) if args.out else None
    explorer = report.check_node_data_out(args.model_explorer) if args.model_explorer else None
    try:
        budget = parse_budget(args.budget) if args.budget else None
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    (tries,) = one_switch(args.tries, "--tries")
    if not math.isfinite(args.try_time_limit) or args.try_time_limit <= 0:
        raise UsageError(f"--try-time-limit must be a positive number of seconds, got {args.try_time_limit}")
    data = _program_report(args, args.model, args.memory_map)
    if tries and (out is not None or budget):  # the tries are shown on the page and in the verdicts
        data.tries = _lever_tries(args, data)
    planned_across = parse_budget(args.memory_map) if args.memory_map else None
    budget = budget or planned_across
    if budget and len(budget) > 1 and budget != planned_across:
        if any(not v.fits for v in verdicts(data, budget)):  # check the change by planning across them
            data.banked = _across_banks(args, args.budget)
    if out is not None:
        try:
            write(data, out, budget)
        except OSError as exc:
            raise UsageError(f"cannot write {args.out!r}: {exc.strerror or exc}") from None
    for verdict in verdicts(data, budget) if budget else []:
        print(verdict.sentence() + (f"; smallest change: {verdict.change}" if verdict.change else ""))
    if out is not None:
        print(f"wrote {out} ({out.stat().st_size:,} bytes)", file=sys.stderr)
    if explorer is not None:
        print(report.write_node_data(data, args.model, explorer), file=sys.stderr)
    return 0


def _explore(args: argparse.Namespace) -> int:
    from memplan.experiments.cli.explore import check_port, explore
    from memplan.viz.model_explorer import require_explorer

    require_explorer()  # before planning: what cannot work is said first
    check_port(args.host, args.port)
    explore(_program_report(args, args.model), args.model, args.host, args.port, not args.no_browser)
    return 0


def _diff(args: argparse.Namespace) -> int:
    from memplan.experiments.cli import report
    from memplan.viz.report import diff_programs

    limit = report.parse_growth(args.max_growth) if args.max_growth is not None else None
    found = diff_programs(_program_report(args, args.before), _program_report(args, args.after))
    print(found.text(), end="")
    if limit is not None and found.worst_growth > limit:
        print(
            f"memplan: a method's arenas grew by {found.worst_growth:.1%}, more than --max-growth {limit:.1%}",
            file=sys.stderr,
        )
        return FAILURE_EXIT
    return 0


def _models(args: argparse.Namespace) -> int:
    from memplan.experiments.cli import listing as catalog

    print(catalog.describe(catalog.models()))
    return 0


def _solvers(args: argparse.Namespace) -> int:
    from memplan.experiments.cli import listing as catalog

    print(catalog.describe(catalog.solvers()))
    return 0


def _run(args: argparse.Namespace) -> int:
    from memplan.experiments.cli import run
    from memplan.planner.memory.bank_maps import parse_memory_map

    options = {"solver": args.solver, "time_limit_s": args.time_limit, **levers_of(args), **tiling_of(args)}
    if args.cat_fusion is not None:
        (options["cat_fusion"],) = one_switch(args.cat_fusion)
    if args.memory_map:
        try:
            options["memory_map"] = parse_memory_map(args.memory_map)
        except ValueError as exc:
            raise UsageError(str(exc)) from None
    return run.execute(args.target, options, args.report, quiet=args.quiet)


_COMMANDS = {
    "run": _run,
    "sweep": _sweep,
    "plan": _plan,
    "plot": _plot,
    "export-problem": _export_problem,
    "inspect": _inspect,
    "replan": _replan,
    "report": _report,
    "explore": _explore,
    "diff": _diff,
    "bench-csv": _bench_csv,
    "models": _models,
    "solvers": _solvers,
}


if __name__ == "__main__":
    raise SystemExit(main())
