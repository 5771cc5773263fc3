"""Any program, not just the zoo: a zoo name, a `.pt2` file, or `path/file.py:factory`
(`memplan.plan_model`, in experiments.planning, plans one).

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

import dataclasses
import hashlib
import importlib.util
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch
from torch import nn

from memplan.errors import UsageError
from memplan.experiments.checks import MODEL_HINT, PT2_SUFFIX, check_choice, check_regular_file, did_you_mean
from memplan.experiments.zoo import ZooModel
from memplan.experiments.zoo.model_errors import where

PARTITIONERS = ("xnnpack",)


class ProgramSpecError(UsageError):
    """A program spec names nothing that can be loaded; the message says what was tried."""


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

    check_choice("model", spec, zoo.names(), hint=MODEL_HINT)
    return zoo.get(spec)


def with_lowering(
    model: ZooModel,
    partitioner: str | None = None,
    convert_linear: bool | None = None,
    const_prop: bool | None = None,
) -> ZooModel:
    """`model`, lowered as asked: each option given (not None) replaces what the model says."""
    from memplan.experiments.zoo.models.common import CONST_PROP

    changes: dict[str, Any] = {}
    if partitioner is not None:
        check_choice("partitioner", partitioner, PARTITIONERS)
        changes["partitioner"] = partitioner
    if convert_linear is not None:
        changes["convert_to_linear"] = convert_linear
    if const_prop is not None:
        config = {k: v for k, v in model.backend_config.items() if k != CONST_PROP}
        changes["backend_config"] = {**config, CONST_PROP: True} if const_prop else config
    return dataclasses.replace(model, **changes) if changes else model


def lowering_text(
    partitioner: str | None = None, convert_linear: bool | None = None, const_prop: bool | None = None
) -> str:
    """The options of `with_lowering` as one string (a sweep run carries it): "" when none is given."""
    parts = [] if partitioner is None else [f"partitioner={partitioner}"]
    parts += [
        f"{name}={int(flag)}"
        for name, flag in (("convert_linear", convert_linear), ("const_prop", const_prop))
        if flag is not None
    ]
    return ",".join(parts)


def lowering_options(text: str) -> dict[str, Any]:
    """`lowering_text`'s string back to `with_lowering`'s keyword arguments."""
    options: dict[str, Any] = {}
    for part in filter(None, text.split(",")):
        name, value = part.split("=", 1)
        options[name] = value if name == "partitioner" else bool(int(value))
    return options


def from_module(
    methods: nn.Module | Mapping[str, tuple[nn.Module, tuple]],
    example_inputs: tuple | None = None,
    name: str = "model",
    **options: Any,
) -> ZooModel:
    """A ZooModel for one module and its example inputs, or a dict of methods.

    Each method is called once, with its example inputs, in the check. `options` are ZooModel fields
    (partitioner="xnnpack", atol, rtol, backend_config, ...); without them the program is lowered
    exactly as given (plain `to_edge`, no extra pass).
    """
    if isinstance(methods, nn.Module):
        if example_inputs is None:
            raise ProgramSpecError(f"{name}: a module needs example inputs (a tuple of tensors)")
        if not isinstance(example_inputs, (tuple, list)):
            raise ProgramSpecError(
                f"{name}: example inputs must be a tuple of tensors, got a {type(example_inputs).__name__}"
            )
        methods = {"forward": (methods, tuple(example_inputs))}
    if not methods:
        raise ProgramSpecError(f"{name}: no methods; give at least one {{name: (module, example_inputs)}}")
    table = {}
    for method, entry in methods.items():
        if not (isinstance(method, str) and method.isidentifier()):
            raise ProgramSpecError(f"{name}: method name {method!r} must be a Python identifier string")
        if not (isinstance(entry, tuple) and len(entry) == 2 and isinstance(entry[0], nn.Module)):
            raise ProgramSpecError(f"{name}: method {method!r} must be (module, example_inputs)")
        if not isinstance(entry[1], (tuple, list)):
            raise ProgramSpecError(
                f"{name}: method {method!r}: example inputs must be a tuple of tensors,"
                f" got a {type(entry[1]).__name__}"
            )
        table[method] = (_eval(entry[0]), tuple(entry[1]))
    calls = [(method, inputs) for method, (_, inputs) in table.items()]
    if len(table) > 1:
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
    """Import `path` as a module and build the program from `factory()`, with the file's folder first on
    `sys.path` meanwhile, as Python runs a script: the file imports the modules beside it."""
    path = Path(path)
    check_regular_file(path, f" (in spec {str(path)}:{factory})", ProgramSpecError)
    saved_path = list(sys.path)
    sys.path.insert(0, str(path.resolve().parent))
    try:
        return _from_factory(path, factory)
    finally:
        sys.path[:] = saved_path


def _from_factory(path: Path, factory: str) -> ZooModel:
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
        except (Exception, SystemExit) as exc:
            del sys.modules[module_name]
            raise ProgramSpecError(f"importing {str(path)!r} failed: {type(exc).__name__}: {exc}") from exc
    fn = getattr(module, factory, None)
    if not callable(fn):
        found = [n for n in vars(module) if callable(getattr(module, n)) and not n.startswith("_")]
        raise ProgramSpecError(f"{str(path)!r} has no function {factory!r}{did_you_mean(factory, found)}")
    name = f"{path.stem}:{factory}"
    try:
        made = fn()
    except SystemExit as exc:  # a script's main() called as a factory: never memplan's own exit
        raise ProgramSpecError(
            f"{name}() called sys.exit({exc.code!r}) instead of returning a program"
        ) from None
    except Exception as exc:
        raise ProgramSpecError(f"{name}() failed{where(exc)}: {type(exc).__name__}: {exc}") from exc
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
    """A program saved with `torch.export.save`: re-exported from its module with its example inputs,
    and with its dynamic dimensions (`saved_dynamic_shapes`)."""
    path = Path(path)
    check_regular_file(path, error=ProgramSpecError)
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
    dynamic = saved_dynamic_shapes(exported, path)
    options = {"dynamic_shapes": {"forward": dynamic}} if dynamic is not None else {}
    return from_module(exported.module(), tuple(args), name=path.stem, **options)


def saved_dynamic_shapes(exported: Any, path: Path) -> tuple | None:
    """The `Dim`s the program was saved with, per positional input (None when every shape is static), so
    it is re-exported dynamic and planned at the upper bounds, as ExecuTorch plans it. A dimension
    without an upper bound, or dynamic inside a nested input, is refused naming it (never re-exported
    static in silence)."""
    from torch.export import Dim
    from torch.utils._sympy.numbers import int_oo

    placeholders = {n.name: n for n in exported.graph.nodes if n.op == "placeholder"}
    args, _ = exported.example_inputs
    user_inputs = list(exported.graph_signature.user_inputs)
    dims: dict[str, Any] = {}
    shapes: list[dict[int, Any] | None] = []
    for index, (arg, name) in enumerate(zip(args, user_inputs)):
        value = placeholders[name].meta.get("val") if name in placeholders else None
        symbolic = {
            d: size for d, size in enumerate(getattr(value, "shape", ())) if isinstance(size, torch.SymInt)
        }
        if symbolic and not isinstance(arg, torch.Tensor):
            raise ProgramSpecError(
                f"{str(path)!r}: input {index} is nested and has dynamic dimensions; unsupported"
            )
        spec = {}
        for d, size in symbolic.items():
            expr = size.node.expr
            bounds = exported.range_constraints.get(expr)
            if bounds is None or not expr.is_symbol:
                raise ProgramSpecError(
                    f"{str(path)!r}: input {index} dimension {d} is {expr}, not one Dim; save it with a plain Dim"
                )
            if bounds.upper is int_oo or bounds.upper == float("inf"):
                raise ProgramSpecError(
                    f"{str(path)!r}: input {index} dimension {d} ({expr}) has no upper bound; ExecuTorch plans"
                    " memory at the upper bound: save it with Dim(..., max=N)"
                )
            name = str(expr)
            dims.setdefault(name, Dim(f"dim_{name}", min=int(bounds.lower), max=int(bounds.upper)))
            spec[d] = dims[name]
        shapes.append(spec or None)
    return tuple(shapes) if dims else None
