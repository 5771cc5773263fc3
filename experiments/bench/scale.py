"""Exact solving at scale: MiniMalloc's challenging benchmarks, an ExecuTorch Llama, generated problems.

    python -m memplan.experiments.bench.scale [--sections minimalloc,minimise,llama,layered]
        [--instances A,B] [--configs full,no-skyline-search] [--time-limit 10]
        [--minimise-time-limits 10,30,60] [--minimise-configs full,bisection,skyline-presolve]
        [--llama PROBLEM.json] [--layered 10000,100000] [--layered-time-limit 60]
        [--minimalloc-binary PATH] [--save-better docs/minimalloc_solutions]

Sections (Markdown tables, printed row by row):

- minimalloc: each instance as MiniMalloc poses it, a decision problem at
  capacity 1,048,576, per solver configuration (the ablation: each technique
  switched off in turn); `x paper` is our seconds over MiniMalloc's published time.
  With `--minimalloc-binary`, MiniMalloc's own C++ solver runs each instance
  right after memplan's first configuration (same capacity and time limit, in
  a subprocess, interleaved so both see the same machine load), and the table
  adds its seconds (its own "Elapsed time", the solve without file I/O) and
  memplan's over them. Build it outside this repository:
  `git clone https://github.com/google/minimalloc && cd minimalloc && git submodule update
  --init && cmake -S . -B build -DCMAKE_BUILD_TYPE=Release && cmake --build build
  --target minimalloc` (C++20, abseil); the binary is `build/minimalloc`.
- minimise: the same instances minimised (no capacity), against the best known
  peak, at each of `--minimise-time-limits` (a proven run ends the instance), for
  the full configuration, plain bisection in place of the probe ladder, and
  CP-SAT's presolve before each skyline search.
- llama: ExecuTorch's Llama (16 layers, dim 512, prefill 128 tokens, KV cache),
  extracted by the planner pass, or read from `--llama` (memplan JSON, e.g.
  from `memplan export-problem`).
- layered: memplan.generate.layered_problem at the given sizes.

Lower bounds on the same instances are `python -m memplan.experiments.bench.minimalloc_bounds`;
`to_executorch` with memplan's pass on LLM shapes is `python -m memplan.experiments.bench.llm`.

Timings are wall clock on whatever machine runs this; on a shared machine read
them as rough. Every plan is validated by solvers.solve.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import tempfile
import time
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from memplan.errors import InfeasibleError
from memplan.experiments import flags
from memplan.experiments.bench.minimalloc import CAPACITY, CHALLENGING, MINIMALLOC_DIR, minimalloc_problem
from memplan.experiments.markdown import StreamedTable, shorten
from memplan.peak_bound import lower_bound
from memplan.problem import Problem
from memplan.solvers import solve

# instance -> (best known peak, MiniMalloc's time in its paper in seconds)
KNOWN: dict[str, tuple[int, float | None]] = {
    name: (k.best_known, k.paper_seconds) for name, k in CHALLENGING.items()
}

# configuration -> (solver, options): everything on, then one technique off at a time.
CONFIGS: dict[str, tuple[str, dict[str, Any]]] = {
    "full": ("cpsat", {}),
    "no-skyline-search": ("cpsat", {"search": "default"}),
    "no-skyline-heuristic": ("cpsat", {"skyline_heuristic": False}),
    "start-order-only": ("cpsat", {"skyline_orders": ("start",)}),
    "no-decompose": ("cpsat", {"decompose": False}),
    "no-cumulative": ("cpsat", {"cumulative": False}),
    "no-symmetry": ("cpsat", {"symmetry": False}),
    "no-warm-start": ("cpsat", {"warm_start": False}),
    "bisection": ("cpsat", {"ladder": (("between", 0.5),)}),
    "skyline-presolve": ("cpsat", {"skyline_presolve": True}),
    "no-skyline-presolve": ("cpsat", {"skyline_presolve": False}),
    "no-canonical": ("cpsat", {"canonical": ()}),
    "canonical-in-portfolio": ("cpsat", {"canonical_in_portfolio": True}),
    "no-canonical-descent": ("cpsat", {"canonical_descent": 0}),
    "timeout-stops-lower": ("cpsat", {"timeout_stops_lower": True}),
}

LLAMA: dict[str, Any] = dict(n_layers=16, dim=512, n_heads=8, seq_len=128, prefill_tokens=128, kv_cache=True)

SECTIONS = ("minimalloc", "minimise", "llama", "layered")
MOVED_SECTIONS = (
    "; the sections bounds and pass are their own scripts now:"
    " python -m memplan.experiments.bench.minimalloc_bounds, python -m memplan.experiments.bench.llm"
)
# The MiniMalloc tables of docs/exact_solver.md are measured at 10 s per solve: a default run repeats them.
TIME_LIMIT_S = 10.0


def run(problem: Problem, config: str, time_limit_s: float, capacity: int | None = None) -> dict[str, Any]:
    """One solve: arena (None if no plan within the capacity), proven, seconds, status."""
    solver, options = CONFIGS[config]
    began = time.perf_counter()
    try:
        plan = solve(problem, solver, time_limit_s=time_limit_s, capacity=capacity, **options)
    except InfeasibleError as err:
        return {"arena": None, "proven": False, "seconds": time.perf_counter() - began, "status": str(err)}
    return {
        "arena": plan.arena_size,
        "proven": plan.proven_optimal,
        "seconds": time.perf_counter() - began,
        "status": plan.status,
        "plan": plan,
    }


def run_minimalloc(binary: str, csv: Path, capacity: int, limit: float) -> dict[str, Any]:
    """MiniMalloc's C++ solver on one file: its own solve time and whether it found a plan."""
    with tempfile.TemporaryDirectory() as tmp:
        command = [binary, f"--capacity={capacity}", f"--input={csv}", f"--output={Path(tmp) / 'out.csv'}"]
        command.append(f"--timeout={limit:g}s")
        began = time.perf_counter()
        done = subprocess.run(command, capture_output=True, text=True, timeout=limit + 60)
        wall = time.perf_counter() - began
    log = done.stdout + done.stderr
    elapsed = re.search(r"Elapsed time ([0-9.]+)s", log)
    return {
        "seconds": float(elapsed.group(1)) if elapsed else wall,
        "fits": done.returncode == 0,
        "status": "ok" if done.returncode == 0 else shorten(log.strip().splitlines()[-1], 90),
    }


