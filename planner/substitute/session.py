"""`substituted(...)`: every program built inside the block is memory-planned by memplan.

ExecuTorch builds a program's memory plan in one place, `EdgeProgramManager.to_executorch`, whatever
pass a flow gives it: its own `MemoryPlanningPass(...)` (direct or a subclass), the
`ExecutorchBackendConfig` default (one instance made when ExecuTorch is imported), a per-method dict
(a missing method gets that default), or no config at all. The substitution wraps that one method for
the duration of the block, so every one of those binding sites — including instances built before the
block, and names a flow imported under its own spelling — reaches memplan's `PlannerPass`, made from
the stock pass's own arguments (substitute.swap).

The user's export never breaks because of memplan: the edge programs are copied first (tensors
shared), and a method memplan fails on is planned again by the stock pass (with every method sharing
state with it); if the program then still fails, the stock pass plans it all, and a failure of that
is the flow's own and is raised as it would be without memplan.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from executorch.exir import EdgeProgramManager, ExecutorchBackendConfig
from executorch.exir.passes.memory_planning_pass import MemoryPlanningPass

from memplan import solvers
from memplan.errors import UsageError
from memplan.planner.substitute.edge_tiling import EdgeTiling, tiling_entry_points
from memplan.planner.substitute.guard import GuardedPass, MethodFailed, fresh
from memplan.planner.substitute.results import MethodRow, ProgramResult, levers_applied
from memplan.planner.substitute.snapshot import manager_copy, programs_copy
from memplan.planner.tiling import TilingReport, tiling_options

_ACTIVE = threading.Lock()  # held while a substitution patches ExecuTorch (one at a time, any thread)


class Substitution:
    """The programs built inside one `substituted(...)` block (`programs`, in build order)."""

    def __init__(self, options: dict[str, Any], build_stock: bool) -> None:
        self.options = options
        self.build_stock = build_stock
        self.programs: list[ProgramResult] = []
        tiling = tiling_options(options.get("tiling"))
        self.tiling = EdgeTiling(tiling) if tiling is not None else None

    def to_executorch(self, original: Any, manager: EdgeProgramManager, config: Any) -> Any:
        """`original(manager, config)` with memplan planning each method; the stock pass where it must."""
        config = config if config else ExecutorchBackendConfig()
        methods = list(manager._edge_programs)
        stock_methods: dict[str, str] = {}
        if self.tiling is not None:
            _tile_as_the_pass_plans(self.tiling, manager, config, methods)
        tiled = self.tiling.take(methods) if self.tiling is not None else {}
        try:
            snapshot = programs_copy(manager._edge_programs)
        except Exception as e:  # without a copy there is no way back: the stock pass plans it all
            reason = f"memplan could not copy the edge programs to fall back on ({type(e).__name__}: {e})"
            stock_methods, snapshot = dict.fromkeys(methods, reason), None
        start = time.perf_counter()
        for attempt in range(1, len(methods) + 3):
            if attempt > 1 and snapshot is not None:
                manager._edge_programs = programs_copy(snapshot)
            guards = _guards(config, methods, self.options, stock_methods)
            _hand_over_tiling(guards, tiled)
            try:
                program = original(manager, dataclasses.replace(config, memory_planning_pass=guards.value))
                break
            except MethodFailed as failure:
                stock_methods = _fallen_back(failure, guards, methods, stock_methods)
            except Exception as e:
                if len(stock_methods) == len(methods):
                    raise  # the stock pass fails too: the flow's own error, as without memplan
                reason = f"the program memplan planned failed in to_executorch ({type(e).__name__}: {e})"
                stock_methods = dict.fromkeys(methods, reason)
        else:  # pragma: no cover - every attempt hands one more method to the stock pass
            raise AssertionError("no attempt left")
        result = ProgramResult(
            len(self.programs) + 1, [], time.perf_counter() - start, program, None, attempt
        )
        if self.build_stock and snapshot is not None:
            twin = manager_copy(manager)
            twin._edge_programs = snapshot
            result.stock_program = original(twin, _stock_config(config))
        result.methods = [_row(name, guards, program, result.stock_program) for name in methods]
        if self.tiling is not None:
            for row in result.methods:
                row.tiling = tiled.get(row.method, "not tiled: no to_edge call of this script tiled it")
                row.tiling_input_differs = _input_assumed_wrongly(guards, row.method, row.tiling)
                row.tiling_searched_again = row.method in self.tiling.retiled
        self.programs.append(result)
        return program


@dataclasses.dataclass
class _Guards:
    """The guarded passes of one attempt and the config value that hands them to `to_executorch`."""

    value: Any  # one GuardedPass, or a dict method -> GuardedPass
    of: dict[str, GuardedPass]  # method -> its guard


def _guards(
    config: Any, methods: list[str], options: dict[str, Any], stock_methods: dict[str, str]
) -> _Guards:
    """One GuardedPass per stock pass instance of `config`, as `to_executorch` looks them up."""
    given = config.memory_planning_pass
    if not isinstance(given, dict):
        guard = GuardedPass(given, options, stock_methods)
        return _Guards(guard, dict.fromkeys(methods, guard))
    made: dict[int, GuardedPass] = {}
    of = {}
    for name in methods:
        stock = _stock_pass(given, name)
        of[name] = made.setdefault(id(stock), GuardedPass(stock, options, stock_methods))
    return _Guards(dict(of), of)


def _stock_pass(given: dict[str, Any], method: str) -> Any:
    """The pass a per-method dict gives `method`: ExecuTorch's own default for a method not listed."""
    return given.get(method) or MemoryPlanningPass()


