"""The int8 rows of the tiling benchmark (experiments/bench/tiled_cnns.py --int8): each model built as
an MCU user builds it (experiments/flows/mcu_int8_export.py: pt2e with XNNPACK's symmetric quantizer,
one op per XNNPACK delegate, the input given by the caller), planned by the stock pass, by memplan
untiled and by memplan tiled, with Arm Vela's cascading figure beside it where the issue cites one.
The tiled program's outputs must be bit-identical to the stock (untiled) program's.

Vela's figures are measurements with Vela 5.2 (ethos-u55-128, --optimise Size, Shared_Sram, "Total
SRAM used" of an int8 TFLite build of the same architecture; docs/vela_reference.md): Vela keeps the input
image in SRAM, an MCU program planned with `alloc_graph_input=False` does not, so the arena to compare
with is Vela's total less its input.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import torch
from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner

from memplan.experiments.flows.mcu_int8_export import lowered, quantized
from memplan.experiments.zoo.models.vision import vision_module
from memplan.planner.pass_ import PlannerPass
from memplan.planner.tiling import TilingOptions

VELA_5_2 = {
    "mobilenet_v2_035_144": (120_960, 62_208),
    "mobilenet_v2_100_224": (361_984, 150_528),
    "resnet18_128": (143_360, 49_152),
    "mnasnet_b1_128": (123_904, 49_152),
    "mobilenet_v3_small_224": (211_456, 150_528),
}
"""Model -> (Vela's total SRAM with cascading, of which the input image), with Vela 5.2: the MobileNetV2
figures by the issue's author, the others here with the procedure that reproduces those
(docs/vela_reference.md)."""

CALLS = 3


def vela_without_input(name: str) -> int | None:
    """Vela's cascaded SRAM less its input image (the arena an MCU program must reach), if cited."""
    if name not in VELA_5_2:
        return None
    total, image = VELA_5_2[name]
    return total - image


def arena(program: Any) -> int:
    return sum(program.executorch_program.execution_plan[0].non_const_buffer_sizes)


def outputs(buffer: bytes, images: list[torch.Tensor]) -> list[torch.Tensor]:
    """`forward` on each image, one program loaded once (kept alive while its method runs)."""
    from executorch.runtime import Runtime

    program = Runtime.get().load_program(buffer)
    method = program.load_method("forward")
    return [method.execute([image])[0].clone() for image in images]


def int8_row(
    name: str,
    options: TilingOptions,
    solver: str,
    time_limit_s: float,
    timer: Callable[[bytes, tuple], float],
) -> dict:
    """One model's int8 row: stock, memplan untiled, memplan tiled, and whether the tiled program's
    outputs are bit-identical to the stock program's over `CALLS` random images."""
    model, example = vision_module(name)
    program = quantized(model, example)
    stock = lowered(program)
    # the untiled program with the levers the tiled one gets (elementwise in place is on with tiling)
    plain = PlannerPass(
        alloc_graph_input=False, solver=solver, time_limit_s=time_limit_s, elementwise_in_place=True
    )
    untiled = lowered(program, plain)
    tiler = PlannerPass(alloc_graph_input=False, solver=solver, time_limit_s=time_limit_s, tiling=options)
    began = time.perf_counter()
    tiled_program = tiler.tile(program, "forward", partitioner=[XnnpackPartitioner(per_op_mode=True)])
    search_seconds = time.perf_counter() - began
    tiled = lowered(tiled_program, tiler)
    report = tiler.tiling_reports["forward"]
    generator = torch.Generator().manual_seed(1)
    images = [torch.randn(example[0].shape, generator=generator) for _ in range(CALLS)]
    same = all(
        torch.equal(a, b)
        for a, b in zip(outputs(tiled.buffer, images), outputs(stock.buffer, images), strict=True)
    )
    untiled_arena, tiled_arena = arena(untiled), arena(tiled)
    vela = vela_without_input(name)
    return {
        "model": f"{name} int8",
        "stock_arena": arena(stock),
        "memplan_untiled": untiled_arena,
        "untiled_proven": bool(plain.results["forward"].plan.proven_optimal),
        "memplan_tiled": tiled_arena,
        "tiled_proven": bool(tiler.results["forward"].plan.proven_optimal),
        "reduction": untiled_arena / tiled_arena,
        "vela_cascade_no_input": vela if vela is not None else "–",
        "vs_vela": tiled_arena / vela if vela else "–",
        "macs": report.base_macs,
        "extra_macs_pct": 100 * report.extra_macs,
        "runtime_ratio": timer(tiled.buffer, example) / timer(untiled.buffer, example),
        "equal_eager": "–",
        "equal_untiled": same,
        "region": report.summary(),
        "search_s": round(search_seconds, 1),
    }
