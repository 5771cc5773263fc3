"""Lower zoo models with any memory planning pass and check them in
``executorch.runtime`` against eager PyTorch.

Typical use::

    from memplan.experiments import zoo
    from memplan.experiments.zoo import runtime
    m = zoo.get("llama_decode")
    et = runtime.lower(m)                          # stock MemoryPlanningPass
    runtime.check_outputs(m, et.buffer)            # raises AssertionError on mismatch
    runtime.stock_arena_bytes(et)                  # {"forward": [0, 123456]}
    et2 = runtime.lower(m, memory_planning_pass=MyPass())

Notes
-----
* ``lower`` exports the model once per ZooModel object (cached on it) and then
  deep-copies the edge program for every lowering, so several passes can be
  compared without re-exporting. If deep-copying fails it re-exports.
* The stock baseline uses ``MemoryPlanningPass(**model.memory_planning_config)``
  with ``ExecutorchBackendConfig(**model.backend_config)``. Stateful
  multi-method models set ``share_mutable_buffers=True``: host-only methods of
  one program share their arenas in the runtime, so without it a mutable
  buffer planned into method A's arena 1 is clobbered by / invisible to
  method B. ``emit_mutable_buffer_names`` is not needed.
* ``run_pte`` loads ONE program and runs the whole call sequence on it, so the
  methods share arena memory and mutable state as in a real deployment.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any, cast

import torch
from torch.utils import _pytree as pytree

from memplan.experiments.zoo import ZooModel
from memplan.planner.compat import convert_to_linear_pass, deserialize_pte_binary

__all__ = [
    "export_methods",
    "to_edge",
    "lower",
    "run_pte",
    "eager_outputs",
    "check_outputs",
    "stock_arena_bytes",
    "program_stats",
    "mutable_buffers",
    "edge_program",
    "compare_outputs",
    "stock_memory_planning_pass",
    "flatten_inputs",
]


# ---------------------------------------------------------------- export / lower


def export_methods(model: ZooModel) -> dict[str, torch.export.ExportedProgram]:
    """torch.export every method (non-strict) on a deep copy of the eager
    modules, so exporting never touches the ZooModel's own state. A method that fails raises
    ModelError naming the model, the method and the user's own frame (the error is its cause)."""
    from memplan.experiments.zoo.model_errors import export_error

    mods = copy.deepcopy({n: m for n, (m, _) in model.methods.items()})  # one memo: sharing kept
    dyn = model.dynamic_shapes or {}
    eps = {}
    with torch.no_grad():
        for name, (_, example) in model.methods.items():
            try:
                eps[name] = torch.export.export(
                    mods[name],
                    tuple(copy.deepcopy(example)),
                    dynamic_shapes=cast(Any, dyn.get(name)),
                    strict=False,
                )
            except Exception as exc:  # the model's own error (or torch.export's about it), told in one line
                raise export_error(model.name, name, exc) from exc
    return eps


def _partitioners(model: ZooModel):
    if model.partitioner is None:
        return None
    if model.partitioner == "xnnpack":
        from executorch.backends.xnnpack.partition.xnnpack_partitioner import (
            XnnpackPartitioner,
        )

        return [XnnpackPartitioner()]
    raise ValueError(f"unknown partitioner {model.partitioner!r}")


def to_edge(model: ZooModel):
    """Export every method and build one EdgeProgramManager (several methods
    for multi-method models), lowering with the partitioner if any."""
    from executorch.exir import EdgeCompileConfig, to_edge_transform_and_lower
    from executorch.exir import to_edge as _to_edge

    eps = export_methods(model)
    parts = _partitioners(model)
    # aten.linear is not core ATen; ConvertToLinearPass reintroduces it (the
    # runtime has aten::linear.out), so let the edge verifier accept it.
    cfg = EdgeCompileConfig(
        _core_aten_ops_exception_list=[torch.ops.aten.linear.default] if model.convert_to_linear else []
    )
    if parts is None:
        edge = _to_edge(eps, compile_config=cfg)
    else:
        edge = to_edge_transform_and_lower(eps, partitioner=parts, compile_config=cfg)
    if model.convert_to_linear:
        # As export_llama's builder does before to_executorch.
        edge = edge.transform([convert_to_linear_pass()])
    return edge


def edge_program(model: ZooModel):
    """The model's edge program, exported on first use and cached on the ZooModel.

    Callers that lower must not mutate it: `lower` works on a deep copy.
    """
    cached = model.__dict__.get("_edge_program")
    if cached is None:
        cached = to_edge(model)
        model.__dict__["_edge_program"] = cached
    return cached


