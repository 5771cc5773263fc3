"""ExecuTorch's own export scripts run under `memplan.substituted`: `export_llama` with a small params
JSON (random weights) and the wheel's XNNPACK example exporters on their toy models.

`run_module` runs a script as `python -m module ARGS` would, in this process (runpy), with memplan's
substitution and the stock program built beside each program; `llama_outputs` / `example_outputs`
run a program's forward in `executorch.runtime`, call after call (state carried), for comparing
memplan's program with the stock one.
"""

from __future__ import annotations

import json
import runpy
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from memplan.experiments.flows.outputs import identical_and_finite

LLAMA = "executorch.examples.models.llama.export_llama"
XNNPACK_AOT = "executorch.examples.xnnpack.aot_compiler"
XNNPACK_QUANTIZATION = "executorch.examples.xnnpack.quantization.example"

SMALL_LLAMA = {"dim": 32, "n_layers": 2, "n_heads": 2, "n_kv_heads": 1, "vocab_size": 64, "multiple_of": 16}
"""A two-layer Llama (grouped-query attention) that exports in seconds; random weights (a checkpoint
written by `write_params`)."""


@dataclass(frozen=True)
class Flow:
    """One export script and its arguments (`{out}` is the output folder)."""

    name: str
    module: str
    args: tuple[str, ...]
    inputs: str  # "llama" (tokens and a position per call) or "example" (the toy model's own inputs)
    model: str = ""  # the example model's name


def llama_flow(name: str, out_args: Sequence[str]) -> Flow:
    return Flow(
        name,
        LLAMA,
        (
            "-p",
            "{out}/params.json",
            "-c",
            "{out}/llama.pth",
            "-kv",
            "--output_name",
            "{out}/llama.pte",
            *out_args,
        ),
        "llama",
    )


FLOWS: dict[str, Flow] = {
    f.name: f
    for f in [
        llama_flow("export_llama portable", ()),
        llama_flow("export_llama xnnpack", ("-X",)),
        llama_flow("export_llama xnnpack, no dynamic shape", ("-X", "--disable_dynamic_shape")),
        Flow(
            "aot_compiler linear xnnpack",
            XNNPACK_AOT,
            ("--model_name", "linear", "--delegate", "-o", "{out}"),
            "example",
            "linear",
        ),
        Flow(
            "aot_compiler add_mul portable",
            XNNPACK_AOT,
            ("--model_name", "add_mul", "-o", "{out}"),
            "example",
            "add_mul",
        ),
        Flow(
            "quantization example linear",
            XNNPACK_QUANTIZATION,
            ("--model_name", "linear", "-o", "{out}"),
            "example",
            "linear",
        ),
    ]
}


def write_params(out: Path) -> Path:
    """params.json and a random checkpoint of its weights (llama.pth, passed with `-c`): without a
    checkpoint, export_llama builds the model on the meta device and materialises it with `to_empty`,
    so whatever `reset_parameters` does not cover (the RMSNorm weights, the rotary tables) is
    uninitialised memory, and the logits overflow to NaN."""
    from executorch.examples.models.llama.llama_transformer import construct_transformer
    from executorch.examples.models.llama.model_args import ModelArgs

    path = out / "params.json"
    path.write_text(json.dumps(SMALL_LLAMA))
    torch.manual_seed(0)
    model = construct_transformer(ModelArgs(**SMALL_LLAMA))
    torch.save({name: p.detach() for name, p in model.named_parameters()}, out / "llama.pth")
    return path


def run_module(flow: Flow, out: Path, solver: str = "cpsat", **options: Any) -> Any:
    """The flow run as `python -m`, under memplan with the stock programs built too; the Substitution."""
    import memplan

    out.mkdir(parents=True, exist_ok=True)
    write_params(out)
    argv = [flow.module, *(a.replace("{out}", str(out)) for a in flow.args)]
    saved = list(sys.argv)
    with memplan.substituted(solver, build_stock=True, **options) as run:
        try:
            sys.argv = argv
            runpy.run_module(flow.module, run_name="__main__", alter_sys=True)
        finally:
            sys.argv = saved
    return run


def inputs_of(flow: Flow, calls: int) -> list[list[torch.Tensor]]:
    """The inputs of each call: a token at each next position (llama), or the example's inputs."""
    if flow.inputs == "llama":
        torch.manual_seed(0)
        return [
            [torch.randint(0, SMALL_LLAMA["vocab_size"], (1, 1)), torch.tensor([i])] for i in range(calls)
        ]
    from executorch.examples.models import MODEL_NAME_TO_MODEL
    from executorch.examples.models.model_factory import EagerModelFactory

    _, example, *_ = EagerModelFactory.create_model(*MODEL_NAME_TO_MODEL[flow.model])
    return [list(example)] * calls


def outputs(program: Any, inputs: list[list[torch.Tensor]]) -> list[torch.Tensor]:
    """Every output of `forward` over the calls, in one loaded method (its state carried)."""
    from executorch.runtime import Runtime

    loaded = Runtime.get().load_program(program.buffer)  # alive while its method runs (else a segfault)
    method = loaded.load_method("forward")
    return [t.clone() for call in inputs for t in method.execute(call) if isinstance(t, torch.Tensor)]


def same_outputs(program: Any, stock_program: Any, inputs: list[list[torch.Tensor]]) -> bool:
    """Every output of memplan's program bit-identical to the stock program's, call after call, and
    every floating output finite (experiments.flows.outputs)."""
    return identical_and_finite(outputs(program, inputs), outputs(stock_program, inputs))
