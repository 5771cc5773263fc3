"""Spatial tiling on ImageNet-style CNNs: the arena before and after, the extra work, the run time.

    python -m memplan.experiments.bench.tiled_cnns                      # every model of zoo.models.vision
    python -m memplan.experiments.bench.tiled_cnns --models mobilenet_v2_035_144 --max-extra-macs 0.1

One row per model (float32, random weights, portable kernels): ExecuTorch's stock planner on the
untiled program, memplan on the untiled program (with the levers the tiled one gets, elementwise in
place included, and whether that plan is proven optimal), memplan on
the tiled program (and whether each is proven optimal), the reduction (untiled / tiled memplan arena),
the extra MACs counted on the two graphs, the run-time ratio (median of `--runs` executions in executorch.runtime, tiled / untiled),
and whether the tiled program's outputs equal eager PyTorch's and the untiled program's within the
model's tolerance (atol = rtol = 1e-4), then the tiled region with the search's live-bytes bounds
and the seconds the search and re-export took. `--xnnpack` also lowers the tiled
model with XNNPACK and checks its outputs (its arena holds only what the delegate exchanges).
`--int8 NAMES` adds int8 rows (experiments/bench/tiled_int8.py: built as an MCU user's script builds
them, tiled outputs bit-identical to the stock program's) with Vela 5.2's cascading figure, less its
input image, where the issue cites one; every row has the untiled graph's MACs.
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import time
from collections.abc import Sequence

import pandas as pd
import torch

from memplan.experiments import flags
from memplan.experiments.bench.tiled_int8 import int8_row
from memplan.experiments.markdown import markdown
from memplan.experiments.zoo import runtime
from memplan.experiments.zoo.lowering import library_warnings_silenced, lower_planned, stock_arenas
from memplan.experiments.zoo.models.vision import VISION, vision
from memplan.experiments.zoo.tiled import tiled_model
from memplan.planner.pass_ import PlannerPass
from memplan.planner.tiling import TilingOptions
from memplan.solvers import DEFAULT_ALIGNMENT, DEFAULT_SOLVER, DEFAULT_TIME_LIMIT_S


def seconds_per_run(pte: bytes, inputs: tuple, runs: int) -> float:
    """Median seconds of one `forward` in executorch.runtime (loaded once, one warm-up call)."""
    from executorch.runtime import Runtime

    program = Runtime.get().load_program(pte)  # alive while its method runs (else a segfault)
    method = program.load_method("forward")
    flat = runtime.flatten_inputs(inputs)
    method.execute(flat)
    times = []
    for _ in range(runs):
        began = time.perf_counter()
        method.execute(flat)
        times.append(time.perf_counter() - began)
    return statistics.median(times)


def _equal(model, got, want) -> bool:
    try:
        runtime.compare_outputs(model, got, want)
    except AssertionError:
        return False
    return True


def row(
    name: str, options: TilingOptions, solver: str, time_limit_s: float, runs: int, xnnpack: bool
) -> dict:
    """One model's row: the model is tiled once, then lowered (portable, and with XNNPACK if asked)."""
    model = vision(name)
    stock = stock_arenas(model, DEFAULT_ALIGNMENT)["forward"]
    plain = lower_planned(model, solver, DEFAULT_ALIGNMENT, True, time_limit_s, elementwise_in_place=True)
    tiler = PlannerPass(tiling=options)
    began = time.perf_counter()
    tiled_model_ = tiled_model(model, tiler)
    search_seconds = time.perf_counter() - began
    report = tiler.tiling_reports["forward"]
    tiled = lower_planned(tiled_model_, solver, DEFAULT_ALIGNMENT, True, time_limit_s)
    untiled_arena = sum(runtime.stock_arena_bytes(plain.program)["forward"])
    tiled_arena = sum(runtime.stock_arena_bytes(tiled.program)["forward"])
    eager = runtime.eager_outputs(model)
    tiled_out = runtime.run_pte(tiled.program.buffer, model.calls)
    inputs = model.calls[0][1]
    tiled_s = seconds_per_run(tiled.program.buffer, inputs, runs)
    plain_s = seconds_per_run(plain.program.buffer, inputs, runs)
    out = {
        "model": name,
        "stock_arena": stock,
        "memplan_untiled": untiled_arena,
        "untiled_proven": bool(plain.planner_pass.results["forward"].plan.proven_optimal),
        "memplan_tiled": tiled_arena,
        "tiled_proven": bool(tiled.planner_pass.results["forward"].plan.proven_optimal),
        "reduction": untiled_arena / tiled_arena,
        "extra_macs_pct": 100 * report.extra_macs,
        "runtime_ratio": tiled_s / plain_s,
        "equal_eager": _equal(model, tiled_out, eager),
        "equal_untiled": _equal(model, tiled_out, runtime.run_pte(plain.program.buffer, model.calls)),
        "region": report.summary(),
        "search_s": round(search_seconds, 1),
        "vela_cascade_no_input": "–",  # Vela's figures are of int8 builds (the --int8 rows)
        "macs": report.base_macs,
    }
    if xnnpack:
        delegated = dataclasses.replace(tiled_model_, partitioner="xnnpack")
        lowered = lower_planned(delegated, solver, DEFAULT_ALIGNMENT, True, time_limit_s)
        out["xnnpack_equal_eager"] = _equal(
            model, runtime.run_pte(lowered.program.buffer, model.calls), eager
        )
    return out


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    flags.add_models(parser, default=list(VISION))
    parser.add_argument("--solver", default=DEFAULT_SOLVER)
    flags.add_time_limit(parser)
    parser.add_argument("--max-extra-macs", type=float, default=0.15)
    parser.add_argument("--runs", type=int, default=5, help="timed runs per program (default: %(default)s)")
    parser.add_argument("--xnnpack", action="store_true", help="also check the tiled model under XNNPACK")
    parser.add_argument(
        "--int8",
        default="",
        help="comma-separated models also built int8 as an MCU user does (pt2e, XNNPACK per op, input the"
        " caller's), with Vela's figure beside them, e.g. mobilenet_v2_035_144; --models '' for int8 rows only",
    )
    args = parser.parse_args(argv)
    options = TilingOptions(max_extra_macs=args.max_extra_macs)
    torch.set_num_threads(1)
    rows = []
    for name in filter(None, args.int8.split(",")):
        with library_warnings_silenced():
            rows.append(
                int8_row(
                    name,
                    options,
                    args.solver,
                    args.time_limit or DEFAULT_TIME_LIMIT_S,
                    lambda pte, inputs: seconds_per_run(pte, inputs, args.runs),
                )
            )
        print(markdown(pd.DataFrame(rows[-1:])), flush=True)
    for name in filter(None, args.models.split(",")):
        with library_warnings_silenced():
            rows.append(
                row(
                    name,
                    options,
                    args.solver,
                    args.time_limit or DEFAULT_TIME_LIMIT_S,
                    args.runs,
                    args.xnnpack,
                )
            )
        print(markdown(pd.DataFrame(rows[-1:])), flush=True)
    print()
    print(markdown(pd.DataFrame(rows)))


if __name__ == "__main__":
    main()
