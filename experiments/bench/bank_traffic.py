"""Benchmark: bank traffic of the emitted program, ExecuTorch's BankedGreedy vs PlannerPass.

    python -m memplan.experiments.bench.bank_traffic [--models a,b] [--time-limit 5]

Each zoo model is lowered three times over a two-bank map (a fast `sram` of
25 / 45 / 50 / 75 % of the single-arena lower bound, a 16 MiB `dram`): by
ExecuTorch's own `MemoryPlanningPass` with `BankedGreedy`, by `PlannerPass`
with its defaults (cat fusion and state in place on), and by `PlannerPass`
without cat fusion (the same instructions as BankedGreedy's program, save
removed write-backs). Traffic is counted on the emitted program
(memplan.planner.memory.instruction_traffic): the bytes of every kernel and delegate call's
tensor arguments, by bank. Columns: fast and slow bytes and the fast share
for each; "slow <=" says whether memplan's slow-bank bytes are no more than
BankedGreedy's (what the pass guarantees), "fast >=" whether, with the same
instructions, its fast-bank bytes are no fewer.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from memplan.experiments import flags
from memplan.experiments.markdown import StreamedTable

MODELS = ("lstm", "unet", "densenet_block", "mobilenet_v1_025", "ds_cnn", "cat_seed", "llama_decode")
FRACTIONS = (0.25, 0.45, 0.5, 0.75)
ROOMY = 16 << 20

HEADER = [
    "model",
    "sram",
    "BG fast/slow",
    "BG share",
    "memplan fast/slow",
    "share",
    "no cat fusion fast/slow",
    "share ",
    "slow <=",
    "fast >=",
]


def emitted(program) -> tuple[int, int]:
    """(fast, slow) bytes of the single method's emitted traffic."""
    from memplan.planner.memory.instruction_traffic import emitted_traffic

    moved: dict[int, int] = {}
    for per_method in emitted_traffic(program.executorch_program).values():
        for pool, n in per_method.items():
            moved[pool] = moved.get(pool, 0) + n
    return moved.get(1, 0), moved.get(2, 0)


def share(fast_slow: tuple[int, int] | None) -> str:
    if fast_slow is None:
        return "-"
    fast, slow = fast_slow
    return f"{fast / max(1, fast + slow):.1%}"


def pair(fast_slow: tuple[int, int] | None) -> str:
    return "no fit" if fast_slow is None else f"{fast_slow[0]:,}/{fast_slow[1]:,}"


def rows(models: Sequence[str], time_limit_s: float) -> None:
    from executorch.exir.banked_memory_planning import Bank, BankedGreedy, TargetMemoryMap
    from executorch.exir.memory_planning import MemoryPlanningAlgorithmSuite
    from executorch.exir.passes import MemoryPlanningPass

    from memplan import PlannerPass
    from memplan.experiments import zoo
    from memplan.experiments.zoo import runtime
    from memplan.peak_bound import lower_bound

    table = StreamedTable(HEADER)
    for name in models:
        model = zoo.get(name)
        probe = PlannerPass(time_limit_s=time_limit_s, cat_fusion=False)
        runtime.lower(model, memory_planning_pass=probe)
        bound = max(lower_bound(r.problem) for r in probe.results.values())
        for fraction in FRACTIONS:
            memory_map = TargetMemoryMap([Bank("sram", int(bound * fraction), 1), Bank("dram", ROOMY, 2)])
            suite = MemoryPlanningAlgorithmSuite(algo_list=[BankedGreedy(memory_map)])
            theirs = _traffic(model, MemoryPlanningPass(suite))
            mine = _traffic(model, PlannerPass(time_limit_s=time_limit_s, memory_map=memory_map))
            plain = _traffic(
                model, PlannerPass(time_limit_s=time_limit_s, memory_map=memory_map, cat_fusion=False)
            )
            table.row(
                [
                    name,
                    f"{fraction:.0%}",
                    pair(theirs),
                    share(theirs),
                    pair(mine),
                    share(mine),
                    pair(plain),
                    share(plain),
                    _holds(mine, theirs, lambda m, t: m[1] <= t[1]),
                    _holds(plain, theirs, lambda m, t: m[0] >= t[0]),
                ]
            )


def _holds(mine, theirs, test) -> str:
    """ "yes"/"NO" for `test(mine, theirs)`; "-" when BankedGreedy has no fit (memplan's fits: "yes")."""
    if theirs is None:
        return "-" if mine is None else "yes"
    return "NO" if mine is None or not test(mine, theirs) else "yes"


def _traffic(model, planner) -> tuple[int, int] | None:
    """The lowered program's (fast, slow) bytes, or None when the planner finds no fit."""
    from executorch.exir.banked_memory_planning import BankPlacementError

    from memplan.errors import InfeasibleError
    from memplan.experiments.zoo import runtime

    try:
        return emitted(runtime.lower(model, memory_planning_pass=planner))
    except (BankPlacementError, InfeasibleError):
        return None


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    flags.add_models(parser, MODELS)
    flags.add_time_limit(parser)
    args = parser.parse_args(argv)
    rows(flags.models_of(args), args.time_limit)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
