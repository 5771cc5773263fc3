"""Exact solvers side by side on small problems: arena, proof and seconds per solver.

    python -m memplan.experiments.bench.exact [--time-limit 5]

Prints a Markdown table. Timings depend on machine load; read them as rough.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable, Sequence

from memplan.experiments import flags
from memplan.experiments.bench.minimalloc import MINIMALLOC_DIR
from memplan.experiments.markdown import StreamedTable
from memplan.generate import layered_problem, pigeonholes, random_problem
from memplan.io import read_minimalloc_csv
from memplan.peak_bound import lower_bound
from memplan.problem import Buffer, Problem
from memplan.solvers import solve

RUNS: dict[str, tuple[str, dict]] = {
    "cpsat": ("cpsat", {}),
    "milp/cbc": ("milp", {"backend": "cbc"}),
    "milp/highs": ("milp", {"backend": "highs"}),
    "milp/highs cold": ("milp", {"backend": "highs", "warm_start": False}),
}


def instances() -> dict[str, Callable[[], Problem]]:
    return {
        "minimalloc input.12": lambda: read_minimalloc_csv(MINIMALLOC_DIR / "input.12.csv"),
        "pigeonholes 4/2": lambda: pigeonholes(4, 2),
        "pigeonholes 8/4": lambda: pigeonholes(8, 4),
        "8 x 1 B aligned 4": lambda: Problem(tuple(Buffer(f"b{i}", 0, 2, 1, alignment=4) for i in range(8))),
        "random 12, all constraints": lambda: random_problem(
            12, seed=1, alignment=(1, 4, 16), with_groups=True, with_fixed=True, with_same_offset=True
        ),
        "random 25, 2 pools": lambda: random_problem(
            25, seed=2, alignment=(1, 16), n_pools=2, with_groups=True
        ),
        "random 40": lambda: random_problem(40, seed=3, alignment=16),
        "layered 60": lambda: layered_problem(60, seed=4),
        "layered 200": lambda: layered_problem(200, seed=1),
    }


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    flags.add_time_limit(parser)
    args = parser.parse_args(argv)
    table = StreamedTable(
        ["instance", "buffers", "lower bound", "bestfit"] + [f"{r} (arena, proven, s)" for r in RUNS]
    )
    for name, make in instances().items():
        problem = make()
        cells = [
            name,
            str(len(problem.buffers)),
            str(lower_bound(problem)),
            str(solve(problem, "bestfit").arena_size),
        ]
        for solver, options in RUNS.values():
            began = time.perf_counter()
            plan = solve(problem, solver, time_limit_s=args.time_limit, **options)
            proof = "yes" if plan.proven_optimal else "no"
            cells.append(f"{plan.arena_size}, {proof}, {time.perf_counter() - began:.2f}")
        table.row(cells)


if __name__ == "__main__":
    main()
