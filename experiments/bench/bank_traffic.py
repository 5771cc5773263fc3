"""Benchmark: bank traffic of the emitted program, ExecuTorch's BankedGreedy vs PlannerPass.

    python -m memplan.experiments.bench.bank_traffic [--models a,b] [--time-limit 5]
        [--maps 0.4:4,0.45:1] [--draws 6 --seed 0]

Each zoo model is lowered three times over a two-bank map (a fast `sram` of
25 / 45 / 50 / 75 % of the single-arena lower bound, a 16 MiB `dram`; or the
`--maps` given as sram:dram fractions of the bound; or `--draws` pairs drawn at
random, `random_maps`): by
ExecuTorch's own `MemoryPlanningPass` with `BankedGreedy`, by `PlannerPass`
with its defaults (cat fusion and state in place on), and by `PlannerPass`
without cat fusion (the same instructions as BankedGreedy's program, save
removed write-backs). Traffic is counted on the emitted program
(memplan.planner.memory.instruction_traffic): the bytes of every kernel and delegate call's
tensor arguments, by bank. Columns: fast and slow bytes and the fast share
for each; "slow <=" says whether memplan's slow-bank bytes are no more than
BankedGreedy's and "share >=" whether its fast share is no smaller (both what
the pass guarantees); the last line counts the cases where either fails.
"""

from __future__ import annotations

import argparse
import random
from collections.abc import Sequence

from memplan.experiments import flags
from memplan.experiments.markdown import StreamedTable

MODELS = (
    "lstm",
    "unet",
    "densenet_block",
    "mobilenet_v1_025",
    "ds_cnn",
    "cat_seed",
    "llama_decode",
    "llama_nokv",
)
FRACTIONS = (0.25, 0.45, 0.5, 0.75)
ROOMY = 16 << 20
Map = tuple[float, float | None]  # sram and dram as fractions of the bound (dram None: ROOMY bytes)


def random_maps(seed: int, count: int) -> list[Map]:
    """`count` bank pairs drawn at random: sram 5-90 % of the bound, dram 100 or 400 %."""
    rng = random.Random(seed)
    return [(round(rng.uniform(0.05, 0.9), 3), rng.choice((1.0, 4.0))) for _ in range(count)]


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
    "share >=",
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


def rows(models: Sequence[str], time_limit_s: float, maps: Sequence[Map]) -> int:
    """Print one row per model and map; return how many cases memplan is below BankedGreedy in."""
    from executorch.exir.banked_memory_planning import Bank, BankedGreedy, TargetMemoryMap
    from executorch.exir.memory_planning import MemoryPlanningAlgorithmSuite
    from executorch.exir.passes import MemoryPlanningPass

    from memplan import PlannerPass
    from memplan.experiments import zoo
    from memplan.experiments.zoo import runtime
    from memplan.peak_bound import lower_bound

    table = StreamedTable(HEADER)
    below = 0
    for name in models:
        model = zoo.get(name)
        probe = PlannerPass(time_limit_s=time_limit_s, cat_fusion=False)
        runtime.lower(model, memory_planning_pass=probe)
        bound = max(lower_bound(r.problem) for r in probe.results.values())
        for fast, slow in maps:
            dram = ROOMY if slow is None else int(bound * slow)
            memory_map = TargetMemoryMap([Bank("sram", int(bound * fast), 1), Bank("dram", dram, 2)])
            suite = MemoryPlanningAlgorithmSuite(algo_list=[BankedGreedy(memory_map)])
            theirs = _traffic(model, MemoryPlanningPass(suite))
            mine = _traffic(model, PlannerPass(time_limit_s=time_limit_s, memory_map=memory_map))
            plain = _traffic(
                model, PlannerPass(time_limit_s=time_limit_s, memory_map=memory_map, cat_fusion=False)
            )
            verdicts = [
                _holds(mine, theirs, lambda m, t: m[1] <= t[1]),
                _holds(mine, theirs, lambda m, t: m[0] * sum(t) >= t[0] * sum(m)),
            ]
            below += "NO" in verdicts
            table.row(
                [
                    name,
                    f"{fast:.0%}" if slow is None else f"{fast:.1%} / {slow:.0%}",
                    pair(theirs),
                    share(theirs),
                    pair(mine),
                    share(mine),
                    pair(plain),
                    share(plain),
                    *verdicts,
                ]
            )
    return below


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
    parser.add_argument("--maps", default="", help="sram:dram fractions of the bound, e.g. 0.4:4,0.45:1")
    parser.add_argument("--draws", type=int, default=0, help="bank pairs drawn at random per model")
    parser.add_argument("--seed", type=int, default=0, help="the draws' seed")
    args = parser.parse_args(argv)
    maps: list[Map] = [
        (float(f), float(d)) for f, _, d in (m.partition(":") for m in args.maps.split(",") if m)
    ]
    maps += random_maps(args.seed, args.draws)
    below = rows(flags.models_of(args), args.time_limit, maps or [(f, None) for f in FRACTIONS])
    print(f"\ncases where memplan is below BankedGreedy (more slow bytes or a smaller fast share): {below}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
