"""Benchmark: Cadence's memory planners vs memplan under Cadence memory configs of 2-3 memories.

    python -m memplan.experiments.bench.cadence [--models a,b] [--time-limit 2] [--out docs/x.md]

Every program goes through Cadence's own flow (`backends/cadence/aot`: edge
lowering, Cadence's graph passes, `CadenceMemoryPlanning` with its placement
constraints: cat inputs inside the output, slice/select outputs inside the
input). The planning algorithm is `MemplanCadenceAlgo` (planner.algorithms.cadence),
which also runs Cadence's `PositionBasedGreedyWithHierarchy` and
`GreedyWithHeuristic` on the same specs and constraints, so all three plan
exactly the same problem; the table shows each one's plan.

Memory configs are set per program from L, the most bytes live at once in
one memory (memory 1 is the fastest, Cadence's hierarchy):

- `2 mem`: memory 1 = L/4 (alignment 16), memory 2 = 4 L (alignment 64);
- `2 mem tight`: memory 1 = L/2, memory 2 = 0.75 L (1.25 L together; alignment 16);
- `3 mem`: L/8, L/4 and 4 L (alignments 16, 32, 64).

Columns: bytes per memory ("-": the algorithm found no plan that fits),
fast share = share of all traffic (bytes x accesses: how many times the program's instructions name each tensor, read off the graph)
in memory 1. PBGH and GWH are Cadence's two algorithms; "memplan" is the
plan `MemplanCadenceAlgo` writes, the best candidate by traffic cost, then
bytes ("written" names it: memplan's bank solver, a Cadence algorithm, or
one of them with its memory choice packed again by memplan's solver).
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import logging
import time
from collections.abc import Callable, Sequence
from typing import Any

import pandas as pd
import torch

from memplan.bank_placement import traffic
from memplan.experiments import flags
from memplan.experiments import markdown as tables
from memplan.planner.algorithms.cadence.importable import cadence_passes_importable

# Cadence's test programs (backends/cadence/aot/tests/test_memory_passes.py) and zoo models that
# lower through Cadence's passes in seconds (llama_nokv lowers too, in about 100 s of Cadence passes).
CADENCE_PROGRAMS = ("peak_memory_mlp", "multilayer_perceptron", "add_chain", "cat_slice")
ZOO_MODELS = (
    "ds_cnn",
    "resnet8",
    "mobilenet_v1_025",
    "deep_autoencoder",
    "cat_seed",
    "unet",
    "densenet_block",
    "lstm",
)
CONFIGS: dict[str, tuple[tuple[float, ...], tuple[int, ...]]] = {
    "2 mem": ((0.25, 4.0), (16, 64)),
    "2 mem tight": ((0.5, 0.75), (16, 16)),
    "3 mem": ((0.125, 0.25, 4.0), (16, 32, 64)),
}
ALGORITHMS = ("position_greedy", "greedy_heuristic", "memplan")


def cadence_program(name: str) -> tuple[torch.nn.Module, tuple[Any, ...]]:
    """Models of Cadence's memory-pass tests, as they build them."""
    from executorch.exir.tests.models import MultiLayerPerceptron

    if name == "peak_memory_mlp":  # test_calculate_peak_memory_pass, model 1
        model = torch.nn.Sequential(torch.nn.Linear(16, 10), torch.nn.ReLU(), torch.nn.Linear(10, 20))
        return model, (torch.ones(3, 16),)
    if name == "multilayer_perceptron":  # test_calculate_peak_memory_pass, model 2
        return MultiLayerPerceptron(10, 16, 16, 16, 8), (torch.ones(11, 10),)
    if name == "add_chain":  # test_start_alignment_constraints
        return _AddChain(), (torch.randn(4, 17), torch.randn(4, 17))
    if name == "cat_slice":  # the cat/slice no-op pattern of test_optimize_cat_with_slice
        return _CatSlice(), (torch.randn(4, 6), torch.randn(3, 6))
    raise KeyError(f"unknown Cadence test program {name!r}; choose from {list(CADENCE_PROGRAMS)}")


class _AddChain(torch.nn.Module):
    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        add_0 = x + y
        add_1 = x + add_0
        add_2 = add_0 + add_1
        return add_1 + add_2


class _CatSlice(torch.nn.Module):
    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        joined = torch.cat([x + 1, y * 2], dim=0)
        return joined[1:5] * 3 + joined[0]


def program(name: str) -> tuple[torch.nn.Module, tuple[Any, ...]]:
    if name in CADENCE_PROGRAMS:
        return cadence_program(name)
    from memplan.experiments import zoo

    model = zoo.get(name)
    if len(model.methods) != 1:
        raise KeyError(f"{name} has {len(model.methods)} methods; Cadence plans one")
    ((module, inputs),) = model.methods.values()
    return module.eval(), inputs


