"""Benchmark: planning across two banks, ExecuTorch's BankedGreedy vs memplan.

    python -m memplan.experiments.bench.two_banks [--models a,b] [--time-limit 10] [--figure PATH]

For each zoo model, the problem ExecuTorch hands to memory planning (no cat
fusion, so all three planners see the same tensors), with the access count of
every tensor read off the graph, over a two-bank map: a fast `sram` of 25 /
50 / 75 % of the single-arena lower bound (the most bytes live at once), and
a `dram` that is either roomy (16 MiB) or tight (what is left of the lower
bound plus 10 % of it, so the two banks hold 1.1 x the bound together).

Columns: does it fit (BankedGreedy / memplan's banked_bestfit / cpsat), the
share of all traffic (bytes x accesses) served by the fast bank, whether
cpsat proved its plan optimal (least traffic to the slow bank) or proved that
no placement fits, and seconds.
BankedGreedy is memplan's replica, equal to ExecuTorch's byte for byte
(tests/test_banked_greedy_matches_executorch.py, tests/test_pass_banks.py).
"""

from __future__ import annotations

import argparse
import dataclasses
import time
from collections.abc import Sequence

from memplan.bank_placement import traffic
from memplan.errors import InfeasibleError
from memplan.experiments import flags
from memplan.experiments.markdown import StreamedTable
from memplan.peak_bound import lower_bound
from memplan.plan import Plan
from memplan.problem import Problem

MODELS = ("llama_decode", "unet", "densenet_block", "lstm", "mobilenet_v1_025")
FRACTIONS = (0.25, 0.5, 0.75)
ROOMY = 16 * 1024 * 1024
SOLVERS = ("banked_greedy", "banked_bestfit", "cpsat")
# docs/banks.md's table: cpsat proves 19 of its 28 plans at 10 s per case, several after 4.5-7 s.
TIME_LIMIT_S = 10.0


def extracted(name: str) -> Problem:
    """The model's problem over a placeholder two-bank map (capacities are set per row)."""
    from executorch.exir.banked_memory_planning import Bank as EtBank
    from executorch.exir.banked_memory_planning import TargetMemoryMap

    from memplan import PlannerPass
    from memplan.experiments import zoo
    from memplan.experiments.zoo import runtime

    memory_map = TargetMemoryMap([EtBank("sram", ROOMY, 1), EtBank("dram", ROOMY, 2)])
    planner = PlannerPass(solver="greedy", memory_map=memory_map, cat_fusion=False)
    runtime.lower(zoo.get(name), memory_planning_pass=planner)
    return planner.results["forward"].problem


def with_capacities(problem: Problem, sram: int, dram: int) -> Problem:
    fast, slow = problem.banks
    return dataclasses.replace(
        problem, banks=(dataclasses.replace(fast, capacity=sram), dataclasses.replace(slow, capacity=dram))
    )


@dataclasses.dataclass
class Attempt:
    """One solver on one case: its plan, or None when it raised InfeasibleError (`no_fit_proven`: it
    proved that nothing fits), and its seconds."""

    plan: Plan | None
    seconds: float
    no_fit_proven: bool = False

    def fits(self) -> str:
        return "yes" if self.plan else "no"

    def share(self, problem: Problem) -> str:
        if self.plan is None:
            return "-"
        moved = traffic(problem, self.plan.pools)
        return f"{moved.get(problem.banks[0].pool, 0) / max(1, sum(moved.values())):.1%}"


def run(problem: Problem, solver: str, time_limit_s: float) -> Attempt:
    from memplan import solvers

    began = time.perf_counter()
    try:
        return Attempt(solvers.solve(problem, solver, time_limit_s=time_limit_s), time.perf_counter() - began)
    except InfeasibleError as e:
        return Attempt(None, time.perf_counter() - began, no_fit_proven=e.proven)


def rows(models: Sequence[str], time_limit_s: float) -> None:
    """One row per model, fast-bank size and slow bank, printed as it is done."""
    table = StreamedTable(HEADER)
    for name in models:
        problem = extracted(name)
        bound = lower_bound(problem)
        for fraction in FRACTIONS:
            sram = int(bound * fraction)
            for label, dram in (("16MiB", ROOMY), ("tight", int(bound * 1.1) - sram)):
                case = with_capacities(problem, sram, dram)
                greedy, heuristic, exact = (run(case, s, time_limit_s) for s in SOLVERS)
                if exact.plan is None:
                    proven = "no fit exists" if exact.no_fit_proven else "-"
                else:
                    proven = "yes" if exact.plan.proven_optimal else "no"
                table.row(
                    [
                        name,
                        len(problem.buffers),
                        bound,
                        f"{fraction:.0%}",
                        label if label == "16MiB" else f"{dram}",
                        f"{greedy.fits()}/{heuristic.fits()}/{exact.fits()}",
                        greedy.share(case),
                        heuristic.share(case),
                        exact.share(case),
                        proven,
                        f"{greedy.seconds:.2f}/{heuristic.seconds:.2f}/{exact.seconds:.1f}",
                    ]
                )


def figure(path: str, time_limit_s: float) -> None:
    """U-Net over sram = 50 % of its bound and a 16 MiB dram, planned by cpsat: Gantt and profile per bank."""
    import matplotlib

    matplotlib.use("Agg")
    from memplan.viz.banks import bank_gantt

    problem = extracted("unet")
    case = with_capacities(problem, lower_bound(problem) // 2, ROOMY)
    plan = run(case, "cpsat", time_limit_s).plan
    assert plan is not None, "a 16 MiB dram holds U-Net"
    bank_gantt(case, plan, title="U-Net, sram = 50% of the single-arena lower bound, cpsat").savefig(
        path, dpi=110
    )


HEADER = [
    "model",
    "buffers",
    "LB bytes",
    "sram",
    "dram",
    "fits BG/heur/cpsat",
    "fast share BG",
    "heur",
    "cpsat",
    "proven",
    "seconds BG/heur/cpsat",
]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    flags.add_models(parser, MODELS)
    flags.add_time_limit(
        parser, TIME_LIMIT_S, why="10 s: in docs/banks.md's table several of cpsat's proofs take 4.5-7 s"
    )
    parser.add_argument(
        "--figure", help="also draw U-Net's cpsat plan at a 50%% sram, one panel per bank, here"
    )
    args = parser.parse_args(argv)
    if args.figure:
        figure(args.figure, args.time_limit)
    rows(flags.models_of(args), args.time_limit)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