def _tile_as_the_pass_plans(tiling: EdgeTiling, manager: Any, config: Any, methods: list[str]) -> None:
    """Lower `manager`'s programs again, tiled for the input's real holder, when the search guessed
    wrong: the script's passes (one answer for every method) say who holds the graph's input."""
    given = config.memory_planning_pass
    passes = [_stock_pass(given, m) for m in methods] if isinstance(given, dict) else [given]
    held = {bool(getattr(p, "alloc_graph_input", True)) for p in passes}
    guessed = [
        r for m, r in tiling.pending.items() if m in methods and isinstance(r, TilingReport) and r.tiled
    ]
    if len(held) == 1 and any(r.options.input_in_arena not in held for r in guessed):
        tiling.relower(manager, held.pop())


def _input_assumed_wrongly(guards: _Guards, method: str, tiled: TilingReport | str) -> bool:
    """True when the search counted the graph's input in the arena and the script's pass leaves it to
    the caller, or the other way round (the search runs at `to_edge`, before the pass exists)."""
    planner = guards.of[method].planner if method in guards.of else None
    if planner is None or not isinstance(tiled, TilingReport):
        return False
    return tiled.options.input_in_arena != planner.alloc_graph_input


def _hand_over_tiling(guards: _Guards, tiled: dict[str, TilingReport | str]) -> None:
    """Give each method's PlannerPass what tiling did to it before lowering, for its results."""
    for method, done in tiled.items():
        planner = guards.of[method].planner if method in guards.of else None
        if planner is None:
            continue
        if isinstance(done, TilingReport):
            planner.tiling_reports[method] = done
        else:
            planner.tiling_failures[method] = done


def _fallen_back(
    failure: MethodFailed, guards: _Guards, methods: list[str], stock_methods: dict[str, str]
) -> dict[str, str]:
    """The methods the stock pass plans next time: the failed one, or every method sharing its state."""
    taken = dict(stock_methods)
    reason = f"memplan failed: {failure.reason}"
    if failure.method is None:
        return {**taken, **dict.fromkeys(methods, reason)}
    guard = guards.of.get(failure.method)
    taken[failure.method] = reason
    if guard is not None and guard.shares_state and len(methods) > 1:
        shared = (
            f"memplan failed on {failure.method!r} ({failure.reason}); its state is shared with this method"
        )
        for name, other in guards.of.items():
            if other is guard and name not in taken:
                taken[name] = shared
    return taken


