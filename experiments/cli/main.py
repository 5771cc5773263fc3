"""`memplan`: sweeps, single-model plans, Gantt plots, problem export, .pte inspection and re-planning, CSV benchmarks.

Only argument parsing and printing live here (flags spelled as every benchmark script spells them,
experiments.flags); the work is in experiments.sweep, experiments.cli.one_model,
experiments.cli.inspect, experiments.cli.bench_csv and experiments.cli.listing. Any `MemplanError`
(memplan.errors: an unknown model or solver, a bad setting, an unwritable output is a `UsageError`)
ends with one `memplan: error: ...` line and exit code 2; a model or program that cannot be planned
ends with that line and exit code 1.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import NoReturn

from memplan.errors import MemplanError, UsageError

USAGE_EXIT = 2
FAILURE_EXIT = 1


class _Parser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are one line (no usage block)."""

    def error(self, message: str) -> NoReturn:
        _fail(f"{message} (see: {self.prog} --help)", USAGE_EXIT)


def _fail(message: str, code: int) -> NoReturn:
    one_line = message.replace("\r", "\\r").replace("\n", "\\n")  # a file name may hold a newline
    print(f"memplan: error: {one_line}", file=sys.stderr)
    sys.exit(code)


def build_parser() -> argparse.ArgumentParser:
    from memplan import __version__

    parser = _Parser(prog="memplan", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="version", version=f"memplan {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    _add_sweep(sub)
    _add_plan_and_plot(sub)
    _add_file_commands(sub)
    _add_run(sub)
    sub.add_parser("models", help="list zoo models")
    sub.add_parser("solvers", help="list solvers")
    return parser


def _add_sweep(sub) -> None:
    from memplan.experiments import flags
    from memplan.experiments.sweep import grid as sweep_grid
    from memplan.experiments.sweep import run as sweep
    from memplan.experiments.sweep.executors import EXECUTORS

    p = sub.add_parser("sweep", help="run models x solvers x settings into a results folder")
    flags.add_models(p)
    flags.add_solvers(p)
    p.add_argument("--out", default=sweep.DEFAULT_OUT, help="output folder (default: %(default)s)")
    p.add_argument(
        "--alignment",
        default=",".join(map(str, sweep_grid.DEFAULT_ALIGNMENTS)),
        help="comma-separated byte alignments (default: %(default)s)",
    )
    p.add_argument(
        "--cat-fusion",
        default=",".join("on" if f else "off" for f in sweep_grid.DEFAULT_CAT_FUSION),
        help="on, off or on,off (default: %(default)s)",
    )
    flags.add_time_limit(p)
    p.add_argument("--check", action="store_true", help="run every program and compare with eager PyTorch")
    p.add_argument(
        "--memory-map",
        default="",
        help="plan across banks, fastest first, e.g. sram:64KiB,dram:16MiB (mem_ids 1, 2, ...); adds"
        " per-bank columns (default solvers then: greedy = ExecuTorch's BankedGreedy, bestfit, cpsat)",
    )
    p.add_argument(
        "--reproducible",
        action="store_true",
        help="solvers in their reproducible mode: the same plans on any machine load (milp has none)",
    )
    p.add_argument("--jobs", type=int, help="parallel workers (default: one per core)")
    p.add_argument(
        "--executor", choices=EXECUTORS, default="local", help="where runs execute (default: local)"
    )
    p.add_argument("--address", help="Ray cluster address (default: start a local Ray for the run)")
    p.add_argument("--retry-errors", action="store_true", help="rerun runs that failed in an earlier sweep")
    p.add_argument(
        "--format",
        choices=("csv", "parquet"),
        default="csv",
        help="results table file: results.csv or results.parquet (needs pyarrow) (default: %(default)s)",
    )
    p.add_argument("--quiet", action="store_true", help="no progress bar, no summary")
    _add_lowering(p)


def _add_plan_and_plot(sub) -> None:
    from memplan.experiments import flags
    from memplan.solvers import DEFAULT_ALIGNMENT, DEFAULT_SOLVER

    p = sub.add_parser("plan", help="plan one model (zoo name, .pt2, file.py:factory) and print a summary")
    p.add_argument("model")
    p.add_argument("--solver", default=DEFAULT_SOLVER, help="(default: %(default)s)")
    p.add_argument("--method", help="only this method (default: all)")
    flags.add_time_limit(p)
    p.add_argument("--alignment", type=int, default=DEFAULT_ALIGNMENT, help="(default: %(default)s)")
    p.add_argument("--cat-fusion", default="on", help="on or off (default: %(default)s)")
    _add_levers(p)
    _add_lowering(p)
    p.add_argument("--plot", metavar="FILE", help="also write the Gantt chart (.png, .svg or .pdf)")
    p.add_argument("--out", metavar="FILE.pte", help="also write the planned program")
    p.add_argument(
        "--check",
        action="store_true",
        help="run the planned and the stock program of the same graph on the model's inputs; outputs"
        " must be bit-identical (or within --atol); the table is printed either way",
    )
    p.add_argument(
        "--atol", type=float, help="with --check: outputs may differ from stock's by this much (default: 0)"
    )
    _add_tiling(p)

    p = sub.add_parser("plot", help="write a Gantt chart of a model's plan (zoo name, .pt2, file.py:factory)")
    p.add_argument("model")
    p.add_argument("--solver", default=DEFAULT_SOLVER, help="(default: %(default)s)")
    p.add_argument("--method", help="only this method (default: all, stacked)")
    flags.add_time_limit(p)
    p.add_argument("--alignment", type=int, default=DEFAULT_ALIGNMENT, help="(default: %(default)s)")
    p.add_argument("--cat-fusion", default="on", help="on or off (default: %(default)s)")
    _add_levers(p)
    _add_lowering(p)
    p.add_argument("--out", required=True, metavar="FILE", help=".png, .svg or .pdf")


def _add_file_commands(sub) -> None:
    """Commands on files: problems out (export-problem), programs in (inspect, replan), CSV problems in."""
    from memplan.experiments import flags
    from memplan.solvers import DEFAULT_ALIGNMENT, DEFAULT_SOLVER

    p = sub.add_parser("export-problem", help="write each method's problem as MiniMalloc CSV and JSON")
    p.add_argument("model")
    p.add_argument("--out", required=True, metavar="DIR")
    p.add_argument("--alignment", type=int, default=DEFAULT_ALIGNMENT, help="(default: %(default)s)")
    p.add_argument("--cat-fusion", default="on", help="on or off (default: %(default)s)")
    _add_lowering(p)

    p = sub.add_parser("inspect", help="what a built .pte plans: arenas, tensors, lifetimes, lower bound")
    p.add_argument("program", metavar="PROGRAM.pte")
    p.add_argument(
        "--out", metavar="FILE", help="also write Gantt charts and memory profiles (.png, .svg, .pdf)"
    )
    p.add_argument("--brief", action="store_true", help="per-method summary only, no tensor tables")
    p.add_argument(
        "--alignment",
        type=int,
        default=DEFAULT_ALIGNMENT,
        help="alignment of the derived problem (default: %(default)s)",
    )

    p = sub.add_parser("replan", help="re-plan a built .pte without its Python source")
    p.add_argument("program", metavar="IN.pte")
    p.add_argument("--out", required=True, metavar="OUT.pte")
    p.add_argument("--solver", default=DEFAULT_SOLVER, help="(default: %(default)s)")
    flags.add_time_limit(p)
    p.add_argument("--alignment", type=int, default=DEFAULT_ALIGNMENT, help="(default: %(default)s)")
    p.add_argument(
        "--check",
        action="store_true",
        help="run both programs in executorch.runtime on the same random inputs; outputs must be identical",
    )

    p = sub.add_parser(
        "report",
        help="an interactive HTML report of a program's plan (zoo name, .pt2, file.py:factory, .pte)",
    )
    p.add_argument("model", metavar="MODEL|FILE.pte|FILE.pt2")
    p.add_argument("--out", required=True, metavar="FILE.html")
    p.add_argument(
        "--budget",
        default="",
        help="memories, fastest first, e.g. sram:256KiB,dram:8MiB: a verdict per bank and the smallest change",
    )
    _add_plan_options(p)

    p = sub.add_parser("diff", help="which methods, arenas and tensors of two programs grew or shrank")
    p.add_argument("before", metavar="A")
    p.add_argument("after", metavar="B")
    p.add_argument(
        "--max-growth",
        help="exit with code 1 when a method's arenas grew by more than this, e.g. 5%% (for CI)",
    )
    _add_plan_options(p)

    p = sub.add_parser("bench-csv", help="solve a folder of MiniMalloc CSV problems and print a table")
    p.add_argument("dir")
    flags.add_solvers(p, ("bestfit", "cpsat"))
    flags.add_time_limit(p)
    p.add_argument(
        "--capacity-from-name",
        action="store_true",
        help="read each problem's capacity from its file name (MiniMalloc benchmark style)",
    )
    p.add_argument("--out", metavar="FILE", help="also write the table (.csv, or .parquet with pyarrow)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")


def _add_run(sub) -> None:
    from memplan.experiments import flags
    from memplan.solvers import DEFAULT_SOLVER

    p = sub.add_parser(
        "run",
        help="run an export script (-- script.py ARGS, or -m module ARGS) with memplan planning every program",
        usage="memplan run [OPTIONS] -- script.py [ARGS...] | memplan run [OPTIONS] -m module [ARGS...]",
    )
    p.add_argument("--solver", default=DEFAULT_SOLVER, help="memplan solver (default: %(default)s)")
    flags.add_time_limit(p)
    p.add_argument(
        "--memory-map", default="", help="plan across banks, fastest first, e.g. sram:64KiB,dram:16MiB"
    )
    p.add_argument("--no-cat-fusion", action="store_true", help="leave every torch.cat as a copy")
    p.add_argument("--no-state-in-place", action="store_true", help="keep ExecuTorch's state write-backs")
    p.add_argument(
        "--report", metavar="DIR", help="also write the tables to DIR/report.md and DIR/report.json"
    )


def _add_levers(p: argparse.ArgumentParser) -> None:
    """memplan's levers besides cat fusion, each on or off (default: PlannerPass's)."""
    p.add_argument(
        "--state-in-place", help="on or off: write new state values where the state lives (default: on)"
    )
    p.add_argument(
        "--slice-noop", help="on or off: place contiguous slices inside their source (default: off)"
    )
    p.add_argument("--quiet", action="store_true", help="no progress lines")


def _levers(args: argparse.Namespace) -> dict:
    """The lever switches given, as plan_model's keyword arguments (those not given keep its defaults)."""
    return {
        name: _one_switch(text, flag)[0]
        for name, flag, text in (
            ("state_in_place", "--state-in-place", args.state_in_place),
            ("slice_noop", "--slice-noop", args.slice_noop),
        )
        if text is not None
    }


def _add_plan_options(p: argparse.ArgumentParser) -> None:
    """How a model given to `report` or `diff` is planned (a .pte is read, and re-planned by --solver)."""
    from memplan.experiments import flags
    from memplan.solvers import DEFAULT_ALIGNMENT, DEFAULT_SOLVER

    p.add_argument("--solver", default=DEFAULT_SOLVER, help="(default: %(default)s)")
    flags.add_time_limit(p)
    p.add_argument("--alignment", type=int, default=DEFAULT_ALIGNMENT, help="(default: %(default)s)")
    p.add_argument("--cat-fusion", default="on", help="on or off (default: %(default)s)")
    _add_lowering(p)


def _add_lowering(p: argparse.ArgumentParser) -> None:
    """How a program is lowered: as given (plain to_edge) unless these say otherwise."""
    from memplan.experiments.zoo.programs import PARTITIONERS

    p.add_argument(
        "--partitioner",
        choices=PARTITIONERS,
        help="delegate with to_edge_transform_and_lower and this partitioner (default: none, plain to_edge;"
        " a zoo model keeps its own)",
    )
    p.add_argument(
        "--convert-linear",
        action="store_true",
        default=None,
        help="run XNNPACK's ConvertToLinearPass on the edge program, as export_llama does",
    )
    p.add_argument(
        "--const-prop",
        action="store_true",
        default=None,
        help="fold constant subgraphs (ExecutorchBackendConfig do_quant_fusion_and_const_prop)",
    )


def _add_tiling(p: argparse.ArgumentParser) -> None:
    """--tiling and its options (memplan.planner.tiling.TilingOptions)."""
    p.add_argument(
        "--tiling",
        action="store_true",
        help="compute a high-resolution CNN region in row bands (patch-based inference) before lowering",
    )
    p.add_argument(
        "--max-extra-macs",
        type=float,
        default=0.15,
        help="with --tiling: the most extra MACs, a fraction of the model's (default: %(default)s)",
    )
    p.add_argument(
        "--budget", type=int, help="with --tiling: the fewest bands whose peak fits this many bytes"
    )


def _tiling(args: argparse.Namespace) -> dict:
    from memplan.planner.tiling import TilingOptions

    if not getattr(args, "tiling", False):
        if getattr(args, "budget", None) is not None:
            raise UsageError("--budget is an option of --tiling; add --tiling")
        return {}
    return {"tiling": TilingOptions(max_extra_macs=args.max_extra_macs, budget_bytes=args.budget)}


def _lowering(args: argparse.Namespace) -> dict:
    return {
        "partitioner": args.partitioner,
        "convert_linear": args.convert_linear,
        "const_prop": args.const_prop,
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["run"]:  # the script's own arguments are not memplan's: split them off first
        from memplan.experiments.cli import run

        try:
            own, target = run.split(argv[1:])
        except MemplanError as exc:
            _fail(str(exc), USAGE_EXIT)
        args = parser.parse_args(["run", *own])
        args.target = target
    else:
        args = parser.parse_args(argv)
    if args.command is None:
        parser.error("choose a command: " + ", ".join(_COMMANDS))
    from memplan.experiments.cli.noise import filtered_stderr

    try:
        with filtered_stderr():
            return _COMMANDS[args.command](args)
    except MemplanError as exc:
        _fail(str(exc), USAGE_EXIT)
    except KeyboardInterrupt:
        _fail("interrupted", FAILURE_EXIT)


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
        **_lowering(args),
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
    if args.check:
        from memplan.experiments.zoo.pte_check import CheckError

        try:
            calls = one_model.check_against_stock(result, args.atol)
        except CheckError as exc:
            _fail(f"check failed: {exc}", FAILURE_EXIT)
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

    (fusion,) = _one_switch(args.cat_fusion)
    try:
        return plan_model(
            args.model,
            args.solver,
            method=args.method,
            time_limit_s=args.time_limit,
            alignment=args.alignment,
            cat_fusion=fusion,
            stock=with_stock,
            progress=None if args.quiet else _progress_line,
            **_levers(args),
            **_lowering(args),
            **_tiling(args),
        )
    except ProblemError as exc:  # planning itself failed: not a usage mistake
        _fail(str(exc).splitlines()[0], FAILURE_EXIT)
    except Exception as exc:
        hint = one_model.lowering_hint(exc)
        if hint is None:
            raise
        _fail(hint, USAGE_EXIT)


def _progress_line(line: str) -> None:
    print(f"memplan: {line}", file=sys.stderr, flush=True)


def _one_switch(text: str, flag: str = "--cat-fusion") -> list[bool]:
    from memplan.experiments import checks

    switches = checks.parse_switches(text, flag)
    if len(switches) != 1:
        raise UsageError(f"{flag} takes one value here (on or off), got {text!r}")
    return switches


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
        _fail(str(exc), USAGE_EXIT)
    print(inspect_pte.format_program(program, tensors=not args.brief), end="")
    if args.out:
        try:
            print(f"wrote {inspect_pte.save_figure(program, args.out)}", file=sys.stderr)
        except ValueError as exc:
            _fail(str(exc), FAILURE_EXIT)
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
        _fail(str(exc), USAGE_EXIT)
    print(inspect_pte.format_replan(result), end="")
    if args.check and not result.changed:
        print("check: nothing was re-planned, the output is the input's bytes", file=sys.stderr)
    elif args.check:
        from memplan.experiments.zoo.pte_check import CheckError, OriginalFailsError, check_same_outputs

        try:
            with library_warnings_silenced():
                calls = check_same_outputs(result.program.data, result.data)
        except OriginalFailsError as exc:
            _fail(f"cannot check, {args.out} not written: {exc}", USAGE_EXIT)
        except CheckError as exc:
            _fail(f"check failed, {args.out} not written: {exc}", FAILURE_EXIT)
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

    (fusion,) = _one_switch(args.cat_fusion)
    written, notes = one_model.export_problems(
        args.model, args.out, args.alignment, fusion, **_lowering(args)
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


def _program_report(args: argparse.Namespace, spec: str):
    from memplan import solvers
    from memplan.errors import ProblemError
    from memplan.experiments.checks import check_choice
    from memplan.experiments.cli import report

    check_choice("solver", args.solver, solvers.available())
    (fusion,) = _one_switch(args.cat_fusion)
    try:
        return report.program_report(
            spec, args.solver, args.time_limit, args.alignment, fusion, **_lowering(args)
        )
    except ProblemError as exc:
        _fail(str(exc).splitlines()[0], FAILURE_EXIT)


def _report(args: argparse.Namespace) -> int:
    from memplan.experiments.cli import report
    from memplan.viz.report import parse_budget, verdicts, write

    out = report.check_out(args.out)
    try:
        budget = parse_budget(args.budget) if args.budget else None
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    data = _program_report(args, args.model)
    try:
        write(data, out, budget)
    except OSError as exc:
        raise UsageError(f"cannot write {args.out!r}: {exc.strerror or exc}") from None
    for verdict in verdicts(data, budget) if budget else []:
        print(verdict.sentence() + (f"; smallest change: {verdict.change}" if verdict.change else ""))
    print(f"wrote {out} ({out.stat().st_size:,} bytes)", file=sys.stderr)
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

    options = {
        "solver": args.solver,
        "time_limit_s": args.time_limit,
        "cat_fusion": not args.no_cat_fusion,
        "state_in_place": not args.no_state_in_place,
    }
    if args.memory_map:
        try:
            options["memory_map"] = parse_memory_map(args.memory_map)
        except ValueError as exc:
            raise UsageError(str(exc)) from None
    return run.execute(args.target, options, args.report)


_COMMANDS = {
    "run": _run,
    "sweep": _sweep,
    "plan": _plan,
    "plot": _plot,
    "export-problem": _export_problem,
    "inspect": _inspect,
    "replan": _replan,
    "report": _report,
    "diff": _diff,
    "bench-csv": _bench_csv,
    "models": _models,
    "solvers": _solvers,
}


if __name__ == "__main__":
    raise SystemExit(main())
