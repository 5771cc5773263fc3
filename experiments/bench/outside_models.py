"""Programs nobody here wrote (issue 31's 11 kinds): stock, memplan, `memplan replan` and the runtime.

    python -m memplan.experiments.bench.outside_models [--models bart_like,zero_size] [--quiet]

Each model (memplan.experiments.zoo.models.outside) is lowered by `memplan.plan_model` with
`PlannerPass()`'s defaults and, from the same edge program, with ExecuTorch's own
`MemoryPlanningPass` (stock). memplan's written `.pte` is then re-planned from the file alone by
`replan` (what `memplan replan` runs), and the program runs in `executorch.runtime` over the model's
calls against eager PyTorch, or, for a quantized model, against the stock program bit for bit (as
`memplan plan --check`: int8 rounding is not eager's). One row per method; a program of several
methods also gets a `(program)` row, per arena the largest method, summed, as the runtime allocates.

`replan_bytes` is empty where replan cannot derive the method from the file (control flow), and
`note` says why; `note` also gives the padding ExecuTorch adds to each arena of a program with an
XNNPACK delegate (64 B, stock adds it too): `emitted_bound` is the bound of the tensors, without it. A row is a finding when replan finds less than memplan wrote, memplan claims "proven" above the
emitted program's own lower bound, memplan needs more than stock, or the runtime differs: the
`finding` column says which, the findings are repeated on stderr, and the exit code is 1.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any

from memplan.experiments import flags
from memplan.experiments.markdown import StreamedTable, shorten
from memplan.experiments.zoo import ZooModel, runtime
from memplan.experiments.zoo.lowering import PROGRAM_ROW
from memplan.experiments.zoo.models.outside import MODELS

COLUMNS = (
    "model",
    "method",
    "stock_bytes",
    "memplan_bytes",
    "replan_bytes",
    "saving_vs_stock",
    "proven",
    "emitted_bound",
    "runtime",
    "note",
    "finding",
)
QUANTIZED = "quantized"  # the ZooModel tag of programs checked against the stock program


def rows(name: str) -> list[dict[str, Any]]:
    """The table's rows for one model: each method, then `(program)` when there are several."""
    return model_rows(MODELS[name]())


def model_rows(model: ZooModel) -> list[dict[str, Any]]:
    from memplan.experiments.planning import plan_model
    from memplan.planner.pte.replan import replan

    planned = plan_model(model)  # PlannerPass() with its defaults, the stock pass beside it
    replanned = replan(planned.buffer)
    verdict = runtime_verdict(model, planned)
    after = {m.method: m for m in replanned.methods}
    out = []
    for summary in planned.summary.to_dict("records"):
        method = summary["method"]
        row: dict[str, Any] = {
            "model": model.name,
            "method": method,
            "stock_bytes": summary["stock_arena_bytes"],
            "memplan_bytes": summary["arena_bytes"],
            "runtime": verdict,
        }
        if method == PROGRAM_ROW:
            row["replan_bytes"] = runtime.program_arena_bytes(runtime.stock_arena_bytes(replanned.data))
        else:
            result = planned.results[method]
            derived = replanned.program.methods[method].problem is not None
            row["replan_bytes"] = sum(after[method].after) if derived else None
            row["proven"] = bool(result.plan.proven_optimal)
            row["emitted_bound"] = result.emitted_lower_bound
            row["padding"] = result.padding * sum(1 for size in result.buffer_sizes[1:] if size)
            row["note"] = _note(row, "" if derived else after[method].kept_because)
        row["saving_vs_stock"] = 1 - row["memplan_bytes"] / row["stock_bytes"]
        row["finding"] = "; ".join(findings(row))
        out.append(row)
    return out


def runtime_verdict(model: ZooModel, planned: Any) -> str:
    """'equal to eager, N calls' (or '... to the stock program' for a quantized model), else what differs."""
    from memplan.experiments.zoo.pte_check import CheckError, check_same_as_stock

    calls = len(model.calls)
    try:
        if QUANTIZED in model.tags:
            check_same_as_stock(planned.buffer, planned.stock_program.buffer, model.calls)
            return f"equal to stock, {calls} calls"
        runtime.check_outputs(model, planned.buffer)
    except (AssertionError, CheckError) as exc:
        return f"DIFFERS: {shorten(str(exc), 120)}"
    return f"equal to eager, {calls} calls"


def _note(row: dict[str, Any], replan_kept: str) -> str:
    """Why replan has no figure, and the delegate's padding the arena holds beyond its tensors."""
    notes = [f"replan: {shorten(replan_kept, 60)}"] if replan_kept else []
    if row["padding"]:
        notes.append(f"arena = tensors + {row['padding']} B XNNPACK padding")
    return "; ".join(notes)


def findings(row: dict[str, Any]) -> list[str]:
    """What in one row contradicts what memplan claims or promises."""
    found = []
    if row["replan_bytes"] is not None and row["replan_bytes"] < row["memplan_bytes"]:
        found.append(f"replan finds {row['memplan_bytes'] - row['replan_bytes']:,} B less")
    tensors = row["memplan_bytes"] - row.get("padding", 0)
    if row.get("proven") and row.get("emitted_bound") != tensors:
        found.append(
            f"proven at {tensors:,} B of tensors, but the emitted bound is {row.get('emitted_bound')}"
        )
    if row["memplan_bytes"] > row["stock_bytes"]:
        found.append("memplan above stock")
    if row["runtime"].startswith("DIFFERS"):
        found.append("runtime differs")
    return found


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    flags.add_list(ap, "--models", MODELS, "model", "comma-separated models", choices=list(MODELS))
    ap.add_argument("--quiet", action="store_true", help="no progress lines")
    args = ap.parse_args(argv)
    table = StreamedTable(COLUMNS)
    found = []
    with flags.library_warnings_silenced():
        for name in flags.progress(args.models, len(args.models), "outside models", args.quiet):
            for row in rows(name):
                table.row([row.get(c) for c in COLUMNS])
                if row["finding"]:
                    found.append(f"FINDING {row['model']}/{row['method']}: {row['finding']}")
    for line in found:
        print(line, file=sys.stderr)
    return 1 if found else 0


if __name__ == "__main__":
    raise SystemExit(main())