def bench_minimalloc(
    instances: Sequence[str],
    configs: Sequence[str],
    limit: float,
    directory: Path,
    binary: str | None = None,
) -> None:
    header = ["instance", "config", "buffers", "lower bound", "capacity", "arena", "fits", "seconds"]
    if binary:
        header += ["MiniMalloc s", "MiniMalloc fits", "x MiniMalloc"]
    print()  # sections follow each other: a blank line before each table
    out = StreamedTable(header + ["x paper", "status"])
    for name in instances:
        problem = minimalloc_problem(name, directory)
        for i, config in enumerate(configs):
            r = run(problem, config, limit, capacity=CAPACITY)
            fits = r["arena"] is not None
            cells = [
                name,
                config,
                len(problem.buffers),
                f"{lower_bound(problem):,}",
                f"{CAPACITY:,}",
                f"{r['arena']:,}" if fits else "none",
                "yes" if fits else "no",
                f"{r['seconds']:.2f}",
            ]
            if binary and i == 0:
                theirs = run_minimalloc(binary, directory / f"{name}.{CAPACITY}.csv", CAPACITY, limit)
                ratio = r["seconds"] / theirs["seconds"] if theirs["seconds"] > 0 else float("inf")
                cells += [f"{theirs['seconds']:.2f}", "yes" if theirs["fits"] else "no", f"{ratio:.2f}"]
            elif binary:
                cells += ["", "", ""]
            cells += [f"{r['seconds'] / KNOWN[name][1]:.1f}" if fits else "-", shorten(r["status"], 90)]
            out.row(cells)


def save_if_better(problem: Problem, result: dict[str, Any], best_known: int, folder: Path | None) -> str:
    """Write a plan below the best known peak as a MiniMalloc CSV solution; return its path ('' if none)."""
    if folder is None or result["arena"] is None or result["arena"] >= best_known:
        return ""
    from memplan.io import write_minimalloc_csv

    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{problem.name.split('.')[0]}.{result['arena']}.csv"
    write_minimalloc_csv(problem, path, result["plan"])
    return str(path)


def bench_minimise(
    instances: Sequence[str],
    configs: Sequence[str],
    limits: Sequence[float],
    directory: Path,
    save_better: Path | None = None,
) -> None:
    print()  # sections follow each other: a blank line before each table
    out = StreamedTable(
        [
            "instance",
            "config",
            "limit s",
            "buffers",
            "lower bound",
            "best known",
            "arena",
            "reached best known",
            "proven",
            "seconds",
            "status",
        ]
    )
    for name in instances:
        problem = minimalloc_problem(name, directory)
        best = KNOWN[name][0]
        for config in configs:
            for limit in limits:
                r = run(problem, config, limit)
                saved = save_if_better(problem, r, best, save_better)
                if saved:
                    r["status"] = f"{shorten(r['status'], 60)}; saved {saved}"
                out.row(
                    [
                        name,
                        config,
                        f"{limit:g}",
                        len(problem.buffers),
                        f"{lower_bound(problem):,}",
                        f"{best:,}",
                        f"{r['arena']:,}",
                        "yes" if r["arena"] <= best else f"no (+{(r['arena'] - best) / best:.2%})",
                        "yes" if r["proven"] else "no",
                        f"{r['seconds']:.2f}",
                        shorten(r["status"], 90),
                    ]
                )
                if r["proven"]:
                    break  # a longer limit finds nothing better


def llama_problems(path: str | None) -> dict[str, Problem]:
    """Per method, the Llama problem: read from a memplan JSON file, or extracted from the zoo model."""
    if path:
        from memplan.io import load_json

        problem = load_json(path)
        if not isinstance(problem, Problem):
            raise SystemExit(f"{path} holds a plan, not a problem")
        return {Path(path).stem: problem}
    from memplan.experiments.zoo.lowering import lower_planned
    from memplan.experiments.zoo.models.llama import llama

    lowered = lower_planned(llama(**LLAMA), "bestfit", 16, True, TIME_LIMIT_S)
    return {method: result.problem for method, result in lowered.planner_pass.results.items()}


