"""`memplan replan` on stock-built programs: bytes before and after, and the runtime check, per zoo model.

    python -m memplan.experiments.bench.replan_stock [--models a,b] [--solvers cpsat] [--time-limit 5]

Each model is lowered once with ExecuTorch's stock `MemoryPlanningPass`; the `.pte` bytes are then
re-planned from the file alone (no Python source) and both programs run in `executorch.runtime` on
the same random inputs: outputs must be bit-identical. A method replan cannot prove is kept, and the
table says why.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence

import pandas as pd

from memplan.experiments import flags
from memplan.experiments.markdown import markdown
from memplan.experiments.zoo import programs, runtime
from memplan.experiments.zoo.pte_check import CheckError, check_same_outputs
from memplan.planner.pte.replan import replan


def bench(name: str, solver: str, time_limit_s: float) -> list[dict]:
    stock = runtime.lower(programs.load(name)).buffer
    began = time.perf_counter()
    result = replan(stock, solver, time_limit_s)
    seconds = time.perf_counter() - began
    try:
        check_same_outputs(stock, result.data)
        identical: bool | None = True
    except CheckError:
        identical = False
    rows = []
    for m in result.methods:
        rows.append(
            {
                "model": name if m.method == "forward" else f"{name}/{m.method}",
                "solver": solver,
                "stock_bytes": sum(m.before),
                "replanned_bytes": sum(m.after),
                "saving": (m.saved_bytes / sum(m.before)) if sum(m.before) else None,
                "proven_optimal": None if m.plan is None else bool(m.plan.proven_optimal),
                "replan_seconds": seconds,
                "outputs_identical": identical,
                "kept_because": m.kept_because[:90],
            }
        )
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    flags.add_common(ap, cat_fusion=None, solvers=("cpsat",))
    args = ap.parse_args(argv)
    models, solvers = flags.models_of(args), flags.solvers_of(args)
    rows: list[dict] = []
    with flags.library_warnings_silenced():
        work = [(m, s) for m in models for s in solvers]
        for name, solver in flags.progress(work, len(work), "replan", args.quiet):
            rows += bench(name, solver, args.time_limit)
    df = pd.DataFrame(rows).astype({"proven_optimal": "boolean", "outputs_identical": "boolean"})
    print(markdown(df))
    return 0 if bool(df["outputs_identical"].all()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
