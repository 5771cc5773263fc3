"""The `memplan` command line's parser: every command's flags (spelled as the benchmark scripts spell
them, experiments.flags) and the readers that turn parsed flags into planning options.

Errors are one line: `OneLineParser.error` and `fail` print `memplan: error: ...` and exit with
USAGE_EXIT (a mistake in the command) or FAILURE_EXIT (a model or program that cannot be planned).
"""

from __future__ import annotations

import argparse
import sys
from typing import NoReturn

from memplan.errors import UsageError

USAGE_EXIT = 2
FAILURE_EXIT = 1
DESCRIPTION = "`memplan`: sweeps, single-model plans, Gantt plots, problem export, .pte inspection and re-planning, CSV benchmarks."


class OneLineParser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are one line (no usage block)."""

    def error(self, message: str) -> NoReturn:
        fail(f"{message} (see: {self.prog} --help)", USAGE_EXIT)


def fail(message: str, code: int) -> NoReturn:
    one_line = message.replace("\r", "\\r").replace("\n", "\\n")  # a file name may hold a newline
    print(f"memplan: error: {one_line}", file=sys.stderr)
    sys.exit(code)


def build_parser() -> argparse.ArgumentParser:
    from memplan import __version__

    parser = OneLineParser(prog="memplan", description=DESCRIPTION)
    parser.add_argument("--version", action="version", version=f"memplan {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    _add_sweep(sub)
    _add_plan_and_plot(sub)
    _add_file_commands(sub)
    _add_run(sub)
    sub.add_parser("models", help="list zoo models")
    sub.add_parser("solvers", help="list solvers")
    for command in sub.choices.values():
        command.add_argument(
            "--verbose", action="store_true", help="the full traceback behind a one-line error"
        )
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
    _add_tiling(p)


def _add_plan_and_plot(sub) -> None:
    p = sub.add_parser("plan", help="plan one model (zoo name, .pt2, file.py:factory) and print a summary")
    _add_model_planning(p, "only this method (default: all)")
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
    _add_model_planning(p, "only this method (default: all, stacked)")
    p.add_argument("--out", required=True, metavar="FILE", help=".png, .svg or .pdf")


def _add_model_planning(p: argparse.ArgumentParser, method_help: str) -> None:
    """The flags `plan` and `plot` share: which model and method, the solver, and how it is lowered."""
    from memplan.experiments import flags
    from memplan.solvers import DEFAULT_ALIGNMENT, DEFAULT_SOLVER

    p.add_argument("model")
    p.add_argument("--solver", default=DEFAULT_SOLVER, help="(default: %(default)s)")
    p.add_argument("--method", help=method_help)
    flags.add_time_limit(p)
    p.add_argument("--alignment", type=int, default=DEFAULT_ALIGNMENT, help="(default: %(default)s)")
    p.add_argument("--cat-fusion", default="on", help="on or off (default: %(default)s)")
    p.add_argument(
        "--memory-map",
        default="",
        help="plan across banks, fastest first, e.g. sram:64KiB,dram:16MiB (mem_ids 1, 2, ...)",
    )
    _add_levers(p)
    p.add_argument("--quiet", action="store_true", help="no progress lines")
    _add_lowering(p)


def _add_file_commands(sub) -> None:
    """Commands on files: problems out (export-problem), programs in (inspect, replan), CSV problems in."""
    from memplan.experiments import flags
    from memplan.experiments.bench.minimalloc import MINIMALLOC_DIR
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
    p.add_argument("--out", metavar="FILE.html", help="the HTML page (this, --model-explorer or both)")
    p.add_argument(
        "--model-explorer",
        metavar="FILE.json",
        help="also (or only) write Model Explorer node data for the program: FILE.json the live bytes,"
        " FILE.output.json, .peak, .levers, .saving_vs_stock beside it, and the program as FILE.pte"
        " for a model (pip install 'memplan[explorer]')",
    )
    p.add_argument(
        "--budget",
        default="",
        help="memories, fastest first, e.g. sram:256KiB,dram:8MiB: a verdict per bank and the smallest change"
        " (default: the --memory-map banks)",
    )
    p.add_argument(
        "--memory-map",
        default="",
        help="plan a model across banks, fastest first, e.g. sram:64KiB,dram:16MiB (mem_ids 1, 2, ...;"
        " solvers greedy, bestfit, cpsat)",
    )
    p.add_argument(
        "--tries",
        default="on",
        help="on or off: re-plan a model with each lever and lowering it did not use and list what each"
        " saves, on the page (--out) and in the budget's verdicts; --model-explorer alone makes none"
        " (default: %(default)s)",
    )
    p.add_argument(
        "--try-time-limit",
        type=float,
        default=300.0,  # experiments.cli.tries.DEFAULT_TRY_SECONDS (not imported: it loads torch)
        metavar="SECONDS",
        help="the most seconds one such try may take; over it, it is listed as failed (default: %(default)s)",
    )
    _add_plan_options(p)

    p = sub.add_parser(
        "explore",
        help="open the program in Google's Model Explorer with memplan's overlays (live bytes, output,"
        " peak, levers, saving vs stock); serves on 127.0.0.1 until Ctrl+C",
    )
    p.add_argument("model", metavar="MODEL|FILE.pte|FILE.pt2")
    p.add_argument("--host", default="127.0.0.1", help="(default: %(default)s)")
    p.add_argument("--port", type=int, default=8080, help="(default: %(default)s)")
    p.add_argument("--no-browser", action="store_true", help="print the page's address, open no browser")
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
    p.add_argument(
        "dir",
        nargs="?",
        default=str(MINIMALLOC_DIR),
        help="folder of CSV problems (default: MiniMalloc's benchmark problems, shipped with memplan)",
    )
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
        usage="memplan run [OPTIONS] -- [python] script.py [ARGS...] | memplan run [OPTIONS] -m module [ARGS...]",
    )
    p.add_argument("--solver", default=DEFAULT_SOLVER, help="memplan solver (default: %(default)s)")
    flags.add_time_limit(p)
    p.add_argument(
        "--memory-map", default="", help="plan across banks, fastest first, e.g. sram:64KiB,dram:16MiB"
    )
    p.add_argument("--cat-fusion", help="on or off: place torch.cat inputs inside its output (default: on)")
    _add_levers(p)
    p.add_argument(
        "--no-cat-fusion", dest="cat_fusion", action="store_const", const="off", help="= --cat-fusion off"
    )
    p.add_argument(
        "--no-state-in-place",
        dest="state_in_place",
        action="store_const",
        const="off",
        help="= --state-in-place off",
    )
    p.add_argument(
        "--quiet",
        action="store_true",
        help="no tables on stderr (--report still writes them); a method the stock pass planned is still named",
    )
    p.add_argument(
        "--report", metavar="DIR", help="also write the tables to DIR/report.md and DIR/report.json"
    )
    _add_tiling(p)
    p.add_argument(
        "--tiling-input",
        choices=("arena", "caller"),
        default="arena",
        help="with --tiling: who holds the graph's input, as the script's memory planning pass will say"
        " (caller: MemoryPlanningPass(alloc_graph_input=False)); tiling happens when the script lowers,"
        " before that pass exists, so this is its first guess: when to_executorch's pass says otherwise"
        " the program is tiled and lowered again (naming the right holder saves that; default: arena)",
    )


def _add_levers(p: argparse.ArgumentParser) -> None:
    """memplan's levers besides cat fusion, each on or off (default: PlannerPass's)."""
    p.add_argument(
        "--state-in-place", help="on or off: write new state values where the state lives (default: on)"
    )
    p.add_argument(
        "--slice-noop", help="on or off: place contiguous slices inside their source (default: on)"
    )
    p.add_argument(
        "--reorder",
        help="on or off: the exported order given back after lowering, each instruction just before its first user (default: on with --tiling, else off)",
    )
    p.add_argument(
        "--elementwise-in-place",
        help="on or off: an elementwise op's output (a ReLU6, an add) written over the input it reads"
        " last (default: on with --tiling, else off)",
    )


def levers_of(args: argparse.Namespace) -> dict:
    """The lever switches given, as plan_model's keyword arguments (those not given keep its defaults)."""
    return {
        name: one_switch(text, flag)[0]
        for name, flag, text in (
            ("state_in_place", "--state-in-place", args.state_in_place),
            ("slice_noop", "--slice-noop", args.slice_noop),
            ("reorder", "--reorder", args.reorder),
            ("elementwise_in_place", "--elementwise-in-place", args.elementwise_in_place),
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
        help="compute a high-resolution CNN region in row bands (patch-based inference) before lowering"
        " (memplan run: each program the script hands to to_edge / to_edge_transform_and_lower)",
    )
    p.add_argument(
        "--max-extra-macs",
        type=float,
        default=0.15,
        help="with --tiling: the most extra MACs, a fraction of the model's (default: %(default)s)",
    )
    p.add_argument(
        "--max-regions",
        type=int,
        default=None,
        help="with --tiling: the most regions tiled one after the other, each where the peak sits once"
        " the last is tiled (default: TilingOptions.max_regions, 32)",
    )
    p.add_argument(
        "--budget",
        help="with --tiling: the fewest bands whose peak fits this size (150000, 146KiB or sram:146KiB:"
        " the grammar of --memory-map and report's --budget, one bank)",
    )


def tiling_of(args: argparse.Namespace) -> dict:
    from memplan.planner.tiling import TilingOptions

    if not getattr(args, "tiling", False):
        if getattr(args, "budget", None) is not None:
            raise UsageError("--budget is an option of --tiling; add --tiling")
        if getattr(args, "max_regions", None) is not None:
            raise UsageError("--max-regions is an option of --tiling; add --tiling")
        if getattr(args, "tiling_input", "arena") != "arena":
            raise UsageError("--tiling-input is an option of --tiling; add --tiling")
        return {}
    from memplan.planner.memory.bank_maps import parse_one_size

    try:
        budget = None if args.budget is None else parse_one_size(args.budget, "--budget")
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    in_arena = getattr(args, "tiling_input", "arena") != "caller"  # memplan run's --tiling-input
    regions = {} if args.max_regions is None else {"max_regions": args.max_regions}
    return {
        "tiling": TilingOptions(
            max_extra_macs=args.max_extra_macs, budget_bytes=budget, input_in_arena=in_arena, **regions
        )
    }


def lowering_of(args: argparse.Namespace) -> dict:
    return {
        "partitioner": args.partitioner,
        "convert_linear": args.convert_linear,
        "const_prop": args.const_prop,
    }


def one_switch(text: str, flag: str = "--cat-fusion") -> list[bool]:
    from memplan.experiments import checks

    switches = checks.parse_switches(text, flag)
    if len(switches) != 1:
        raise UsageError(f"{flag} takes one value here (on or off), got {text!r}")
    return switches
