"""Print what cat fusion does to zoo models: a table per model, one row per method.

    python -m memplan.experiments.bench.catfusion_report                    # cat_seed, unet, densenet_block
    python -m memplan.experiments.bench.catfusion_report --models unet --solvers cpsat --partial --check --cats

Columns: cats found / fused / aliased / partial / refused (with reason
counts), copy bytes removed per inference, arena bytes with and without
fusion (same solver; "without" plans the same problem minus the groups),
the lower bound with and without, and ExecuTorch's own greedy planner on the
unfused tensors for reference. `--check` also runs the fused program
in executorch.runtime against eager PyTorch. `--cats` lists every cat.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

import pandas as pd

from memplan.experiments import flags
from memplan.experiments.markdown import markdown
from memplan.experiments.zoo import programs, runtime
from memplan.planner.levers.cat.decisions import CatStatus
from memplan.planner.levers.cat.report import CatReport
from memplan.planner.pass_ import PlannerPass

DEFAULT_MODELS = ("cat_seed", "unet", "densenet_block")


def reports(
    model_name: str,
    solver: str,
    time_limit_s: float | None,
    partial: bool,
    relax_alignment: bool,
    check: bool,
) -> dict[str, tuple[CatReport, int]]:
    """Lower one zoo model with cat fusion on: per method, the cat report and the stock planner's arena bytes."""
    model = programs.load(model_name)
    planner = PlannerPass(
        solver=solver,
        time_limit_s=time_limit_s,
        cat_fusion=True,
        cat_fusion_partial=partial,
        cat_fusion_relax_alignment=relax_alignment,
    )
    program = runtime.lower(model, memory_planning_pass=planner)
    if check:
        runtime.check_outputs(model, program.buffer)
    return {
        method: (result.cat_report, sum(result.stock_sizes))
        for method, result in planner.results.items()
        if result.cat_report
    }


def row(model: str, method: str, report: CatReport, stock: int) -> list[object]:
    refused = ", ".join(
        f"{r.value}={n}" for r, n in sorted(report.refusals().items(), key=lambda kv: kv[0].value)
    )
    return [
        f"{model}/{method}" if method != "forward" else model,
        len(report.decisions),
        report.count(CatStatus.FUSED),
        report.count(CatStatus.ALIASED),
        report.count(CatStatus.PARTIAL),
        f"{report.count(CatStatus.REFUSED)}" + (f" ({refused})" if refused else ""),
        report.copy_bytes_removed,
        report.arena_with,
        report.arena_without,
        report.lower_bound_with,
        report.lower_bound_without,
        stock,
    ]


HEADER = [
    "model",
    "cats",
    "fused",
    "aliased",
    "partial",
    "refused (reasons)",
    "copy_removed_bytes",
    "arena_with_fusion_bytes",
    "arena_without_fusion_bytes",
    "lower_bound_with_fusion_bytes",
    "lower_bound_without_fusion_bytes",
    "stock_arena_bytes",
]


def format_table(rows: list[list[object]]) -> str:
    return markdown(
        pd.DataFrame(rows, columns=["solver", *HEADER]).astype({"arena_without_fusion_bytes": "Int64"})
    )


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    flags.add_common(ap, models=DEFAULT_MODELS, cat_fusion=None)
    ap.add_argument(
        "--partial", action="store_true", help="allow PARTIAL fusion (clone the unplaceable inputs)"
    )
    ap.add_argument("--relax-alignment", action="store_true", help="inputs may sit at element-size offsets")
    ap.add_argument("--check", action="store_true", help="run in executorch.runtime and compare with eager")
    ap.add_argument("--cats", action="store_true", help="list every cat's decision")
    args = ap.parse_args(argv)
    models, solvers = flags.models_of(args), flags.solvers_of(args)
    rows = []
    with flags.library_warnings_silenced():
        work = [(m, s) for m in models for s in solvers]
        for name, solver in flags.progress(work, len(work), "catfusion_report", args.quiet):
            found = reports(name, solver, args.time_limit, args.partial, args.relax_alignment, args.check)
            for method, (report, stock) in found.items():
                rows.append([solver, *row(name, method, report, stock)])
                if args.cats:
                    print(f"{name}/{method} ({solver}):\n{report.summary()}\n")
    print(format_table(rows))
    if args.check:
        print("outputs match eager PyTorch for every model")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
