"""ExecuTorch's own memory planning against memplan's, for every zoo model.

    python -m memplan.experiments.bench.compare_stock [--models a,b] [--solvers greedy,bestfit,cpsat]
                                        [--time-limit 5] [--check] [--cat-fusion on|off]

Per model: the arena bytes of the program planned by the stock
`MemoryPlanningPass`, by `PlannerPass` with each solver, the lower bound of the
extracted problems, and whether CP-SAT proved its plans optimal. Program bytes
are what the runtime allocates: all host-only methods of a program share one
set of arenas, each sized to the largest method's, so it is the sum over
arenas (mem_id >= 1) of the largest method's size, XNNPACK padding included.
Defaults as the sweep's: every registered solver, 5 s, cat fusion on (`--cat-fusion
off` makes every planner place the same tensors). The table is Markdown
(experiments.markdown); `saving` columns are positive when memplan is smaller
than stock. `--check` also runs every memplan program against eager PyTorch.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import pandas as pd

from memplan.experiments import flags
from memplan.experiments.markdown import markdown
from memplan.experiments.zoo import programs, runtime
from memplan.peak_bound import lower_bounds
from memplan.planner.pass_ import MethodResult, PlannerPass


@dataclass
class Row:
    model: str
    stock: int
    memplan: dict[str, int] = field(default_factory=dict)
    lower_bound: int = 0
    cpsat_optimal: bool | None = None
    seconds: dict[str, float] = field(default_factory=dict)
    fallbacks: dict[str, set[str]] = field(default_factory=dict)  # solver -> fallbacks whose plans were kept


def program_bytes(sizes_by_method: Mapping[str, Sequence[int]]) -> int:
    """Bytes the runtime allocates for these per-method `non_const_buffer_sizes`."""
    width = max(len(sizes) for sizes in sizes_by_method.values())
    return sum(
        max(sizes[i] if i < len(sizes) else 0 for sizes in sizes_by_method.values()) for i in range(1, width)
    )


def lower_bound_bytes(results: Mapping[str, MethodResult]) -> int:
    """A bound on `program_bytes` for any plan of these problems: per arena, the largest method's bound."""
    per_pool: dict[int, int] = {}
    for result in results.values():
        for pool, bound in lower_bounds(result.problem).items():
            per_pool[pool] = max(per_pool.get(pool, 0), bound + result.padding)
    return sum(per_pool.values())


def proven(results: Iterable[MethodResult]) -> bool:
    return all(r.plan.proven_optimal and proven(r.submodules.values()) for r in results)


def plan_solvers(results: Iterable[MethodResult]) -> set[str]:
    """Names of the solvers whose plans the pass kept (solvers.fallback may pick one)."""
    found: set[str] = set()
    for r in results:
        found |= {r.plan.solver} | plan_solvers(r.submodules.values())
    return found


def compare(name: str, solvers: Sequence[str], time_limit_s: float, check: bool, cat_fusion: bool) -> Row:
    model = programs.load(name)
    row = Row(name, program_bytes(runtime.stock_arena_bytes(runtime.lower(model))))
    for solver in solvers:
        pass_ = PlannerPass(solver=solver, time_limit_s=time_limit_s, cat_fusion=cat_fusion)
        began = time.perf_counter()
        et = runtime.lower(model, memory_planning_pass=pass_)
        row.seconds[solver] = time.perf_counter() - began
        row.memplan[solver] = program_bytes(runtime.stock_arena_bytes(et))
        row.lower_bound = lower_bound_bytes(pass_.results)
        row.fallbacks[solver] = plan_solvers(pass_.results.values()) - {solver}
        if solver == "cpsat":
            row.cpsat_optimal = proven(pass_.results.values())
        if check:
            runtime.check_outputs(model, et.buffer)
    return row


def format_table(rows: Sequence[Row], solvers: Sequence[str]) -> str:
    """Markdown: stock bytes, memplan bytes per solver (`*`: a fallback plan was kept), the bound, the best saving."""
    records = []
    for r in rows:
        best = min(r.memplan.values()) if r.memplan else r.stock
        record: dict[str, object] = {"model": r.model, "stock_bytes": r.stock}
        for s in solvers:
            record[f"{s}_bytes"] = f"{r.memplan[s]:,}" + ("*" if r.fallbacks.get(s) else "")
        record["lower_bound_bytes"] = r.lower_bound
        record["cpsat_optimal"] = r.cpsat_optimal
        record["saving_vs_stock"] = (1 - best / r.stock) if r.stock else None
        records.append(record)
    return markdown(pd.DataFrame(records).astype({"cpsat_optimal": "boolean"}))


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    flags.add_common(ap)
    ap.add_argument("--check", action="store_true", help="run every memplan program against eager")
    args = ap.parse_args(argv)
    solvers, models = flags.solvers_of(args), flags.models_of(args)
    fusion = flags.switch_of(args.cat_fusion)
    rows = []
    with flags.library_warnings_silenced():
        for name in flags.progress(models, len(models), "compare_stock", args.quiet):
            row = compare(name, solvers, args.time_limit, args.check, fusion)
            rows.append(row)
            timing = ", ".join(f"{s} {t:.1f}s" for s, t in row.seconds.items())
            print(f"{name}: lowered ({timing})", file=sys.stderr)
    print(format_table(rows, solvers))
    kept = [f"{r.model} {s}: {', '.join(sorted(f))}" for r in rows for s, f in r.fallbacks.items() if f]
    if kept:
        print("* some methods use a fallback plan (solvers.fallback): " + "; ".join(kept))
    worse = [
        f"{r.model} ({s}: {r.memplan[s]} > stock {r.stock})"
        for r in rows
        for s in ("bestfit", "cpsat")
        if s in r.memplan and r.memplan[s] > r.stock
    ]
    if worse:
        print("above stock: " + "; ".join(worse))
    return 1 if worse else 0


if __name__ == "__main__":
    raise SystemExit(main())
