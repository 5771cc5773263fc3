"""The reorder lever's table: int8 MobileNetV2-0.35@144 as an MCU user builds it (XNNPACK per-op, the
input given by the caller), untiled and tiled, planned with `reorder=False` and with the lever on:
the arena and the live-bytes lower bound of the program built, and the pass's seconds.

    python -m memplan.experiments.bench.reorder [--model mobilenet_v2_035_144] [--llama-layers 16]

With `--llama-layers N`: instead, the pass's seconds on the zoo's Llama decode of N layers (greedy, so
the solver's time limit does not hide the lever's), `reorder=False` against `reorder=True`.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence

import pandas as pd

from memplan.experiments.flows.mcu_int8_export import lowered, quantized
from memplan.experiments.markdown import markdown
from memplan.experiments.zoo.models.vision import vision_module
from memplan.planner.pass_ import PlannerPass
from memplan.planner.tiling import TilingOptions


def row(program, tiled: bool, reorder: bool) -> dict:
    """One program planned one way: its arena, lower bound, the instructions moved, the seconds."""
    tiling = TilingOptions(input_in_arena=False) if tiled else None
    planner = PlannerPass(alloc_graph_input=False, reorder=reorder, tiling=tiling)
    source = planner.tile(program, "forward") if tiled else program
    began = time.perf_counter()
    built = lowered(source, planner)
    seconds = time.perf_counter() - began
    result = planner.results["forward"]
    report = result.reorder_report
    return {
        "program": "tiled" if tiled else "untiled",
        "reorder": reorder,
        "arena": sum(built.executorch_program.execution_plan[0].non_const_buffer_sizes),
        "lower_bound": result.lower_bound,
        "moved": report.instructions_moved if report else 0,
        "lower_seconds": round(seconds, 1),
    }


def llama_seconds(layers: int) -> None:
    """The pass's own seconds (`MethodResult` planning plus the lever) on a large decode graph."""
    from memplan.experiments.zoo import runtime
    from memplan.experiments.zoo.models import hybrid

    model = hybrid.llama_kv(n_layers=layers, name=f"llama_kv_{layers}")
    runtime.lower(model, memory_planning_pass=PlannerPass(solver="greedy"))  # warm-up, not timed
    rows = []
    for reorder in (False, True):
        planner = PlannerPass(solver="greedy", reorder=reorder)
        began = time.perf_counter()
        runtime.lower(model, memory_planning_pass=planner)
        seconds = time.perf_counter() - began
        result = planner.results["forward"]
        moved = result.reorder_report.instructions_moved if result.reorder_report else 0
        rows.append(
            {
                "program": model.name,
                "reorder": reorder,
                "to_executorch_s": round(seconds, 1),
                "moved": moved,
                "lower_bound": result.lower_bound,
            }
        )
    print(markdown(pd.DataFrame(rows)))


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="mobilenet_v2_035_144")
    parser.add_argument("--llama-layers", type=int, default=0)
    args = parser.parse_args(argv)
    if args.llama_layers:
        llama_seconds(args.llama_layers)
        return
    model, example = vision_module(args.model)
    program = quantized(model, example)
    rows = [row(program, tiled, reorder) for tiled in (False, True) for reorder in (False, True)]
    print(markdown(pd.DataFrame(rows)))


if __name__ == "__main__":
    main()