def bench_llama(configs: Sequence[str], limit: float, path: str | None) -> None:
    problems = llama_problems(path)
    print()  # sections follow each other: a blank line before each table
    out = StreamedTable(
        [
            "problem",
            "config",
            "buffers",
            "pools",
            "lower bound",
            "bestfit",
            "arena",
            "proven",
            "seconds",
            "status",
        ]
    )
    for name, problem in problems.items():
        heuristic = solve(problem, "bestfit").arena_size
        for config in configs:
            r = run(problem, config, limit)
            out.row(
                [
                    name,
                    config,
                    len(problem.buffers),
                    len(problem.pools),
                    f"{lower_bound(problem):,}",
                    f"{heuristic:,}",
                    f"{r['arena']:,}",
                    "yes" if r["proven"] else "no",
                    f"{r['seconds']:.2f}",
                    shorten(r["status"], 90),
                ]
            )


def bench_layered(sizes: Sequence[int], configs: Sequence[str], limit: float) -> None:
    from memplan.generate import layered_problem

    print()  # sections follow each other: a blank line before each table
    out = StreamedTable(
        [
            "buffers",
            "lower bound",
            "bestfit / LB",
            "bestfit s",
            "config",
            "arena / LB",
            "proven",
            "seconds",
            "status",
        ]
    )
    for n in sizes:
        problem = layered_problem(n, seed=0)
        bound = lower_bound(problem)
        began = time.perf_counter()
        heuristic = solve(problem, "bestfit").arena_size
        heuristic_seconds = time.perf_counter() - began
        for config in configs:
            r = run(problem, config, limit)
            out.row(
                [
                    f"{n:,}",
                    f"{bound:,}",
                    f"{heuristic / bound:.4f}",
                    f"{heuristic_seconds:.2f}",
                    config,
                    f"{r['arena'] / bound:.4f}",
                    "yes" if r["proven"] else "no",
                    f"{r['seconds']:.1f}",
                    shorten(r["status"], 90),
                ]
            )


def main(argv: Sequence[str] | None = None) -> None:
    warnings.simplefilter("ignore")  # torch and ExecuTorch warn on every export, as the CLI silences them
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    flags.add_list(
        parser, "--sections", SECTIONS, "section", "tables to print", choices=SECTIONS, hint=MOVED_SECTIONS
    )
    flags.add_list(parser, "--instances", KNOWN, "instance", "MiniMalloc instances", choices=tuple(KNOWN))
    flags.add_list(parser, "--configs", CONFIGS, "config", "solver configurations", choices=tuple(CONFIGS))
    flags.add_time_limit(
        parser, TIME_LIMIT_S, why="10 s, the limit of docs/exact_solver.md's MiniMalloc tables, repeats them"
    )
    flags.add_list(
        parser,
        "--minimise-time-limits",
        (10, 30, 60),
        "time limit",
        "seconds per solve, minimise section",
        float,
    )
    flags.add_list(
        parser,
        "--minimise-configs",
        ("full", "bisection", "skyline-presolve"),
        "config",
        "configs of the minimise section",
        choices=tuple(CONFIGS),
    )
    parser.add_argument("--minimalloc-dir", default=str(MINIMALLOC_DIR))
    parser.add_argument(
        "--llama", help="memplan JSON of the Llama problem (default: extract it, needs torch)"
    )
    flags.add_list(parser, "--layered", (10_000, 100_000), "size", "generated problem sizes", int)
    parser.add_argument(
        "--layered-time-limit",
        type=float,
        default=60.0,
        help="seconds per solve in the layered section (default: %(default)s; 100,000 buffers need"
        " 25-30 s for the heuristics alone, docs/exact_solver.md)",
    )
    parser.add_argument(
        "--save-better",
        help="folder: minimised plans below the best known peak are written there as MiniMalloc CSV solutions",
    )
    parser.add_argument(
        "--minimalloc-binary",
        help="MiniMalloc's C++ solver, run next to memplan in the minimalloc section (see the docstring to build it)",
    )
    args = parser.parse_args(argv)

    directory = Path(args.minimalloc_dir)
    if "minimalloc" in args.sections:
        if args.minimalloc_binary and not Path(args.minimalloc_binary).is_file():
            parser.error(f"--minimalloc-binary {args.minimalloc_binary}: no such file")
        bench_minimalloc(args.instances, args.configs, args.time_limit, directory, args.minimalloc_binary)
    if "minimise" in args.sections:
        save = Path(args.save_better) if args.save_better else None
        bench_minimise(args.instances, args.minimise_configs, args.minimise_time_limits, directory, save)
    if "llama" in args.sections:
        bench_llama(["full", "no-decompose", "no-skyline-heuristic"], args.time_limit, args.llama)
    if "layered" in args.sections:
        bench_layered(args.layered, ["full"], args.layered_time_limit)


if __name__ == "__main__":
    main()
