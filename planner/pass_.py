"""`PlannerPass`: a drop-in replacement for ExecuTorch's `MemoryPlanningPass`.

    edge.to_executorch(ExecutorchBackendConfig(
        memory_planning_pass=PlannerPass(solver="cpsat", time_limit_s=10)))

A composition of stages (planner.stages), one job each, as TVM's unified
static memory planner composes its passes. Per method, the graph levers
rewrite the graph (`stages.run_levers`: reorder, state in place); then per graph and
control-flow submodule (`stages.plan_graph`): extract (`stages.constrain`:
the tensors as the problem the given algorithm plans) -> levers
(`stages.run_levers`: each lever decides and reshapes the problem) -> solve
(`stages.solve`: memplan's plan unless the reference is better) -> apply
(`stages.apply`: the plan into the TensorSpecs, validated first; the levers
rewrite the graph) -> verify (`stages.verify`: ExecuTorch's checks); the
method is then registered for the state shared across methods
(`stages.shared_state`). The algorithm and solver are read once
(`stages.solver`). The per-method dict form of `memory_planning_pass` works
too. Problems and plans stay available as `pass_.results[method].problem` /
`.plan`.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Sequence
from typing import Any

import torch
from executorch.exir.banked_memory_planning import TargetMemoryMap
from executorch.exir.pass_base import PassResult
from executorch.exir.passes.memory_planning_pass import MemoryPlanningPass
from executorch.exir.tensor import ALIGNMENT
from torch.export.exported_program import ExportGraphSignature

from memplan import solvers
from memplan.errors import PlanningError
from memplan.planner.algorithms.translation import Translation
from memplan.planner.compat import export_context
from memplan.planner.graph.extract import ExtractionError
from memplan.planner.graph.signature import frozen
from memplan.planner.levers.cat.lever import CatFusionOptions
from memplan.planner.levers.elementwise_in_place.lever import ElementwiseInPlaceOptions
from memplan.planner.levers.registry import configured, lever_arguments
from memplan.planner.levers.reorder.lever import ReorderOptions
from memplan.planner.levers.slice_noop.lever import SliceNoopOptions
from memplan.planner.levers.state_in_place.lever import StateInPlaceOptions
from memplan.planner.stages.plan_graph import Planning, plan_graph, rewrite_graph
from memplan.planner.stages.proof_check import check_proofs
from memplan.planner.stages.result import MethodResult
from memplan.planner.stages.shared_state import (
    SharedLayout,
    check_default_mem_ids,
    finish_session,
    lay_out,
    register,
    reject_foreign_planners,
    share_layout,
    shares,
)
from memplan.planner.stages.solver import algorithm
from memplan.planner.stages.stock import with_shared_state_arena
from memplan.planner.stages.verify import verify_method
from memplan.planner.tiling import TilingOptions, TilingReport, tile, tiling_options
from memplan.planner.tiling.partitioned import partitioned


class PlannerPass(MemoryPlanningPass):
    """Memory planning by a memplan solver; `MemoryPlanningPass`'s signature, same meanings.

    `memory_planning_algo` (positional, first, as in stock) is honoured
    (memplan.planner.algorithms.translate): ExecuTorch's algorithms (`greedy`, `naive`,
    `BankedGreedy(target)`, `MemplanAlgorithm(solver)`) are translated into memplan's problem and
    planned by memplan's solver, and the given algorithm's plan is kept unless memplan's is better
    (both validated); one memplan cannot translate is run as given and its plan validated.
    `results[method].note` says what happened. Left out, it is a suite of memplan's own algorithm.
    `allow_lifetime_and_storage_overlap` and `enable_non_cpu_memory_planning` mean what they mean
    in stock (planner.memory.devices numbers device arenas as stock does).
    `PlannerPass()` runs CP-SAT for at most 5 s per method, starting from the best-fit plan, and
    never returns a plan larger than best-fit's or than ExecuTorch's own greedy (solvers.fallback).
    `share_mutable_buffers=None` (the default) shares mutable state across methods exactly when the
    program has more than one method (stages.shared_state); a single method keeps its state in
    arena 1, like stock. `capacity` (bytes per arena) makes planning fail with the tensors that do
    not fit instead of returning a larger plan. `memory_map` (ExecuTorch's `TargetMemoryMap`) plans
    across its banks, the traffic kept in the fastest banks (planner.memory.bank_maps, docs/banks.md).

    The levers, each on by default and described in its own package (registered in
    planner.levers.registry): `cat_fusion` (planner.levers.cat; `cat_fusion_relax_alignment`,
    `cat_fusion_partial`, `cat_fusion_allow_growth` set its options' fields), `state_in_place`
    (planner.levers.state_in_place, docs/state_in_place.md), `slice_noop` (planner.levers.slice_noop,
    docs/slice_noop.md), `reorder` (planner.levers.reorder: the exported order given back after lowering, each
    instruction run just before its first user where no lifetime grows; first, before the others;
    docs/executorch_integration.md; None: on exactly when `tiling` is), `elementwise_in_place`
    (planner.levers.elementwise_in_place: an elementwise instruction's output written over the input
    it reads last, e.g. an int8 ReLU6 over its convolution's output; None: on exactly when `tiling` is);
    each takes a bool or its options object. The keywords are written out
    here, not generated, so IDEs, mypy and `inspect.signature` (memplan.planner.substitute) see
    them; tests/planner/levers/test_registry.py holds them to the registry both ways.
    `tiling` (True or a `TilingOptions`) is a transform of the exported program: call
    `pass_.tile(exported_program, method)` before `to_edge` (planner.tiling, docs/tiling.md).
    """

    def __init__(
        self,
        memory_planning_algo: Callable[..., Any] | None = None,
        allow_lifetime_and_storage_overlap: bool = False,
        alloc_graph_input: bool = True,
        alloc_graph_output: bool = True,
        alloc_mutable_buffers: bool = True,
        share_mutable_buffers: bool | None = None,
        alignment: int = ALIGNMENT,
        *,
        solver: str = solvers.DEFAULT_SOLVER,
        time_limit_s: float | None = solvers.DEFAULT_TIME_LIMIT_S,
        solver_options: dict[str, Any] | None = None,
        capacity: int | None = None,
        cat_fusion: bool | CatFusionOptions = True,
        cat_fusion_relax_alignment: bool | None = None,
        cat_fusion_partial: bool | None = None,
        cat_fusion_allow_growth: bool | None = None,
        memory_map: TargetMemoryMap | None = None,
        state_in_place: bool | StateInPlaceOptions = True,
        slice_noop: bool | SliceNoopOptions = True,
        reorder: bool | ReorderOptions | None = None,
        elementwise_in_place: bool | ElementwiseInPlaceOptions | None = None,
        tiling: bool | TilingOptions | None = None,
    ) -> None:
        if reorder is None:  # a tiled graph needs its band order back after lowering (levers.reorder)
            reorder = tiling_options(tiling) is not None
        if elementwise_in_place is None:  # the tiling search counts on it (TilingOptions)
            elementwise_in_place = tiling_options(tiling) is not None
        lever_keywords = lever_arguments(locals())  # first, while only the arguments are local
        if share_mutable_buffers and not alloc_mutable_buffers:
            raise PlanningError("share_mutable_buffers is only meaningful when alloc_mutable_buffers is True")
        options = dict(solver_options or {})
        self.algorithm = algorithm(memory_planning_algo, solver, time_limit_s, options, capacity, memory_map)
        self.levers = configured(lever_keywords)
        super().__init__(
            self.algorithm.given,
            allow_lifetime_and_storage_overlap=allow_lifetime_and_storage_overlap,
            alloc_graph_input=alloc_graph_input,
            alloc_graph_output=alloc_graph_output,
            alloc_mutable_buffers=alloc_mutable_buffers,
            share_mutable_buffers=bool(share_mutable_buffers),
            alignment=alignment,
        )
        self.share_mutable_buffers: bool | None = share_mutable_buffers  # type: ignore[assignment]
        self.results: dict[str, MethodResult] = {}
        self.shared_state: SharedLayout | None = None
        self.tiling = tiling_options(tiling)
        self.tiling_reports: dict[str, TilingReport] = {}  # method -> what `tile` did to it
        self.tiling_failures: dict[str, str] = {}  # method -> why it was lowered untiled (memplan run)

    def run(
        self,
        graph_module: torch.fx.GraphModule,
        graph_signature: ExportGraphSignature | None = None,
    ) -> PassResult:
        context = export_context()
        method = context.method if context else self._fallback_name()
        share = shares(self.alloc_mutable_buffers, self.share_mutable_buffers, context)
        self._set_alloc_node_spec(graph_module)
        if share and graph_signature is not None and self.algorithm.memory_map is None:
            check_default_mem_ids(graph_module)
        flags = (self.alloc_graph_input, self.alloc_graph_output, self.alloc_mutable_buffers and not share)
        devices = self.enable_non_cpu_memory_planning
        planning = Planning(self.algorithm, self.levers, self.alignment, devices)
        reports, before = rewrite_graph(
            planning, graph_module, graph_signature, flags, self.alloc_mutable_buffers
        )
        result = plan_graph(planning, graph_module, graph_signature, method, flags)
        result.reports.update(reports)
        if self.tiling is not None:
            result.attach_tiling(self.tiling_reports.get(method), self.tiling_failures.get(method))
        layout = functools.partial(lambda: self.shared_state if share else None)
        result.stock = functools.partial(
            with_shared_state_arena, result.stock if before is None else before, layout
        )
        self.results[method] = result
        checked = frozen(graph_signature)  # after cat fusion renamed outputs
        translation = self.algorithm.translation
        verify_method(
            graph_module,
            checked,
            flags,
            storage_reuse=isinstance(translation, Translation) and translation.check_storage_reuse,
            allow_lifetime_and_storage_overlap=self.allow_lifetime_and_storage_overlap,
        )
        if checked is not None:
            register(self, context.key if context else None, method, graph_module, checked, share)
        return PassResult(graph_module, True)

    def tile(
        self,
        program: torch.export.ExportedProgram,
        method: str = "forward",
        partitioner: Sequence[Any] | None = None,
    ) -> torch.export.ExportedProgram:
        """`program` with its best regions tiled by this pass's `tiling` options (before `to_edge`); the
        search counts the input in the arena only when this pass allocates it (`alloc_graph_input`),
        and elementwise outputs written over their inputs only when its lever is on. `partitioner`: the
        partitioners the program will be lowered with (as given to `to_edge_transform_and_lower`), so
        the search counts the float tensors they leave in the arena (planner.tiling.partitioned)."""
        if self.tiling is None:
            raise PlanningError("tile() needs PlannerPass(tiling=True or TilingOptions(...))")
        in_place = any(lever.keyword == "elementwise_in_place" for lever in self.levers)
        lowering = dataclasses.replace(
            self.tiling,
            input_in_arena=self.alloc_graph_input,
            elementwise_in_place=in_place,
            alignment=self.alignment,
            partitioned=partitioned(program, partitioner) if partitioner else self.tiling.partitioned,
        )
        tiled = tile(program, lowering)
        self.tiling_reports[method] = tiled.report
        return tiled.program

    def run_multimethod(self) -> None:
        """Lay out the state shared by all methods of this export (first call only); then re-check
        every proof on the program about to be emitted (planner.stages.proof_check)."""
        context = export_context()
        session = finish_session()
        if session is not None:
            if context is not None:
                reject_foreign_planners(session, context.key)
            layout = lay_out(session)
            if layout is not None:
                share_layout(session, layout)
        if context is not None:
            check_proofs(self.results, context.key, self.alignment)

    def _fallback_name(self) -> str:
        return "forward" if "forward" not in self.results else f"method_{len(self.results)}"


__all__ = ["PlannerPass", "PlanningError", "MethodResult", "ExtractionError"]
