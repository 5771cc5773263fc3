"""Print what cat fusion does to zoo models: a table per model, one row per method.

    python -m memplan.experiments.catfusion_report                    # cat_seed, unet, densenet_block
    python -m memplan.experiments.catfusion_report unet --solver cpsat --partial --check --cats

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

from memplan.experiments import runtime, zoo
from memplan.planner.et.cat.decisions import CatStatus
from memplan.planner.et.cat.report import CatReport
from memplan.planner.et.pass_ import PlannerPass

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
    model = zoo.get(model_name)
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


def row(model: str, method: str, report: CatReport, stock: int) -> list[str]:
    refused = ", ".join(
        f"{r.value}={n}" for r, n in sorted(report.refusals().items(), key=lambda kv: kv[0].value)
    )
    return [
        model,
        method,
        str(len(report.decisions)),
        str(report.count(CatStatus.FUSED)),
        str(report.count(CatStatus.ALIASED)),
        str(report.count(CatStatus.PARTIAL)),
        f"{report.count(CatStatus.REFUSED)}" + (f" ({refused})" if refused else ""),
        str(report.copy_bytes_removed),
        str(report.arena_with),
        "-" if report.arena_without is None else str(report.arena_without),
        str(report.lower_bound_with),
        str(report.lower_bound_without),
        str(stock),
    ]


HEADER = [
    "model",
    "method",
    "cats",
    "fused",
    "aliased",
    "partial",
    "refused (reasons)",
    "copy B removed",
    "arena with",
    "arena without",
    "LB with",
    "LB without",
    "stock ET",
]


def format_table(rows: list[list[str]]) -> str:
    widths = [max(len(r[i]) for r in [HEADER, *rows]) for i in range(len(HEADER))]

    def line(cells: list[str]) -> str:  # names left, numbers right
        return "  ".join(c.rjust(w) if i >= 2 else c.ljust(w) for i, (c, w) in enumerate(zip(cells, widths)))

    lines = [line(r) for r in [HEADER, *rows]]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("models", nargs="*", default=list(DEFAULT_MODELS), help="zoo model names")
    ap.add_argument("--solver", default="bestfit", help="memplan solver (default: bestfit)")
    ap.add_argument("--time-limit", type=float, default=5.0, help="seconds per solve for exact solvers")
    ap.add_argument(
        "--partial", action="store_true", help="allow PARTIAL fusion (clone the unplaceable inputs)"
    )
    ap.add_argument("--relax-alignment", action="store_true", help="inputs may sit at element-size offsets")
    ap.add_argument("--check", action="store_true", help="run in executorch.runtime and compare with eager")
    ap.add_argument("--cats", action="store_true", help="list every cat's decision")
    args = ap.parse_args(argv)
    rows = []
    for name in args.models:
        found = reports(name, args.solver, args.time_limit, args.partial, args.relax_alignment, args.check)
        for method, (report, stock) in found.items():
            rows.append(row(name, method, report, stock))
            if args.cats:
                print(f"{name}/{method}:\n{report.summary()}\n")
    print(format_table(rows))
    if args.check:
        print("outputs match eager PyTorch for every model")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
