"""With tiling on, every exported program a flow hands to `to_edge` or `to_edge_transform_and_lower`
is tiled first, method by method (memplan.planner.tiling.tile).

Tiling adds ops, so it must happen on the ATen program, before lowering (docs/tiling.md): by
`to_executorch`, where the rest of the substitution acts, the graph is out-variant and under a
delegate its convolutions are inside blobs. The two entry points are plain functions a flow imports
under its own names, so for the block every module binding one of them (`executorch.exir`, the
script's own globals once it imports them, flows imported before) is rebound to a wrapper, and
restored afterwards.

The user's export never breaks because of tiling: a method whose tiling fails is lowered untiled and
the failure is kept as that method's note. Only the flow's own call tiles: ExecuTorch's code calls the
entry points itself while lowering (with the per-op XNNPACK partitioner, on pieces of the program), and
those calls pass through untouched. What was done waits in `pending` until the next
`to_executorch` takes it, for the `PlannerPass` that plans the method to report.

The search runs at that call, before the script's `MemoryPlanningPass` exists, so it guesses who holds
the graph's input (`TilingOptions.input_in_arena`, `--tiling-input`). Each call's arguments are kept
with the manager it returned: when `to_executorch` finds the script's pass says otherwise and the
manager still holds the programs that call made, `relower` tiles the programs again under the pass's
answer and lowers them again into the same manager object.
"""

from __future__ import annotations

import dataclasses
import functools
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import executorch.exir as exir_api
from torch.export import ExportedProgram

from memplan.planner.tiling import TilingOptions, TilingReport, tile
from memplan.planner.tiling.partitioned import partitioned

ENTRY_POINTS = ("to_edge", "to_edge_transform_and_lower")
"""The functions of `executorch.exir` that take a flow's exported programs (each rebound by identity
wherever a module holds it, `exir.program._program` included)."""


@dataclass(frozen=True)
class Lowering:
    """One flow call of an entry point: the function, what it was given (untiled), and the ids of the
    edge programs the manager it returned held then (a transform since replaces them)."""

    entry: Callable[..., Any]
    name: str  # the entry point's name in `ENTRY_POINTS`
    programs: Any
    args: tuple
    kwargs: dict[str, Any]
    made: dict[str, int]


