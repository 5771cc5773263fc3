"""Any program, not just the zoo: a zoo name, a `.pt2` file, or `path/file.py:factory`; and the public
helper that plans one (`memplan.plan_model`) for notebooks and scripts.

Every source becomes a `ZooModel` (eager modules, example inputs, a call sequence), so the CLI, the
sweep and the runtime check treat a researcher's own model exactly like a zoo model:

* `NAME`: a zoo model (`memplan models`);
* `FILE.pt2`: a program saved with `torch.export.save`; its `module()` is the eager reference and its
  example inputs drive the export and the check;
* `FILE.py:FACTORY`: `FACTORY()` returns `(module, example_inputs)`, a dict `{method: (module,
  example_inputs)}` (methods may share submodules, and so state), or a `ZooModel`.

A spec is a plain string, so sweep workers in other processes (or on Ray) load the same program.
"""

from __future__ import annotations

import hashlib
import importlib.util
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
import torch
from torch import nn

from memplan.experiments.sweep.grid import SweepConfigError, check_choice, did_you_mean
from memplan.experiments.zoo import ZooModel

PT2_SUFFIX = ".pt2"
DEFAULT_SOLVER = "cpsat"
DEFAULT_TIME_LIMIT_S = 5.0
DEFAULT_ALIGNMENT = 16


class ProgramSpecError(SweepConfigError):
    """A program spec names nothing that can be loaded; the message says what was tried."""


def is_file_spec(spec: str) -> bool:
    """True for `.pt2` paths and `file.py:factory` specs (everything that is not a zoo name)."""
    return spec.endswith(PT2_SUFFIX) or ".py:" in spec


def load(spec: str | ZooModel) -> ZooModel:
    """The program a spec names, as a ZooModel (a ZooModel is returned as it is)."""
    if isinstance(spec, ZooModel):
        return spec
    if spec.endswith(PT2_SUFFIX):
        return from_pt2(spec)
    if ".py:" in spec:
        path, factory = spec.rsplit(":", 1)
        return from_factory(path, factory)
    from memplan.experiments import zoo

    check_choice("model", spec, zoo.names(), hint="; or give a .pt2 file or path/file.py:factory")
    return zoo.get(spec)


def from_module(
    methods: nn.Module | Mapping[str, tuple[nn.Module, tuple]],
    example_inputs: tuple | None = None,
    name: str = "model",
    **options: Any,
) -> ZooModel:
    """A ZooModel for one module and its example inputs, or a dict of methods.

    Each method is called once, with its example inputs, in the check. `options` are ZooModel fields
    (partitioner="xnnpack", atol, rtol, backend_config, ...).
    """
    if isinstance(methods, nn.Module):
        if example_inputs is None:
            raise ProgramSpecError(f"{name}: a module needs example inputs (a tuple of tensors)")
        methods = {"forward": (methods, tuple(example_inputs))}
    table = {}
    for method, entry in methods.items():
        if not (isinstance(entry, tuple) and len(entry) == 2 and isinstance(entry[0], nn.Module)):
            raise ProgramSpecError(f"{name}: method {method!r} must be (module, example_inputs)")
        table[method] = (_eval(entry[0]), tuple(entry[1]))
    calls = [(method, inputs) for method, (_, inputs) in table.items()]
    if len(table) > 1:
        options.setdefault("backend_config", {})  # no const prop: it folds reads of shared state
        options.setdefault("memory_planning_config", {"share_mutable_buffers": True})
    kinds = "multi_method" if len(table) > 1 else "own"
    return ZooModel(name, f"{name} ({len(table)} method(s))", table, calls, tags=(kinds,), **options)


def _eval(module: nn.Module) -> nn.Module:
    """Inference mode; a module unlifted from an ExportedProgram is already there and refuses eval()."""
    try:
        return module.eval()
    except NotImplementedError:
        return module


def from_factory(path: str | Path, factory: str) -> ZooModel:
    """Import `path` as a module and build the program from `factory()`."""
    path = Path(path)
    if not path.is_file():
        raise ProgramSpecError(f"no such file {str(path)!r} (in spec {str(path)}:{factory})")
    digest = hashlib.sha1(str(path.resolve()).encode()).hexdigest()[:10]
    module_name = f"memplan_user_{path.stem}_{digest}"
    module = sys.modules.get(module_name)
    if module is None:
        loader_spec = importlib.util.spec_from_file_location(module_name, path)
        if loader_spec is None or loader_spec.loader is None:
            raise ProgramSpecError(f"cannot import {str(path)!r} as Python")
        module = importlib.util.module_from_spec(loader_spec)
        sys.modules[module_name] = module  # dataclasses and pickling look modules up by name
        try:
            loader_spec.loader.exec_module(module)
        except Exception as exc:
            del sys.modules[module_name]
            raise ProgramSpecError(f"importing {str(path)!r} failed: {type(exc).__name__}: {exc}") from exc
    fn = getattr(module, factory, None)
    if not callable(fn):
        found = [n for n in vars(module) if callable(getattr(module, n)) and not n.startswith("_")]
        raise ProgramSpecError(f"{str(path)!r} has no function {factory!r}{did_you_mean(factory, found)}")
    made = fn()
    name = f"{path.stem}:{factory}"
    if isinstance(made, ZooModel):
        return made
    if isinstance(made, tuple) and len(made) == 2 and isinstance(made[0], nn.Module):
        return from_module(made[0], made[1], name=name)
    if isinstance(made, Mapping):
        return from_module(made, name=name)
    raise ProgramSpecError(
        f"{name}() returned a {type(made).__name__}; return (module, example_inputs),"
        " {method: (module, example_inputs)} or a ZooModel"
    )


