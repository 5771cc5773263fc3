"""Lower bounds on MiniMalloc's instances: the bytes live at once against window bounds (solvers.cpsat.window_bounds).

    python -m memplan.experiments.bench.minimalloc_bounds [--instances D,J] [--bound-seconds 30]
        [--sizes 40,80] [--seeds 4] [--time-limit 6]

For each instance: the live-bytes bound, the window bound proven in
`--bound-seconds`, the best plan known (the README's best known peak, or a
smaller plan saved in `docs/minimalloc_solutions`, checked by the validator),
and the proven gap (best - bound) / best before and after. Instances whose best
plan already meets the live-bytes bound are optimal: their windows are not
searched (no bound can pass an optimum).

A second table: generated problems with alignments and fixed offsets
(`memplan.generate.random_problem`), where padding and pinned buffers make
windows infeasible at the peak; CP-SAT with the same time limit without and
with `bound_seconds` of half the limit (the window bound takes up to that much
of it).
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence
from pathlib import Path

from memplan.experiments import flags
from memplan.experiments.bench.minimalloc import CHALLENGING, MINIMALLOC_DIR, minimalloc_problem
from memplan.experiments.markdown import StreamedTable
from memplan.generate import random_problem
from memplan.io import read_minimalloc_csv
from memplan.peak_bound import lower_bound
from memplan.plan import Plan, arena_sizes_of
from memplan.problem import Problem
from memplan.solvers import solve
from memplan.solvers.cpsat.window_bounds import window_lower_bounds
from memplan.solvers.exact.arena_bounds import pool_bounds
from memplan.solvers.units import units_of
from memplan.validate import validate

SOLUTIONS_DIR = Path(__file__).resolve().parents[2] / "docs" / "minimalloc_solutions"
# docs/exact_solver.md's generated table is measured at 6 s (3 s of it for the window bound).
TIME_LIMIT_S = 6.0


def best_plan_known(name: str, problem: Problem, solutions: Path = SOLUTIONS_DIR) -> tuple[int, str]:
    """The smallest peak known for instance `name`, and where it comes from.

    A saved solution (`<name>.<peak>.csv`, the instance's buffers with an `offset` column) counts
    only if the validator passes it on `problem`; its peak is recomputed, not read from the name."""
    best, source = CHALLENGING[name].best_known, "README"
    for path in sorted(solutions.glob(f"{name}.*.csv")):
        solved = read_minimalloc_csv(path)
        offsets = {b.id: b.offset for b in solved.buffers if b.offset is not None}
        if set(offsets) != {b.id for b in problem.buffers}:
            continue
        arenas = arena_sizes_of(problem, offsets)
        if validate(problem, Plan(offsets=offsets, arena_sizes=arenas, solver="saved")) == []:
            peak = sum(arenas.values())
            if peak < best:
                best, source = peak, path.name
    return best, source


def gap(best: int, bound: int) -> str:
    return f"{(best - bound) / best:.2%}"


def bench_bounds(instances: Sequence[str], seconds: float, directory: Path) -> None:
    out = StreamedTable(
        [
            "instance",
            "buffers",
            "live-bytes LB",
            "window LB",
            "best plan known",
            "gap before",
            "gap after",
            "probes (proven infeasible)",
            "window proving it",
            "widest window planned at the bound",
            "seconds",
        ]
    )
    for name in instances:
        if name not in CHALLENGING:
            continue
        problem = minimalloc_problem(name, directory)
        live = lower_bound(problem)
        best, source = best_plan_known(name, problem)
        began = time.perf_counter()
        if best == live:
            bound, probes, window, widest, note = live, "not searched (a plan meets the LB)", "", "", ""
        else:
            found = window_lower_bounds(problem, seconds)
            bound = sum(found.bounds.values())
            probes = f"{found.probes} ({found.proofs})"
            window = ", ".join(f"[{lo:,}, {hi:,})" for lo, hi in found.windows.values()) or "none"
            widest = ", ".join(f"[{lo:,}, {hi:,})" for lo, hi in found.widest_fit.values())
            note = "" if found.complete else " (wider windows unknown)"
        assert bound <= best, f"{name}: bound {bound} above a valid plan of {best} bytes"
        out.row(
            [
                name,
                len(problem.buffers),
                f"{live:,}",
                f"{bound:,}",
                f"{best:,}" + ("" if source == "README" else f" ({source})"),
                gap(best, live),
                gap(best, bound),
                probes,
                window,
                widest,
                f"{time.perf_counter() - began:.1f}{note}",
            ]
        )


def bench_generated(sizes: Sequence[int], seeds: int, limit: float, bound_seconds: float) -> None:
    """CP-SAT on `random_problem(n, seed, alignment=(1, 16, 64), with_fixed=True)`, without and with
    the window bound, same time limit: the lower bound each plan reports, its arena, whether proven,
    wall seconds."""
    out = StreamedTable(
        [
            "buffers",
            "seed",
            "live-bytes LB",
            "aligned LB",
            "cpsat LB",
            "arena",
            "proven",
            "s",
            f"with bound_seconds={bound_seconds:g}: LB",
            "arena",
            "proven",
            "s",
        ]
    )
    for n in sizes:
        for seed in range(seeds):
            problem = random_problem(n, seed, alignment=(1, 16, 64), with_fixed=True)
            began = time.perf_counter()
            plain = solve(problem, "cpsat", time_limit_s=limit)
            plain_s = time.perf_counter() - began
            bounded = solve(problem, "cpsat", time_limit_s=limit, bound_seconds=bound_seconds)
            bounded_s = time.perf_counter() - began - plain_s
            out.row(
                [
                    n,
                    seed,
                    f"{lower_bound(problem):,}",
                    f"{sum(pool_bounds(problem, units_of(problem)).values()):,}",
                    f"{plain.lower_bound:,}",
                    f"{plain.arena_size:,}",
                    "yes" if plain.proven_optimal else "no",
                    f"{plain_s:.1f}",
                    f"{bounded.lower_bound:,}",
                    f"{bounded.arena_size:,}",
                    "yes" if bounded.proven_optimal else "no",
                    f"{bounded_s:.1f}",
                ]
            )


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    flags.add_list(
        parser, "--instances", CHALLENGING, "instance", "MiniMalloc instances", choices=tuple(CHALLENGING)
    )
    parser.add_argument(
        "--bound-seconds",
        type=float,
        default=30.0,
        help="window-bound budget per instance (default: %(default)s)",
    )
    parser.add_argument("--minimalloc-dir", default=str(MINIMALLOC_DIR))
    flags.add_list(parser, "--sizes", (40, 80), "size", "buffers of the generated problems", int)
    parser.add_argument(
        "--seeds", type=int, default=4, help="generated problems per size (default: %(default)s)"
    )
    flags.add_time_limit(
        parser, TIME_LIMIT_S, why="6 s, the limit of docs/exact_solver.md's generated table, repeats it"
    )
    args = parser.parse_args(argv)
    bench_bounds(args.instances, args.bound_seconds, Path(args.minimalloc_dir))
    print()
    bench_generated(args.sizes, args.seeds, args.time_limit, args.time_limit / 2)


if __name__ == "__main__":
    main()
