"""ExecuTorch's own memory planning against memplan's, for every zoo model.

    python -m memplan.experiments.compare_stock [--models a b] [--solvers greedy bestfit cpsat]
                                        [--time-limit 10] [--check] [--cat-fusion]

Per model: the arena bytes of the program planned by the stock
`MemoryPlanningPass`, by `PlannerPass` with each solver, the lower bound of the
extracted problems, and whether CP-SAT proved its plans optimal. Program bytes
are what the runtime allocates: all host-only methods of a program share one
set of arenas, each sized to the largest method's, so it is the sum over
arenas (mem_id >= 1) of the largest method's size, XNNPACK padding included.
Cat fusion is off unless asked for, so every planner places the same tensors.
`--check` also runs every memplan program and compares it with eager PyTorch.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from memplan.experiments import runtime, zoo
from memplan.planner.et.pass_ import MethodResult, PlannerPass
from memplan.planner.problem import lower_bounds

SOLVERS = ("greedy", "bestfit", "cpsat")


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
    model = zoo.get(name)
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
    head = ["model", "stock"] + list(solvers) + ["lower bound", "cpsat optimal", "best vs stock"]
    lines = [head]
    for r in rows:
        best = min(r.memplan.values()) if r.memplan else r.stock
        lines.append(
            [r.model, str(r.stock)]
            + [str(r.memplan[s]) + ("*" if r.fallbacks.get(s) else "") for s in solvers]
            + [
                str(r.lower_bound),
                "-" if r.cpsat_optimal is None else ("yes" if r.cpsat_optimal else "no"),
                f"{100.0 * (best - r.stock) / r.stock:+.1f}%" if r.stock else "-",
            ]
        )
    widths = [max(len(line[i]) for line in lines) for i in range(len(head))]
    out = []
    for i, line in enumerate(lines):
        out.append(
            " | ".join(c.ljust(w) if j == 0 else c.rjust(w) for j, (c, w) in enumerate(zip(line, widths)))
        )
        if i == 0:
            out.append("-+-".join("-" * w for w in widths))
    return "\n".join(out)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", nargs="*", default=None, help="zoo models (default: all)")
    ap.add_argument("--solvers", nargs="*", default=list(SOLVERS), choices=SOLVERS + ("milp",))
    ap.add_argument("--time-limit", type=float, default=10.0, help="seconds per method for cpsat/milp")
    ap.add_argument("--check", action="store_true", help="run every memplan program against eager")
    ap.add_argument("--cat-fusion", action="store_true", help="let PlannerPass fuse cats")
    args = ap.parse_args(argv)
    rows = []
    for name in args.models or zoo.names():
        row = compare(name, args.solvers, args.time_limit, args.check, args.cat_fusion)
        rows.append(row)
        timing = ", ".join(f"{s} {t:.1f}s" for s, t in row.seconds.items())
        print(f"{name}: lowered ({timing})", file=sys.stderr)
    print(format_table(rows, args.solvers))
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