def _edge_copy(model: ZooModel):
    """A private copy of the model's edge program (exported once per ZooModel)."""
    cached = edge_program(model)
    try:
        return copy.deepcopy(cached)
    except Exception:  # pragma: no cover - fall back to a fresh export
        return to_edge(model)


def stock_memory_planning_pass(model: ZooModel):
    from executorch.exir.passes import MemoryPlanningPass

    return MemoryPlanningPass(**model.memory_planning_config)


def lower(model: ZooModel, memory_planning_pass=None, **backend_config):
    """Lower ``model`` to an ExecutorchProgramManager.

    memory_planning_pass: None -> stock ``MemoryPlanningPass`` (with the
    model's ``memory_planning_config``); else a pass or a dict method -> pass,
    as accepted by ``ExecutorchBackendConfig.memory_planning_pass``.
    backend_config: extra ExecutorchBackendConfig kwargs, overriding the
    model's ``backend_config``.
    """
    from executorch.exir import ExecutorchBackendConfig

    if memory_planning_pass is None:
        # A fresh instance every time: the pass keeps per-program state
        # (share_mutable_buffers) and the config default is a shared object.
        memory_planning_pass = stock_memory_planning_pass(model)
    cfg = {**model.backend_config, **backend_config}
    edge = _edge_copy(model)
    return edge.to_executorch(ExecutorchBackendConfig(memory_planning_pass=memory_planning_pass, **cfg))


# ---------------------------------------------------------------- running


def flatten_inputs(inputs: tuple) -> list:
    """Flatten nested example inputs the way torch.export orders user inputs."""
    return pytree.tree_leaves(tuple(inputs))


def _as_tensor_list(out: Any) -> list[torch.Tensor]:
    leaves = pytree.tree_leaves(out)
    res = []
    for x in leaves:
        if isinstance(x, torch.Tensor):
            res.append(x.detach().clone())
        elif isinstance(x, (int, float, bool)):
            res.append(torch.tensor(x))
        else:
            raise TypeError(f"unsupported output type {type(x).__name__}")
    return res


def _pte_bytes(pte) -> bytes:
    if isinstance(pte, (bytes, bytearray)):
        return bytes(pte)
    if hasattr(pte, "buffer"):
        return pte.buffer
    raise TypeError(f"expected .pte bytes or ExecutorchProgramManager, got {type(pte).__name__}")


def run_pte(pte, calls: Sequence[tuple[str, tuple]]) -> list[list[torch.Tensor]]:
    """Load the program once (from bytes) and run ``calls`` in order on it.

    All methods are loaded up front, as a deployment would, so they share the
    runtime's arenas and mutable state. Returns each call's flattened outputs.
    """
    from executorch.runtime import Runtime

    program = Runtime.get().load_program(_pte_bytes(pte))
    missing = {n for n, _ in calls} - program.method_names
    if missing:
        raise KeyError(f"program has no method(s) {sorted(missing)}; has {sorted(program.method_names)}")
    # Load every method of the program before the first call (as a deployment
    # would): host-only methods then share one set of arenas and the state.
    methods = {n: program.load_method(n) for n in sorted(program.method_names)}
    results = []
    for name, inputs in calls:
        flat = [x.clone() if isinstance(x, torch.Tensor) else x for x in flatten_inputs(inputs)]
        out = methods[name].execute(flat)
        results.append(_as_tensor_list(list(out)))
    return results


def eager_outputs(model: ZooModel) -> list[list[torch.Tensor]]:
    """Run the call sequence on a deep copy of the eager modules (one copy for
    all methods, so shared state is shared like in the program)."""
    mods = copy.deepcopy({n: m for n, (m, _) in model.methods.items()})
    results = []
    with torch.no_grad():
        for name, inputs in model.calls:
            out = mods[name](*copy.deepcopy(tuple(inputs)))
            results.append(_as_tensor_list(out))
    return results


