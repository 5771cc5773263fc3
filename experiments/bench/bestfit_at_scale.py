"""Best-fit at scale: this checkout against a baseline checkout, interleaved in one run.

    python -m memplan.experiments.bench.bestfit_at_scale --baseline OLD/.venv/bin/python
        [--sizes 10000,100000] [--repeats 3] [--seed 0]

Each measurement is a fresh Python process that builds
`memplan.generate.layered_problem(n, seed)` and times one call, either
`solvers.solve(problem, "bestfit")` (what users call: the solver, then the
independent validator) or `solvers.heuristics.bestfit.solve_bestfit` alone. The two
checkouts take turns, repeat by repeat, so both see the same machine load;
CPU time (`time.process_time`) is printed next to wall time because on a
shared machine wall time mostly measures the neighbours. The last column
says whether the plan's offsets are the baseline's, buffer for buffer.

A baseline is any checkout with its own environment, e.g. the commit before
the change:

    git worktree add --detach /tmp/memplan-base <commit>
    python3 -m venv --system-site-packages /tmp/memplan-base/.venv
    /tmp/memplan-base/.venv/bin/pip install -q --no-deps -e /tmp/memplan-base

The worker uses only what every memplan since the layered generator has
(`layered_problem`, `solve`, `solve_bestfit`), so old commits can be measured.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from collections.abc import Sequence
from typing import Any

from memplan.experiments import flags
from memplan.experiments.markdown import StreamedTable, shorten

WORKER = """
import hashlib, json, sys, time
from memplan.generate import layered_problem
from memplan.peak_bound import lower_bound
from memplan.solvers import solve
from memplan.solvers.heuristics.bestfit import solve_bestfit
n, seed, call = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
problem = layered_problem(n, seed)
cpu, wall = time.process_time(), time.perf_counter()
plan = solve(problem, "bestfit") if call == "solve" else solve_bestfit(problem)
cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
digest = hashlib.sha1(json.dumps(sorted(plan.offsets.items())).encode()).hexdigest()
print(json.dumps(dict(cpu=cpu, wall=wall, arena=plan.arena_size, bound=lower_bound(problem),
                      status=plan.status, digest=digest)))
"""

CALLS = ("solve", "solve_bestfit")


def measure(python: str, n: int, seed: int, call: str) -> dict[str, Any]:
    """One worker run in the environment of `python`."""
    done = subprocess.run(
        [python, "-c", WORKER, str(n), str(seed), call], capture_output=True, text=True, check=False
    )
    if done.returncode:
        raise SystemExit(f"{python} failed on n={n} ({call}):\n{done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def span(values: Sequence[float]) -> str:
    """min-max of the repeats (one value if they round alike)."""
    low, high = f"{min(values):.2f}", f"{max(values):.2f}"
    return low if low == high else f"{low}-{high}"


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", required=True, help="python of the baseline checkout's environment")
    flags.add_list(parser, "--sizes", (10_000, 100_000), "size", "layered problem sizes (buffers)", int)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    trees = {"this": sys.executable, "baseline": args.baseline}
    print(f"load average at start: {', '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print()
    columns = ["buffers", "tree", "solve() CPU s", "solve() wall s", "solve_bestfit CPU s"]
    table = StreamedTable(columns + ["arena / LB", "ordering", "same offsets as baseline"])
    for n in args.sizes:
        runs: dict[str, dict[str, list[dict[str, Any]]]] = {t: {c: [] for c in CALLS} for t in trees}
        for _ in range(args.repeats):
            for call in CALLS:
                for tree, python in trees.items():
                    runs[tree][call].append(measure(python, n, args.seed, call))
        base = runs["baseline"]["solve"][0]["digest"]
        for tree in trees:
            solved, alone = runs[tree]["solve"], runs[tree]["solve_bestfit"]
            first = solved[0]
            same = all(r["digest"] == base for r in solved + alone)
            table.row(
                [
                    n,
                    tree,
                    span([r["cpu"] for r in solved]),
                    span([r["wall"] for r in solved]),
                    span([r["cpu"] for r in alone]),
                    f"{first['arena'] / first['bound']:.4f}",
                    shorten(first["status"], 40),
                    same,
                ]
            )
    print()
    print(f"load average at end: {', '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