class EdgeTiling:
    """Tiles the programs of each `to_edge`-like call; `pending` holds, per method, the report (or why
    tiling failed) until `take` hands them to the `to_executorch` that plans those methods; `retiled`
    the methods `relower` searched again."""

    def __init__(self, options: TilingOptions) -> None:
        self.options = options
        self.pending: dict[str, TilingReport | str] = {}
        self.retiled: set[str] = set()
        self.depth = 0  # entry-point calls under way: only the outermost (the flow's own) tiles
        self.lowerings: dict[int, Lowering] = {}  # id(manager returned) -> the call that made it

    def programs(self, programs: Any, partitioner: Any = None) -> Any:
        """`programs` (one program, or a dict method -> program) with each method tiled; `partitioner`
        as the entry point takes it (a list, or a dict method -> list), for the search's costs."""
        if isinstance(programs, dict):
            return {
                name: self.method(name, program, _of_method(partitioner, name))
                for name, program in programs.items()
            }
        return self.method("forward", programs, _of_method(partitioner, "forward"))

    def method(self, name: str, program: Any, partitioners: list[Any] | None = None) -> Any:
        """`program` tiled, or as given when tiling fails (the failure kept as the method's note)."""
        if not isinstance(program, ExportedProgram):
            self.pending[name] = f"not tiled: {type(program).__name__} is not an ExportedProgram"
            return program
        try:
            options = self.options
            if partitioners:  # the search counts what these partitioners leave in the arena
                options = dataclasses.replace(options, partitioned=partitioned(program, partitioners))
            tiled = tile(program, options)
        except Exception as e:  # never the user's export: this method is lowered untiled
            text = str(e).strip().splitlines()
            why = f"{type(e).__name__}: {text[0]}" if text else type(e).__name__
            self.pending[name] = f"tiling failed ({why}); lowered untiled"
            return program
        self.pending[name] = tiled.report
        return tiled.program

    def take(self, methods: list[str]) -> dict[str, TilingReport | str]:
        """What was done to `methods` since the last `take` (and forget it)."""
        return {name: self.pending.pop(name) for name in methods if name in self.pending}

    def relower(self, manager: Any, input_in_arena: bool) -> bool:
        """Tile the programs that made `manager` again with the input held as the script's pass says,
        and lower them again into `manager` (its state replaced by the new call's); False, leaving it
        as it is, when no entry point made it or its edge programs changed since."""
        made = self.lowerings.get(id(manager))
        if made is None or _program_ids(manager) != made.made:
            return False
        again = EdgeTiling(dataclasses.replace(self.options, input_in_arena=input_in_arena))
        self.depth += 1  # ExecuTorch's own calls inside reach the wrappers: they pass through
        try:
            tiled = again.programs(made.programs, _partitioner(made.name, made.args, made.kwargs))
            fresh = made.entry(tiled, *made.args, **made.kwargs)
        finally:
            self.depth -= 1
        manager.__dict__.update(fresh.__dict__)
        self.lowerings[id(manager)] = dataclasses.replace(made, made=_program_ids(manager))
        self.pending.update(again.pending)
        self.retiled.update(again.pending)
        return True

    def wrapped(self, original: Callable[..., Any], name: str) -> Callable[..., Any]:
        """`original` (the entry point `name`) tiling the flow's programs first."""

        @functools.wraps(original)
        def entry(programs: Any, *args: Any, **kwargs: Any) -> Any:
            if self.depth:  # called by ExecuTorch itself inside the flow's call: not the user's program
                return original(programs, *args, **kwargs)
            self.depth += 1
            try:
                manager = original(self.programs(programs, _partitioner(name, args, kwargs)), *args, **kwargs)
            finally:
                self.depth -= 1
            if hasattr(manager, "_edge_programs"):
                self.lowerings[id(manager)] = Lowering(
                    original, name, programs, args, kwargs, _program_ids(manager)
                )
            return manager

        entry.__wrapped_by_memplan__ = original  # type: ignore[attr-defined]
        return entry


def _program_ids(manager: Any) -> dict[str, int]:
    return {name: id(program) for name, program in manager._edge_programs.items()}


@contextmanager
def tiling_entry_points(tiling: EdgeTiling) -> Iterator[None]:
    """Inside the block, `to_edge` and `to_edge_transform_and_lower` tile first, wherever bound."""
    originals = {name: getattr(exir_api, name) for name in ENTRY_POINTS}
    pairs = [(original, tiling.wrapped(original, name)) for name, original in originals.items()]
    rebound = _rebind({id(original): wrapper for original, wrapper in pairs})
    try:
        yield
    finally:
        for module, name, original in rebound:
            setattr(module, name, original)
        # modules imported inside the block (a script's globals) bound the wrappers themselves
        _rebind({id(wrapper): original for original, wrapper in pairs})


def _rebind(replacements: dict[int, Callable[..., Any]]) -> list[tuple[Any, str, Any]]:
    """Every module attribute that is one of `replacements`' keys (by identity) set to its value;
    the (module, name, previous value) rebound."""
    rebound = []
    for module in list(sys.modules.values()):
        try:
            names = [n for n, v in vars(module).items() if id(v) in replacements]
        except TypeError:  # a module object without a __dict__
            continue
        for name in names:
            previous = getattr(module, name)
            setattr(module, name, replacements[id(previous)])
            rebound.append((module, name, previous))
    return rebound


def _partitioner(entry: str, args: tuple, kwargs: dict[str, Any]) -> Any:
    """The `partitioner` argument of `to_edge_transform_and_lower(programs, transform_passes,
    partitioner, ...)` (None for `to_edge`, which takes none)."""
    if entry != "to_edge_transform_and_lower":
        return None
    return kwargs["partitioner"] if "partitioner" in kwargs else (args[1] if len(args) > 1 else None)


def _of_method(partitioner: Any, name: str) -> list[Any] | None:
    """The partitioners lowering method `name`: a dict's entry for it, or the one list for all."""
    if isinstance(partitioner, dict):
        partitioner = partitioner.get(name)
    return list(partitioner) if partitioner else None