def cadence_lowering(module: torch.nn.Module, inputs: tuple[Any, ...]) -> Callable[[Any], Any]:
    """Lower once through Cadence's passes; the result plans a copy with any `MemoryConfig`."""
    from executorch.backends.cadence.aot import compiler
    from executorch.backends.cadence.aot.memory_planning import CadenceMemoryPlanning
    from executorch.backends.cadence.aot.pass_utils import CompileMode
    from executorch.backends.cadence.aot.passes import apply_exir_ops_passes
    from executorch.exir import ExecutorchBackendConfig
    from executorch.exir.passes.sym_shape_eval_pass import ConstraintBasedSymShapeEvalPass

    from memplan.planner.algorithms.cadence.algo import MemplanCadenceAlgo
    from memplan.planner.algorithms.cadence.importable import preserve_ops_kept

    ep = torch.export.export(module, inputs, strict=False)
    with preserve_ops_kept():  # one lowering per program; ExecuTorch's verifier grows the list otherwise
        cadence = apply_exir_ops_passes(CompileMode.DEFAULT, compiler._lower_ep_to_edge(ep))

    def plan(algo: MemplanCadenceAlgo) -> None:
        planning = CadenceMemoryPlanning(algo.memory_config, CompileMode.DEFAULT, 0)
        planning.algo = algo
        with preserve_ops_kept():
            lowered = copy.deepcopy(cadence)
            lowered.to_executorch(
                ExecutorchBackendConfig(
                    memory_planning_pass=planning,
                    emit_stacktrace=False,
                    to_out_var_pass=compiler.ToOutVarPass(),
                    extract_delegate_segments=False,
                    sym_shape_eval_pass=ConstraintBasedSymShapeEvalPass(),
                )
            )

    return plan


@dataclasses.dataclass
class Row:
    program: str
    buffers: int
    live_peak: int
    config: str
    sizes: list[int]
    plans: dict[str, tuple[list[int], float] | None]  # algorithm -> (bytes per memory, fast share) or no fit
    chosen: str
    seconds: float

    def cells(self) -> list[str]:
        out = [
            self.program,
            str(self.buffers),
            f"{self.live_peak:,}",
            self.config,
            "/".join(map(str, self.sizes)),
        ]
        for name in ALGORITHMS:
            found = self.plans.get(name)
            out.append("-" if found is None else "/".join(map(str, found[0])))
        for name in ALGORITHMS:
            found = self.plans.get(name)
            out.append("-" if found is None else f"{found[1]:.1%}")
        return [*out, self.chosen, f"{self.seconds:.1f}"]


HEADER = [
    "program",
    "buffers",
    "L bytes",
    "config",
    "memory sizes",
    "bytes PBGH",
    "bytes GWH",
    "bytes memplan",
    "fast share PBGH",
    "GWH",
    "memplan",
    "written",
    "seconds",
]


def rows(names: Sequence[str], time_limit_s: float) -> list[Row]:
    from executorch.backends.cadence.aot.utils import MemoryConfig

    from memplan.peak_bound import lower_bound
    from memplan.planner.algorithms.cadence.algo import MemplanCadenceAlgo

    table = []
    for name in names:
        plan = cadence_lowering(*program(name))
        probe = MemplanCadenceAlgo(MemoryConfig([1 << 40]), time_limit_s=time_limit_s, baselines=())
        plan(probe)
        bound = lower_bound(probe.results[-1].cadence.problem)
        for label, (fractions, alignments) in CONFIGS.items():
            sizes = [max(64, int(bound * f)) for f in fractions]
            algo = MemplanCadenceAlgo(MemoryConfig(sizes, list(alignments)), time_limit_s=time_limit_s)
            began = time.perf_counter()
            try:
                plan(algo)
                chosen = algo.results[-1].chosen
            except Exception as e:  # noqa: BLE001 - a program no algorithm fits is a row, not a crash
                chosen = f"none fits ({type(e).__name__})"
            row = Row(
                name, len(probe.results[-1].cadence.problem.buffers), bound, label, sizes, {}, chosen, 0.0
            )
            row.seconds = time.perf_counter() - began
            row.plans = _plans(algo)
            table.append(row)
            print(" | ".join(row.cells()), flush=True)
    return table


def _plans(algo: Any) -> dict[str, tuple[list[int], float] | None]:
    """Per algorithm of the last planning call: bytes per memory and fast share, None if it found no fit."""
    candidates = {c.source: c for c in algo.attempts[-1]}
    problem = algo.results[-1].cadence.problem if algo.results else None
    out: dict[str, tuple[list[int], float] | None] = {}
    for name in ALGORITHMS:
        found = candidates.get(name)
        plan = found.plan if found is not None and name != "memplan" else None
        if name == "memplan" and algo.results:
            plan = algo.results[-1].plan  # what MemplanCadenceAlgo writes
        if plan is None or problem is None:
            out[name] = None
            continue
        moved = traffic(problem, plan.pools)
        share = moved.get(problem.banks[0].pool, 0) / max(1, sum(moved.values()))
        out[name] = ([plan.arena_sizes.get(b.pool, 0) for b in problem.banks], share)
    return out


def markdown(table: Sequence[Row]) -> str:
    """The rows as one Markdown table (cells already formatted: bytes per memory, shares, '-')."""
    return tables.markdown(pd.DataFrame([row.cells() for row in table], columns=HEADER))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    flags.add_models(parser, default=[*CADENCE_PROGRAMS, *ZOO_MODELS])
    flags.add_time_limit(
        parser,
        default=2.0,
        why="each program is planned 3 times per memory config, beside Cadence's own flow",
    )
    parser.add_argument("--out", help="also write the markdown table here")
    args = parser.parse_args(argv)
    logging.disable(logging.WARNING)  # Cadence's flow logs every op and memory table
    cadence_passes_importable()
    table = rows(flags.models_of(args), args.time_limit)
    text = markdown(table)
    print()
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
