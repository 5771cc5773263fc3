"""Exact solving at scale: MiniMalloc's challenging benchmarks, an ExecuTorch Llama, generated problems.

    python -m memplan.experiments.bench.scale [--sections minimalloc,minimise,llama,layered,bounds,pass]
        [--instances A,B] [--configs full,no-skyline-search] [--time-limit 10]
        [--minimise-time-limits 10,30,60] [--minimise-configs full,bisection,skyline-presolve]
        [--llama PROBLEM.json] [--layered 10000,100000] [--layered-time-limit 60]
        [--minimalloc-binary PATH] [--save-better docs/minimalloc_solutions] [--bound-seconds 30]
        [--pass-args '--models smollm2-135m']

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
- layered: planner.generate.layered_problem at the given sizes.
- pass (not run by default: half an hour and up to 10 GiB): `to_executorch`
  with memplan's pass against the stock one on LLM shapes, and where the
  pass's time goes (experiments.bench_llm, given `--pass-args`).
- bounds: per instance, the live-bytes lower bound against the window bound
  (solvers.bounds_windows) proven in `--bound-seconds`, and the proven gap to
  the best plan known before and after; then CP-SAT without and with the
  window bound on generated problems with alignments and fixed offsets
  (experiments.bench_bounds).

Timings are wall clock on whatever machine runs this; on a shared machine read
them as rough. Every plan is validated by solvers.solve.
"""

from __future__ import annotations

import argparse
import re
import shlex
import subprocess
import tempfile
import time
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from memplan.bounds import lower_bound
from memplan.errors import InfeasibleError
from memplan.experiments.bench.minimalloc import CAPACITY, CHALLENGING, MINIMALLOC_DIR
from memplan.experiments.cli.tables import shorten
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


def table(header: Sequence[str]) -> None:
    print()
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header), flush=True)


def row(cells: Sequence[Any]) -> None:
    print("| " + " | ".join(str(c) for c in cells) + " |", flush=True)


def minimalloc_problem(name: str, directory: Path) -> Problem:
    from memplan.io import read_minimalloc_csv

    return read_minimalloc_csv(directory / f"{name}.{CAPACITY}.csv")


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
    table(header + ["x paper", "status"])
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
            row(cells)


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
    table(
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
                row(
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

    lowered = lower_planned(llama(**LLAMA), "bestfit", 16, True, 10.0)
    return {method: result.problem for method, result in lowered.planner_pass.results.items()}


def bench_llama(configs: Sequence[str], limit: float, path: str | None) -> None:
    problems = llama_problems(path)
    table(
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
            row(
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

    table(
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
            row(
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
    parser.add_argument("--sections", default="minimalloc,minimise,llama,layered,bounds")
    parser.add_argument("--instances", default=",".join(KNOWN), help="MiniMalloc instances (default: all)")
    parser.add_argument("--configs", default=",".join(CONFIGS), help=f"from: {', '.join(CONFIGS)}")
    parser.add_argument(
        "--time-limit", type=float, default=10.0, help="seconds per solve (default: %(default)s)"
    )
    parser.add_argument(
        "--minimise-time-limits", default="10,30,60", help="seconds per solve in the minimise section"
    )
    parser.add_argument(
        "--minimise-configs",
        default="full,bisection,skyline-presolve",
        help="configs of the minimise section",
    )
    parser.add_argument("--minimalloc-dir", default=str(MINIMALLOC_DIR))
    parser.add_argument(
        "--llama", help="memplan JSON of the Llama problem (default: extract it, needs torch)"
    )
    parser.add_argument("--layered", default="10000,100000", help="generated problem sizes")
    parser.add_argument("--layered-time-limit", type=float, default=60.0)
    parser.add_argument(
        "--save-better",
        help="folder: minimised plans below the best known peak are written there as MiniMalloc CSV solutions",
    )
    parser.add_argument(
        "--minimalloc-binary",
        help="MiniMalloc's C++ solver, run next to memplan in the minimalloc section (see the docstring to build it)",
    )
    parser.add_argument(
        "--bound-seconds", type=float, default=30.0, help="window-bound budget per instance (bounds section)"
    )
    parser.add_argument("--pass-args", default="", help="arguments of experiments.bench_llm (pass section)")
    args = parser.parse_args(argv)

    sections = [s for s in args.sections.split(",") if s]
    instances = [i for i in args.instances.split(",") if i]
    configs = [c for c in args.configs.split(",") if c]
    minimise_configs = [c for c in args.minimise_configs.split(",") if c]
    for bad, known, what in (
        (sections, ("minimalloc", "minimise", "llama", "layered", "bounds", "pass"), "section"),
        (instances, tuple(KNOWN), "instance"),
        (configs + minimise_configs, tuple(CONFIGS), "config"),
    ):
        unknown = [x for x in bad if x not in known]
        if unknown:
            parser.error(f"unknown {what} {unknown}; choose from {', '.join(known)}")
    directory = Path(args.minimalloc_dir)
    if "minimalloc" in sections:
        if args.minimalloc_binary and not Path(args.minimalloc_binary).is_file():
            parser.error(f"--minimalloc-binary {args.minimalloc_binary}: no such file")
        bench_minimalloc(instances, configs, args.time_limit, directory, args.minimalloc_binary)
    if "minimise" in sections:
        limits = [float(s) for s in args.minimise_time_limits.split(",") if s]
        save = Path(args.save_better) if args.save_better else None
        bench_minimise(instances, minimise_configs, limits, directory, save)
    if "llama" in sections:
        bench_llama(["full", "no-decompose", "no-skyline-heuristic"], args.time_limit, args.llama)
    if "layered" in sections:
        sizes = [int(s) for s in args.layered.split(",") if s]
        bench_layered(sizes, ["full"], args.layered_time_limit)
    if "bounds" in sections:
        from memplan.experiments.bench.bounds import bench_bounds, bench_generated

        bench_bounds(instances, args.bound_seconds, directory)
        bench_generated([40, 80], 4, 6.0, 3.0)
    if "pass" in sections:
        from memplan.experiments.bench import llm as bench_llm

        bench_llm.main(shlex.split(args.pass_args))


if __name__ == "__main__":
    main()
