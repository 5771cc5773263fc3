"""Heuristic solvers on layered problems of growing size: arena, bound, time.

    python -m memplan.experiments.bench.heuristics [--sizes 1000,10000,100000] [--solvers greedy,bestfit]
        [--seed 0] [--each-ordering]

Prints a Markdown table. `seconds` is wall time inside the solver, `cpu s`
its process CPU time (the steadier one on a shared machine); each plan is
validated outside both. `--each-ordering` adds a row per best-fit ordering
run alone. Timings are for reading, not for asserting.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence
from typing import Any

from memplan.experiments import flags
from memplan.experiments.markdown import StreamedTable
from memplan.generate import layered_problem
from memplan.peak_bound import lower_bound
from memplan.solvers import entry
from memplan.solvers.heuristics.bestfit import ORDERINGS
from memplan.validate import check_plan

COLUMNS = ("buffers", "solver", "arena", "LB", "arena/LB", "seconds", "cpu s")


def runs(solvers: Sequence[str], each_ordering: bool) -> list[tuple[str, str, dict[str, Any]]]:
    """(row label, solver, options) for every run of one problem."""
    out: list[tuple[str, str, dict[str, Any]]] = [(name, name, {}) for name in solvers]
    if each_ordering and "bestfit" in solvers:
        out += [(f"bestfit[{o}]", "bestfit", {"orderings": [o]}) for o in ORDERINGS]
    return out


def bench(sizes: Sequence[int], solvers: Sequence[str], seed: int, each_ordering: bool) -> None:
    """One table row per (size, run), printed as it is done."""
    table = StreamedTable(COLUMNS)
    for n in sizes:
        problem = layered_problem(n, seed)
        bound = lower_bound(problem)
        for label, name, options in runs(solvers, each_ordering):
            spec = entry(name)
            solve, params = spec.load(), spec.make_params(options)  # imported before the clock starts
            cpu = time.process_time()
            plan = solve(problem, params)
            cpu = time.process_time() - cpu
            check_plan(problem, plan)
            table.row(
                [
                    n,
                    label,
                    plan.arena_size,
                    bound,
                    f"{plan.arena_size / bound:.4f}",
                    f"{plan.seconds:.2f}",
                    f"{cpu:.2f}",
                ]
            )


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    flags.add_list(parser, "--sizes", (1_000, 10_000, 100_000), "size", "layered problem sizes", int)
    flags.add_solvers(parser, ("greedy", "bestfit"))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--each-ordering", action="store_true", help="also run each bestfit ordering alone")
    args = parser.parse_args(argv)
    bench(args.sizes, args.solvers, args.seed, args.each_ordering)


if __name__ == "__main__":
    main()