def _stock_config(config: Any) -> Any:
    """`config` with fresh copies of its stock passes, to build the stock program beside memplan's."""
    given = config.memory_planning_pass
    value = {k: fresh(v) for k, v in given.items()} if isinstance(given, dict) else fresh(given)
    return dataclasses.replace(config, memory_planning_pass=value)


def _row(method: str, guards: _Guards, program: Any, stock_program: Any) -> MethodRow:
    guard = guards.of[method]
    planned = guard.planned.get(method)
    sizes = _emitted_sizes(program, method)
    stock_sizes = _emitted_sizes(stock_program, method) if stock_program is not None else None
    if planned is None or planned.planner != "memplan" or guard.planner is None:
        note = planned.note if planned else "its pass did not plan it"
        return MethodRow(
            method, "stock", stock_sizes or sizes, sizes, None, "", planned.seconds if planned else 0.0, note
        )
    result = guard.planner.results.get(method)
    if result is None:  # a subclass's own run did not call the base's
        return MethodRow(
            method,
            "stock",
            stock_sizes or sizes,
            sizes,
            None,
            "",
            planned.seconds,
            f"{type(guard.planner).__name__}.run planned it without memplan",
        )
    note = result.note if not result.note.startswith("memplan") and "translated" in result.note else ""
    return MethodRow(
        method,
        "memplan",
        stock_sizes if stock_sizes is not None else list(result.stock_sizes),
        sizes,
        result.plan.proven_optimal,
        levers_applied(result),
        planned.seconds,
        note,
        result,
    )


def _emitted_sizes(program: Any, method: str) -> list[int]:
    """`non_const_buffer_sizes` of `method` in an ExecutorchProgramManager."""
    for plan in program.executorch_program.execution_plan:
        if plan.name == method:
            return list(plan.non_const_buffer_sizes)
    raise KeyError(f"the program has no method {method!r}")


@contextmanager
def substituted(
    solver: str = solvers.DEFAULT_SOLVER,
    *,
    time_limit_s: float | None = solvers.DEFAULT_TIME_LIMIT_S,
    build_stock: bool = False,
    **options: Any,
) -> Iterator[Substitution]:
    """Inside the block, every `to_executorch` plans memory with memplan's `PlannerPass`.

        with memplan.substituted(solver="cpsat", time_limit_s=5) as run:
            exporter.export(model, inputs, config)          # any flow, unchanged
        run.programs[0].rows()                              # per method: stock vs memplan bytes

    `options` are PlannerPass's own keywords (`cat_fusion`, `state_in_place`, `memory_map`,
    `slice_noop`, `capacity`, `solver_options`, `tiling`, ...); with `tiling`, every exported program
    given to `to_edge` / `to_edge_transform_and_lower` is tiled first (substitute.edge_tiling) and its
    method's result reports it. The stock pass's arguments (`alloc_graph_input`,
    `share_mutable_buffers`, the algorithm, ...) are kept. A bad option fails here, before the flow
    runs. `build_stock=True` also builds each program with the stock pass (from a copy of the same
    edge programs), for an exact stock figure and for comparing the two programs.
    """
    options = {"solver": solver, "time_limit_s": time_limit_s, **options}
    from memplan.planner.pass_ import PlannerPass

    PlannerPass(**options)  # a bad solver or option fails now, not inside the user's export
    run = Substitution(options, build_stock)
    if not _ACTIVE.acquire(blocking=False):
        raise UsageError("memplan.substituted is already active (one substitution at a time)")
    try:
        original = EdgeProgramManager.to_executorch

        def to_executorch(self: EdgeProgramManager, config: Any = None) -> Any:
            return run.to_executorch(original, self, config)

        to_executorch.__doc__ = original.__doc__
        EdgeProgramManager.to_executorch = to_executorch  # type: ignore[method-assign]
        try:
            if run.tiling is None:
                yield run
            else:
                with tiling_entry_points(run.tiling):
                    yield run
        finally:
            EdgeProgramManager.to_executorch = original  # type: ignore[method-assign]
    finally:
        _ACTIVE.release()