def compare_outputs(
    model: ZooModel,
    got: list[list[torch.Tensor]],
    want: list[list[torch.Tensor]],
    atol: float | None = None,
    rtol: float | None = None,
) -> None:
    atol = model.atol if atol is None else atol
    rtol = model.rtol if rtol is None else rtol
    if len(got) != len(want):
        raise AssertionError(f"{model.name}: {len(got)} call results, expected {len(want)}")
    for i, ((method, _), g, w) in enumerate(zip(model.calls, got, want)):
        where = f"{model.name}: call {i} ({method})"
        if len(g) != len(w):
            raise AssertionError(f"{where}: {len(g)} outputs, expected {len(w)}")
        for j, (a, b) in enumerate(zip(g, w)):
            if a.shape != b.shape:
                raise AssertionError(f"{where} output {j}: shape {tuple(a.shape)}, expected {tuple(b.shape)}")
            if a.dtype != b.dtype:
                raise AssertionError(f"{where} output {j}: dtype {a.dtype}, expected {b.dtype}")
            if a.dtype.is_floating_point or a.dtype.is_complex:
                ok = torch.allclose(a, b, atol=atol, rtol=rtol, equal_nan=True)
            else:
                ok = torch.equal(a, b)
            if not ok:
                diff = (a.double() - b.double()).abs()
                raise AssertionError(
                    f"{where} output {j}: mismatch, max abs diff {diff.max().item():.3g} "
                    f"(atol={atol}, rtol={rtol}, {int((diff > atol + rtol * b.double().abs()).sum())}"
                    f"/{b.numel()} elements off)"
                )


def check_outputs(model: ZooModel, pte, atol: float | None = None, rtol: float | None = None) -> None:
    """Run ``model.calls`` on the program and on eager PyTorch and compare.
    Raises AssertionError naming the call, method and output index."""
    compare_outputs(model, run_pte(pte, model.calls), eager_outputs(model), atol, rtol)


# ---------------------------------------------------------------- inspection


def _program(ep_or_pte):
    if isinstance(ep_or_pte, (bytes, bytearray)):
        return deserialize_pte_binary(bytes(ep_or_pte)).program
    if hasattr(ep_or_pte, "executorch_program"):
        return ep_or_pte.executorch_program
    if hasattr(ep_or_pte, "execution_plan"):
        return ep_or_pte
    raise TypeError(
        f"expected ExecutorchProgramManager, Program or .pte bytes, got {type(ep_or_pte).__name__}"
    )


def stock_arena_bytes(ep_or_pte) -> dict[str, list[int]]:
    """``non_const_buffer_sizes`` per method as emitted in the program
    (index 0 is reserved by ExecuTorch; index i is arena/mem_id i)."""
    return {p.name: list(p.non_const_buffer_sizes) for p in _program(ep_or_pte).execution_plan}


def program_arena_bytes(sizes: dict[str, list[int]]) -> int:
    """What the runtime allocates for a whole program (`stock_arena_bytes`' per-method sizes): per
    mem_id the largest arena over the methods, summed (methods loaded together share each arena)."""
    width = max((len(s) for s in sizes.values()), default=0)
    return sum(max((s[i] if i < len(s) else 0) for s in sizes.values()) for i in range(1, width))


def program_stats(ep_or_pte) -> dict[str, dict[str, Any]]:
    """Per method: arena sizes, number of memory-planned tensor values (with an
    allocation_info) and how many live in each mem_id, and number of delegates."""
    from executorch.exir.schema import Tensor as ETTensor

    stats = {}
    for plan in _program(ep_or_pte).execution_plan:
        per_id: dict[int, int] = {}
        for v in plan.values:
            t = v.val
            if isinstance(t, ETTensor) and t.allocation_info is not None:
                per_id[t.allocation_info.memory_id] = per_id.get(t.allocation_info.memory_id, 0) + 1
        stats[plan.name] = {
            "arena_bytes": list(plan.non_const_buffer_sizes),
            "planned_tensors": sum(per_id.values()),
            "planned_tensors_per_mem_id": dict(sorted(per_id.items())),
            "delegates": len(plan.delegates),
        }
    return stats


def mutable_buffers(model: ZooModel) -> dict[str, list[str]]:
    """FQNs of buffers each method mutates (from the edge program signatures)."""
    edge = edge_program(model)
    out = {}
    for name in edge.methods:
        sig = edge.exported_program(name).graph_signature
        out[name] = sorted(set(sig.buffers_to_mutate.values()))
    return out


def _main(argv: Sequence[str] | None = None) -> int:  # pragma: no cover - CLI helper
    import argparse
    import time

    from memplan.experiments import zoo

    ap = argparse.ArgumentParser(description="lower zoo models with the stock planner and check them")
    ap.add_argument("names", nargs="*", help="zoo model names (default: the default sweep)")
    a = ap.parse_args(argv)
    for name in a.names or zoo.names():
        t0 = time.perf_counter()
        m = zoo.get(name)
        et = lower(m)
        t1 = time.perf_counter()
        check_outputs(m, et.buffer)
        t2 = time.perf_counter()
        st = program_stats(et)
        print(
            f"{name:26s} lower {t1 - t0:6.2f}s run+check {t2 - t1:5.2f}s  "
            + "  ".join(f"{k}: {v['arena_bytes']} ({v['planned_tensors']} planned)" for k, v in st.items())
        )
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(_main())
