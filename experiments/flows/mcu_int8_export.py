"""An MCU user's export script, as written without memplan: an int8 CNN (torchvision layout, random
weights) quantized with pt2e and XNNPACK's symmetric quantizer, calibrated on random images, lowered
one op per XNNPACK delegate (every activation between ops stays in the planned arena), the input
given by the caller (`MemoryPlanningPass(alloc_graph_input=False)`), written to a `.pte`.

    python experiments/flows/mcu_int8_export.py --model mobilenet_v2_035_144 --out mbv2.pte
    memplan run --tiling -- experiments/flows/mcu_int8_export.py --out mbv2.pte   # the same, tiled

Nothing here knows memplan (the model's layout is the only import from it), so `memplan run` is
exercised on a script exactly as a user has it; the benchmark reuses `quantized` and `lowered`.
"""

from __future__ import annotations

import argparse

import torch
from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
from executorch.backends.xnnpack.quantizer.xnnpack_quantizer import (
    XNNPACKQuantizer,
    get_symmetric_quantization_config,
)
from executorch.exir import ExecutorchBackendConfig, ExecutorchProgramManager, to_edge_transform_and_lower
from executorch.exir.passes.memory_planning_pass import MemoryPlanningPass
from torch.export import ExportedProgram
from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

CALIBRATION_IMAGES = 4


def quantized(model: torch.nn.Module, example: tuple[torch.Tensor, ...], seed: int = 0) -> ExportedProgram:
    """`model` quantized to int8 by pt2e (XNNPACK's symmetric config), calibrated on random images
    of `example`'s shapes, exported again with `example` as its example inputs."""
    captured = torch.export.export(model.eval(), example, strict=False).module()
    prepared = prepare_pt2e(captured, XNNPACKQuantizer().set_global(get_symmetric_quantization_config()))
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for _ in range(CALIBRATION_IMAGES):
            prepared(*(torch.randn(x.shape, generator=generator) for x in example))
    return torch.export.export(convert_pt2e(prepared), example, strict=False)


def lowered(
    program: ExportedProgram, planning_pass: MemoryPlanningPass | None = None
) -> ExecutorchProgramManager:
    """`program` one op per XNNPACK delegate, planned with the input left to the caller (by
    `planning_pass`, default the stock pass)."""
    edge = to_edge_transform_and_lower(program, partitioner=[XnnpackPartitioner(per_op_mode=True)])
    chosen = planning_pass if planning_pass is not None else MemoryPlanningPass(alloc_graph_input=False)
    return edge.to_executorch(ExecutorchBackendConfig(memory_planning_pass=chosen))


def main() -> None:
    from memplan.experiments.zoo.models.vision import vision_module

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="mobilenet_v2_035_144")
    parser.add_argument("--out", default="model_int8.pte")
    args = parser.parse_args()
    model, example = vision_module(args.model)
    program = lowered(quantized(model, example))
    with open(args.out, "wb") as f:
        program.write_to_file(f)
    arena = sum(program.executorch_program.execution_plan[0].non_const_buffer_sizes)
    print(f"{args.out}: arena {arena:,} B")


if __name__ == "__main__":
    main()
