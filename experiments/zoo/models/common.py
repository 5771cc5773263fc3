"""What a zoo entry carries (`ZooModel`), and the helpers every builder uses.

Every entry is built lazily by :func:`get` with a fixed seed (random weights,
no checkpoints), so two calls to ``get(name)`` give numerically identical
models and inputs.

A :class:`ZooModel` carries one eager module per ExecuTorch method (methods of
stateful models are thin wrappers around ONE shared module, so buffer FQNs are
identical across methods), the example inputs used for ``torch.export``, and a
call sequence that exercises the program (for stateful models: write state,
then read it back).

Inputs may be nested (the Llama models take ``(tokens, {"input_pos": pos})``
like ExecuTorch's ``export_llama``); the runtime harness flattens them with
``torch.utils._pytree`` the same way ``torch.export`` does.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import torch
from torch import nn

SEED = 0
CONST_PROP = "do_quant_fusion_and_const_prop"  # the ExecutorchBackendConfig flag that folds constants


def zoo_recipe(convert_linear: bool = True, const_prop: bool = True) -> dict:
    """The ZooModel fields of the zoo's lowering recipe, export_llama's: linears back to `aten.linear`
    (ConvertToLinearPass) and constant subgraphs folded. Every zoo builder passes it explicitly; a
    ZooModel's own defaults lower the program exactly as given (plain `to_edge`, no extra pass)."""
    return {"convert_to_linear": convert_linear, "backend_config": {CONST_PROP: True} if const_prop else {}}


@dataclass
class ZooModel:
    name: str
    description: str
    # method name -> (eager module, example inputs) used for torch.export
    methods: dict[str, tuple[nn.Module, tuple]]
    # call sequence used to check the program: (method name, inputs)
    calls: list[tuple[str, tuple]]
    partitioner: str | None = None  # None or "xnnpack"
    dynamic_shapes: dict[str, object] | None = None  # per method, optional
    # ExecutorchBackendConfig kwargs (merged under any kwargs given to
    # runtime.lower). Default: none. The zoo's recipe (zoo_recipe) folds constant
    # subgraphs (e.g. weight transposes) like export_llama does. Models whose
    # methods share mutable buffers must NOT const-prop: in a method that only
    # reads a shared buffer the buffer looks constant and ExecuTorch folds the
    # read (wrong results).
    backend_config: dict = field(default_factory=dict)
    # kwargs for the stock MemoryPlanningPass (lower(..., memory_planning_pass=None)).
    # Stateful multi-method programs need share_mutable_buffers=True: without it
    # every method places the mutable buffers in its own arena-1 plan, and as
    # host-only methods of one program share arenas, the state is lost/corrupted.
    memory_planning_config: dict = field(default_factory=dict)
    # True when several methods read/write the same mutable buffers (by FQN).
    shared_state: bool = False
    # Tolerances for check_outputs (XNNPACK and long fp32 chains need looser ones).
    atol: float = 1e-4
    rtol: float = 1e-4
    # Run ExecuTorch's ConvertToLinearPass on the edge program (as export_llama
    # does, and the zoo's recipe) so linears are aten.linear.out instead of
    # permute_copy(weight)+addmm, which would put every transposed weight into
    # the activation arena. Default: off, the program as given.
    convert_to_linear: bool = False
    # Free-form tags: "mlperf_tiny", "llm", "stateful", "multi_method", "xnnpack", ...
    tags: tuple[str, ...] = ()

    @property
    def lowering(self) -> str:
        """How the program is lowered, in one line (every summary shows it)."""
        steps = [
            "to_edge" if self.partitioner is None else f"to_edge_transform_and_lower({self.partitioner})"
        ]
        if self.convert_to_linear:
            steps.append("ConvertToLinearPass")
        if self.backend_config.get(CONST_PROP):
            steps.append("const prop")
        steps += sorted(k for k in self.backend_config if k != CONST_PROP)
        return " + ".join(steps)


@contextlib.contextmanager
def seeded(seed: int = SEED) -> Iterator[None]:
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        yield


def randomize_batchnorm(module: nn.Module) -> nn.Module:
    """Give BatchNorm layers non-trivial running stats and affine params so the
    eager-vs-runtime comparison checks BN folding/arithmetic for real."""
    for m in module.modules():
        if isinstance(m, nn.modules.batchnorm._BatchNorm):
            with torch.no_grad():
                for stats, low, high in ((m.running_mean, -0.2, 0.2), (m.running_var, 0.5, 1.5)):
                    if stats is not None:  # None only without track_running_stats
                        stats.uniform_(low, high)
                if m.affine:
                    m.weight.uniform_(0.8, 1.2)
                    m.bias.uniform_(-0.1, 0.1)
    return module


def single_method(
    name: str,
    description: str,
    module: nn.Module,
    make_input: Callable[[], tuple],
    n_calls: int = 2,
    **kw,
) -> ZooModel:
    """A one-method ("forward") stateless model; calls are the example input
    followed by fresh random inputs of the same shape."""
    module = module.eval()
    example = make_input()
    calls = [("forward", example)] + [("forward", make_input()) for _ in range(n_calls - 1)]
    return ZooModel(name, description, {"forward": (module, example)}, calls, **kw)