def from_pt2(path: str | Path) -> ZooModel:
    """A program saved with `torch.export.save`: re-exported from its module with its example inputs."""
    path = Path(path)
    if not path.is_file():
        raise ProgramSpecError(f"no such file {str(path)!r}")
    try:
        exported = torch.export.load(str(path))
    except Exception as exc:  # noqa: BLE001 - any failure means: not a .pt2 we can read
        raise ProgramSpecError(
            f"{str(path)!r} is not a torch.export program ({type(exc).__name__}: {exc})"
        ) from None
    if exported.example_inputs is None:
        raise ProgramSpecError(f"{str(path)!r} was saved without example inputs; export with example inputs")
    args, kwargs = exported.example_inputs
    if kwargs:
        raise ProgramSpecError(
            f"{str(path)!r}: keyword example inputs are not supported; pass them positionally"
        )
    return from_module(exported.module(), tuple(args), name=path.stem)


# -- the public helper -------------------------------------------------------------------------


@dataclass
class PlannedModel:
    """A model lowered to ExecuTorch with `PlannerPass`, next to the stock planner's arenas.

    `results[method]` has the problem, the plan, the cat report; `summary` is one row per method;
    `matches_eager` is set when the program was run and compared with eager PyTorch.
    """

    model: ZooModel
    solver: str
    program: Any  # ExecutorchProgramManager
    results: dict[str, Any]
    methods: list[str]
    stock_arena_bytes: dict[str, int] = field(default_factory=dict)
    summary: pd.DataFrame = field(default_factory=pd.DataFrame)
    matches_eager: bool | None = None

    @property
    def buffer(self) -> bytes:
        """The `.pte` bytes."""
        return self.program.buffer

    def save(self, path: str | Path) -> Path:
        """Write the planned `.pte` to `path`."""
        path = Path(path)
        path.write_bytes(self.buffer)
        return path

    def _repr_html_(self) -> str:
        return f"<b>{self.model.name}</b>, solver {self.solver}<br>" + self.summary.to_html(index=False)

    def __repr__(self) -> str:
        arenas = ", ".join(
            f"{m}: {self.summary.set_index('method').at[m, 'arena_bytes']:,} B" for m in self.methods
        )
        return f"PlannedModel({self.model.name!r}, solver={self.solver!r}, {arenas})"


def call_order(model: ZooModel) -> list[str]:
    """Methods in the order the model's call sequence first uses them."""
    order = list(dict.fromkeys(name for name, _ in model.calls))
    return order + [m for m in model.methods if m not in order]


def plan_model(
    source: str | ZooModel | nn.Module | Mapping[str, tuple[nn.Module, tuple]],
    solver: str = DEFAULT_SOLVER,
    *,
    example_inputs: tuple | None = None,
    time_limit_s: float = DEFAULT_TIME_LIMIT_S,
    alignment: int = DEFAULT_ALIGNMENT,
    cat_fusion: bool = True,
    stock: bool = True,
    check: bool = False,
    partitioner: str | None = None,
) -> PlannedModel:
    """Export -> edge -> ExecuTorch with `PlannerPass(solver)`; the stock pass too; optionally run it.

    `source` is a zoo name, a `.pt2` path, `file.py:factory`, a ZooModel, an `nn.Module` (with
    `example_inputs`) or a dict of methods. `check=True` runs the program in `executorch.runtime` and
    compares with eager PyTorch (an AssertionError names the call and output that differ).
    Pass the same ZooModel again to plan it with another solver without exporting again.
    """
    from memplan.bounds import lower_bound
    from memplan.experiments.zoo import runtime
    from memplan.experiments.zoo.lowering import library_warnings_silenced, lower_planned, stock_arenas

    if isinstance(source, (nn.Module, Mapping)):
        model = from_module(source, example_inputs, partitioner=partitioner)
    else:
        model = load(source)
    with library_warnings_silenced():
        lowered = lower_planned(model, solver, alignment, cat_fusion, time_limit_s)
        arenas = stock_arenas(model, alignment) if stock else {}
        verdict = None
        if check:
            runtime.check_outputs(model, lowered.program.buffer)
            verdict = True
    methods = [m for m in call_order(model) if m in lowered.planner_pass.results]
    emitted = runtime.stock_arena_bytes(lowered.program)
    rows = []
    for method in methods:
        result = lowered.planner_pass.results[method]
        arena = sum(emitted[method])
        rows.append(
            {
                "method": method,
                "buffers": len(result.problem.buffers),
                "lower_bound_bytes": lower_bound(result.problem),
                "arena_bytes": arena,
                "stock_arena_bytes": arenas.get(method),
                "saving_vs_stock": (1 - arena / arenas[method]) if arenas.get(method) else None,
                "proven_optimal": bool(result.plan.proven_optimal),
                "plan_solver": result.plan.solver,
                "solve_seconds": result.plan.seconds,
            }
        )
    summary = pd.DataFrame(rows)
    return PlannedModel(
        model, solver, lowered.program, lowered.planner_pass.results, methods, arenas, summary, verdict
    )
