"""Benchmark: ExecuTorch's shared-objects planners (Vulkan's) vs memplan's translation of them.

    python -m memplan.experiments.bench.shared_objects [--models a,b] [--check]

For each zoo model, lowered end to end with state in place off (so both
planners see the same graph):

- one arena: the program's arena bytes with ExecuTorch's
  `MemoryPlanningPass(MemoryPlanningAlgorithmSuite([greedy(allow_overlapping_allocations=False)]))`,
  and with `PlannerPass` given the same suite (memplan's shared_objects solver,
  ExecuTorch's plan kept when it is not beaten); the lower bound is the most
  bytes live at once (no plan of any form is smaller); "proven": memplan's
  arena is proven least among shared-objects plans (at that bound, or by CP-SAT);
- two banks: `BankedGreedy(map, allow_overlapping_allocations=False)` with a
  fast `sram` of half the one-arena stock arena and a 16 MiB `dram`: bytes per
  bank (sram+dram) in the program, and the share of all traffic (bytes x
  accesses of every tensor) in the fast bank. ExecuTorch's share is read from
  its plan of memplan's problem by memplan's byte-exact replica of
  BankedGreedy (solvers.banked.banked_greedy).

`--check` also runs every planned program in executorch.runtime against eager.
"""

from __future__ import annotations

import argparse
import functools
from collections.abc import Sequence

from memplan.experiments import flags
from memplan.experiments.markdown import StreamedTable

MODELS = (
    "ds_cnn",
    "resnet8",
    "mobilenet_v1_025",
    "deep_autoencoder",
    "cat_seed",
    "unet",
    "densenet_block",
    "lstm",
    "ds_cnn_xnnpack",
)
ROOMY = 16 * 1024 * 1024
HEADER = [
    "model",
    "tensors",
    "LB bytes",
    "ET greedy(no overlap)",
    "memplan",
    "saving",
    "proven",
    "sram",
    "ET banked sram+dram",
    "memplan sram+dram",
    "ET fast share",
    "memplan fast share",
]


def _arenas(program) -> list[int]:
    return list(program.executorch_program.execution_plan[0].non_const_buffer_sizes)


def _proven(problem, arena: int) -> bool:
    """True if memplan's solver proves `arena` least among shared-objects plans of `problem` (the pass
    keeps the algorithm's own plan on a tie, which then carries no proof of its own)."""
    from memplan import solvers

    own = solvers.solve(problem, "shared_objects")
    return own.proven_optimal and own.arena_size == arena


def row(name: str, check: bool) -> list[object]:
    from executorch.exir.banked_memory_planning import Bank, BankedGreedy, TargetMemoryMap
    from executorch.exir.memory_planning import MemoryPlanningAlgorithmSuite, greedy
    from executorch.exir.passes import MemoryPlanningPass

    from memplan import PlannerPass, solvers
    from memplan.bank_placement import traffic
    from memplan.experiments import zoo
    from memplan.experiments.zoo import runtime
    from memplan.peak_bound import lower_bound

    model = zoo.get(name)
    no_overlap = functools.partial(greedy, allow_overlapping_allocations=False)
    stock = runtime.lower(
        model, memory_planning_pass=MemoryPlanningPass(MemoryPlanningAlgorithmSuite([no_overlap]))
    )
    mine = PlannerPass(MemoryPlanningAlgorithmSuite([no_overlap]), state_in_place=False)
    planned = runtime.lower(model, memory_planning_pass=mine)
    result = mine.results["forward"]
    stock_bytes, my_bytes = sum(_arenas(stock)), sum(_arenas(planned))

    sram = max(16, stock_bytes // 2 // 16 * 16)
    memory_map = TargetMemoryMap([Bank("sram", sram, 1), Bank("dram", ROOMY, 2)])
    banked = BankedGreedy(memory_map, allow_overlapping_allocations=False)
    stock_banked = runtime.lower(
        model, memory_planning_pass=MemoryPlanningPass(MemoryPlanningAlgorithmSuite([banked]))
    )
    mine_banked = PlannerPass(MemoryPlanningAlgorithmSuite([banked]), state_in_place=False)
    planned_banked = runtime.lower(model, memory_planning_pass=mine_banked)
    banked_result = mine_banked.results["forward"]
    problem = banked_result.problem
    theirs = solvers.solve(problem, "banked_greedy")

    def share(pools) -> str:
        moved = traffic(problem, pools)
        return f"{moved.get(1, 0) / max(1, sum(moved.values())):.1%}"

    if check:
        for program in (planned, planned_banked):
            runtime.check_outputs(model, program.buffer)
    stock_sizes, my_sizes = _arenas(stock_banked), _arenas(planned_banked)
    return [
        name,
        len(result.problem.buffers),
        lower_bound(result.problem),
        stock_bytes,
        my_bytes,
        (stock_bytes - my_bytes) / max(1, stock_bytes),
        _proven(result.problem, result.plan.arena_size),
        sram,
        f"{stock_sizes[1]}+{stock_sizes[2]}",
        f"{my_sizes[1]}+{my_sizes[2]}",
        share(theirs.pools),
        share(banked_result.plan.pools),
    ]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    flags.add_models(parser, MODELS)
    parser.add_argument("--check", action="store_true", help="run every planned program against eager")
    args = parser.parse_args(argv)
    table = StreamedTable(HEADER)
    for name in flags.models_of(args):
        table.row(row(name, args.check))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
