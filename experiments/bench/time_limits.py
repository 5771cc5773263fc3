"""Wall time against the time limit at large sizes: does each solver stop when told?

    python -m memplan.experiments.bench.time_limits [--sizes 100000,1000000]
        [--solvers bestfit,skyline,cpsat] [--time-limit 30] [--seed 0]

Each row solves one layered problem through `solvers.solve` (what `memplan
bench-csv` runs): `wall s` is the whole call, units, bounds, heuristics, model,
search and validation of the plan included, so `over` (wall less the limit) is
the overrun a caller sees; `overran in` is the stage `solve` reports took the
most of it (`Plan.over_limit_stages`: work a valid, validated plan needed after
the limit, e.g. validation or best-fit's fallback plan). Issue 31, item 14: at 1,000,000 buffers with a 30 s
limit cpsat took 99.8 s and skyline 100.6 s. Timings are wall clock on whatever
machine runs this; on a shared machine read them as rough.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence

from memplan.experiments import flags
from memplan.experiments.markdown import StreamedTable, shorten
from memplan.generate import layered_problem
from memplan.plan import Plan
from memplan.solvers import solve

COLUMNS = ("buffers", "solver", "limit s", "wall s", "over s", "arena", "outcome", "overran in", "status")


def bench(sizes: Sequence[int], solvers: Sequence[str], time_limit_s: float, seed: int) -> None:
    """One row per (size, solver), printed as it is done."""
    table = StreamedTable(COLUMNS)
    for n in sizes:
        problem = layered_problem(n, seed)
        for name in solvers:
            began = time.perf_counter()
            plan = solve(problem, name, time_limit_s=time_limit_s)
            wall = time.perf_counter() - began
            table.row(
                [
                    n,
                    name,
                    f"{time_limit_s:g}",
                    f"{wall:.1f}",
                    f"{wall - time_limit_s:+.1f}",
                    plan.arena_size,
                    plan.outcome.value,
                    overran_in(plan),
                    shorten(plan.status, 60),
                ]
            )


def overran_in(plan: Plan) -> str:
    """The stage that ran longest past the limit, with its seconds ("-" when the call kept to it)."""
    if not plan.overran_in:
        return "-"
    return f"{plan.overran_in} {plan.over_limit_stages[plan.overran_in]:.2f} s"


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    flags.add_list(parser, "--sizes", (100_000, 1_000_000), "size", "layered problem sizes", int)
    flags.add_solvers(parser, ("bestfit", "skyline", "cpsat"))
    flags.add_time_limit(parser, 30.0, "the limit of the run reported in issue 31, item 14")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    bench(args.sizes, args.solvers, args.time_limit, args.seed)


if __name__ == "__main__":
    main()
