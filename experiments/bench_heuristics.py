"""Heuristic solvers on layered problems of growing size: arena, bound, time.

    python -m experiments.bench_heuristics [--sizes 1000 10000 100000] [--seed 0]

Prints a Markdown table. `seconds` is wall time inside the solver, `cpu s`
its process CPU time (the useful one on a shared machine); validation of
every plan happens outside both. Timings are for reading, not for asserting.
"""

from __future__ import annotations

import argparse
import time
from typing import Sequence

from planner.generate import layered_problem
from planner.problem import check_plan, lower_bound
from solvers import available, get_solver

HEADER = "| buffers | solver | arena | LB | arena/LB | seconds | cpu s |\n| ---: | --- | ---: | ---: | ---: | ---: | ---: |"


def bench(sizes: Sequence[int], solvers: Sequence[str], seed: int, options: dict[str, dict]) -> list[str]:
    """One table row per (size, solver), printed as it is done; every plan is validated first."""
    rows = []
    for n in sizes:
        problem = layered_problem(n, seed)
        bound = lower_bound(problem)
        for name in solvers:
            solve = get_solver(name)  # imported before the clock starts
            cpu = time.process_time()
            plan = solve(problem, **options.get(name, {}))
            cpu = time.process_time() - cpu
            check_plan(problem, plan)
            rows.append(
                f"| {n:,} | {name} | {plan.arena_size:,} | {bound:,} | {plan.arena_size / bound:.4f}"
                f" | {plan.seconds:.2f} | {cpu:.2f} |"
            )
            print(rows[-1], flush=True)
    return rows


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1_000, 10_000, 100_000])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--solvers", nargs="+", default=["greedy", "bestfit"], choices=available())
    parser.add_argument(
        "--orderings", nargs="+", default=None, help="bestfit orderings (default: all of solvers.bestfit.ORDERINGS)"
    )
    args = parser.parse_args(argv)
    options = {"bestfit": {"orderings": args.orderings}} if args.orderings else {}
    print(HEADER)
    bench(args.sizes, args.solvers, args.seed, options)


if __name__ == "__main__":
    main()
