"""`PlannerPass`: a drop-in replacement for ExecuTorch's `MemoryPlanningPass`.

    edge.to_executorch(ExecutorchBackendConfig(
        memory_planning_pass=PlannerPass(solver="cpsat", time_limit_s=10)))

A composition of stages (planner.stages), one job each, as TVM's unified
static memory planner composes its passes. Per method, the graph levers
rewrite the graph (`stages.run_levers`: state in place); then per graph and
control-flow submodule: extract (`stages.constrain`: the tensors as the
problem the given algorithm plans) -> levers (`stages.run_levers`: each lever
decides and reshapes the problem) -> solve (`stages.solve`: memplan's plan
unless the reference is better) -> apply (`stages.apply`: the plan into the
TensorSpecs, validated first; the levers rewrite the graph) -> verify
(`stages.verify`: ExecuTorch's checks). The algorithm and solver are read
once (`stages.solver`). The per-method dict form of `memory_planning_pass`
works too. Problems and plans stay available as
`pass_.results[method].problem` / `.plan`.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import torch
from executorch.exir.banked_memory_planning import TargetMemoryMap
from executorch.exir.memory_planning import insert_calls_to_free
from executorch.exir.pass_base import PassResult
from executorch.exir.passes.memory_planning_pass import MemoryPlanningPass
from executorch.exir.tensor import ALIGNMENT
from torch.export.exported_program import ExportGraphSignature

from memplan import solvers
from memplan.errors import PlanningError
from memplan.planner.algorithms.translation import Translation, Untranslated
from memplan.planner.compat import ExportContext, export_context, merge_bufsizes
from memplan.planner.graph.extract import (
    Extraction,
    ExtractionError,
    control_flow_submodules,
    extract,
    state_buffers,
)
from memplan.planner.graph.signature import frozen
from memplan.planner.levers.cat.lever import CatFusionOptions
from memplan.planner.levers.lever import Site
from memplan.planner.levers.slice_noop.lever import SliceNoopOptions
from memplan.planner.levers.state_in_place.lever import StateInPlaceOptions
from memplan.planner.memory.bank_maps import state_pool as banked_state_pool
from memplan.planner.stages.apply import written
from memplan.planner.stages.constrain import constrained
from memplan.planner.stages.costs import Costs
from memplan.planner.stages.proof_check import check_proofs
from memplan.planner.stages.result import MethodResult
from memplan.planner.stages.run_levers import (
    Reshaped,
    configured,
    reshape,
    rewrite_after_plan,
    rewrite_before_extraction,
    switched_off,
)
from memplan.planner.stages.shared_state import (
    STATE_POOL,
    MethodState,
    SharedLayout,
    check_default_mem_ids,
    current_session,
    finish_session,
    lay_out,
    reject_foreign_planners,
    share_layout,
)
from memplan.planner.stages.solve import Graph, as_given, choose
from memplan.planner.stages.solver import algorithm
from memplan.planner.stages.stock import Stock, before_rewrite, stock_of, with_shared_state_arena
from memplan.planner.stages.verify import verify_method
from memplan.planner.tiling import TilingOptions, TilingReport, tile, tiling_options

Flags = tuple[bool, bool, bool]  # (alloc_graph_input, alloc_graph_output, alloc_mutable_buffers) of one graph


NOT_TILED_HERE = (
    "tiling: not applied; planned untiled. This pass runs inside to_executorch, after lowering, where it"
    " can only remove instructions (cat fusion, slice no-ops), not add the bands' ops (under a delegate"
    " the convolutions are inside its blobs): tile the exported program before to_edge with"
    " PlannerPass.tile(ep, method), or run the export under `memplan run --tiling`"
)
"""The note of a method planned with tiling on but handed over untiled: what the pass did and did not."""


class PlannerPass(MemoryPlanningPass):
    """Memory planning by a memplan solver; `MemoryPlanningPass`'s signature, same meanings.

    `memory_planning_algo` (positional, first, as in stock) is honoured
    (memplan.planner.algorithms.translate): a suite of ExecuTorch's algorithms
    (`greedy`, `naive`, `BankedGreedy(target)`, `MemplanAlgorithm(solver)`)
    is translated into memplan's problem (a `BankedGreedy`'s memory map
    included) and planned by memplan's solver; the given algorithm also plans
    the same tensors and its plan is kept when better (both validated). One
    memplan cannot translate is run as given and its plan validated. The given
    algorithm's plan is replaced only by a better one (less bank traffic, fewer
    bytes, or as small with cats fused), so its exact offsets stay on a tie. Either
    way `results[method].note` says what happened. Left out, it is a suite
    of memplan's own algorithm, and `memory_planning_algo.algo_list[0]` reads
    work as in stock. `allow_lifetime_and_storage_overlap` relaxes the
    storage-reuse check, as in stock. With `enable_non_cpu_memory_planning`
    (set by `to_executorch`), each device gets its own arenas, numbered as
    stock numbers them (memplan.planner.memory.devices).
    `PlannerPass()` runs CP-SAT for at most 5 s per method, starting from the
    best-fit plan, and never returns a plan larger than best-fit's or than
    ExecuTorch's own greedy (solvers.fallback).
    `share_mutable_buffers=None` (the default) shares mutable state across
    methods exactly when the program has more than one method: the runtime
    gives all host-only methods of a program the same arenas, so state in one
    method's activation arena would be overwritten by another method's
    activations. A single method keeps its state in arena 1, like stock.
    `capacity` (bytes per arena) makes planning fail with the tensors that do
    not fit instead of returning a larger plan.
    `cat_fusion` places concatenated inputs back to back inside the cat output
    and removes the cat instruction where sound (memplan.planner.levers.cat), unless
    that makes the arena larger (`cat_fusion_allow_growth`); the relax/partial
    options are passed on to `cat.analysis.analyze`.
    `memory_map` (ExecuTorch's `TargetMemoryMap`) plans across its banks
    (planner.memory.bank_maps): every bank within its size, the traffic kept in the
    fastest banks; "greedy" and "bestfit" then mean banked_greedy (ExecuTorch's
    BankedGreedy) and banked_bestfit. Traffic is counted as the emitted
    program counts it (memplan.planner.memory.instruction_traffic: every instruction's tensor
    arguments, by bank); ExecuTorch's BankedGreedy also plans the tensors and
    its plan is kept unless memplan's moves no more bytes through slower banks,
    so the slow-bank traffic is never more than BankedGreedy's. Cat fusion is
    refused (TRAFFIC_GREW) when the fused plan moves more. State shared across
    methods goes to its own arena, one past every arena the map or a pin uses.
    `state_in_place` lets the op computing a mutable buffer's new value write
    it where the buffer lives and removes ExecuTorch's write-back `copy_`
    where that is legal; a copy that stays is moved up to right after the
    last reader of the old value (memplan.planner.levers.state_in_place).
    `slice_noop` places a slice/select/split output that is a contiguous run of
    its input inside the input and removes the copy where the graph shows the
    input's bytes stay put while the output is read (memplan.planner.levers.slice_noop);
    on by default since ExecuTorch's own tests pass with it (docs/slice_noop.md).
    `tiling` (True or a `TilingOptions`) computes a high-resolution CNN region one row band at a
    time (memplan.planner.tiling). It adds ops, so it is a transform of the exported program, not of
    the graph this pass sees (by then out-variant, and under XNNPACK the convolutions are inside
    delegates): call `pass_.tile(exported_program, method)` before `to_edge`; the pass then keeps
    the report in `results[method].reports["tiling"]`, and says in the note when a method was not
    tiled (docs/tiling.md).
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
        tiling: bool | TilingOptions | None = None,
    ) -> None:
        if share_mutable_buffers and not alloc_mutable_buffers:
            raise PlanningError("share_mutable_buffers is only meaningful when alloc_mutable_buffers is True")
        options = dict(solver_options or {})
        self.algorithm = algorithm(memory_planning_algo, solver, time_limit_s, options, capacity, memory_map)
        self.levers = configured(
            {
                "cat_fusion": cat_fusion,
                "cat_fusion_relax_alignment": cat_fusion_relax_alignment,
                "cat_fusion_partial": cat_fusion_partial,
                "cat_fusion_allow_growth": cat_fusion_allow_growth,
                "state_in_place": state_in_place,
                "slice_noop": slice_noop,
            }
        )
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

    # -- the pass ---------------------------------------------------------------
    def run(
        self,
        graph_module: torch.fx.GraphModule,
        graph_signature: ExportGraphSignature | None = None,
    ) -> PassResult:
        context = export_context()
        method = context.method if context else self._fallback_name()
        share = self._shares(context)
        self._set_alloc_node_spec(graph_module)
        if share and graph_signature is not None and self.algorithm.memory_map is None:
            check_default_mem_ids(graph_module)
        flags = (self.alloc_graph_input, self.alloc_graph_output, self.alloc_mutable_buffers and not share)
        site = Site(
            graph_module,
            frozen(graph_signature),
            graph_signature,
            self.alloc_mutable_buffers,
            outputs_planned=self.alloc_graph_output,
        )
        before: list[Stock] = []  # the stock figure of the graph before a graph lever changes it

        def before_change() -> None:
            if not control_flow_submodules(graph_module):
                before.append(
                    before_rewrite(graph_module, site.signature, self.algorithm, self.alignment, flags)
                )

        reports = rewrite_before_extraction(self.levers, site, before_change)
        result = self._plan_graph(graph_module, graph_signature, method, flags)
        result.reports.update(reports)
        self._note_tiling(result, method)
        layout = functools.partial(lambda: self.shared_state if share else None)
        result.stock = functools.partial(
            with_shared_state_arena, before[0] if before else result.stock, layout
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
            self._register(context, method, graph_module, checked, share)
        return PassResult(graph_module, True)

    def tile(
        self, program: torch.export.ExportedProgram, method: str = "forward"
    ) -> torch.export.ExportedProgram:
        """`program` with its best region tiled by this pass's `tiling` options (before `to_edge`)."""
        if self.tiling is None:
            raise PlanningError("tile() needs PlannerPass(tiling=True or TilingOptions(...))")
        tiled = tile(program, self.tiling)
        self.tiling_reports[method] = tiled.report
        return tiled.program

    def _note_tiling(self, result: MethodResult, method: str) -> None:
        """Attach the method's tiling report; say so when tiling was on but the method was not tiled."""
        if self.tiling is None:
            return
        report = self.tiling_reports.get(method)
        if method in self.tiling_failures:
            why = f"tiling: {self.tiling_failures[method]}"
        elif report is None:
            why = NOT_TILED_HERE
        else:
            result.reports["tiling"] = report
            why = f"tiling: {report.summary()}"
        result.note = f"{result.note}; {why}" if result.note else why

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

    # -- planning one graph ------------------------------------------------------
    def _plan_graph(
        self,
        graph_module: torch.fx.GraphModule,
        graph_signature: ExportGraphSignature | None,
        where: str,
        flags: Flags,
    ) -> MethodResult:
        """Plan `graph_module` and its control-flow submodules like `apply_algo`: extract -> levers ->
        solve -> apply (the module docstring).

        ExecuTorch's helpers read a `frozen` signature; only a lever's rewrite (cat fusion renames
        outputs in the program's own signature) gets `graph_signature`.
        """
        submodules: dict[str, MethodResult] = {}
        signature = frozen(graph_signature)

        def plan_submodules() -> list[int]:
            sizes: list[int] = []
            for node, sub_alloc_input in control_flow_submodules(graph_module):
                target = str(node.target)
                sub = getattr(graph_module, target)
                res = self._plan_graph(
                    sub, graph_signature, f"{where}/{target}", (sub_alloc_input, True, True)
                )
                sub.meta["non_const_buffer_sizes"] = res.buffer_sizes
                submodules[target] = res
                merge_bufsizes(sizes, res.buffer_sizes)
            return sizes

        alloc_input, alloc_output, alloc_mutable = flags
        ex = extract(
            graph_module,
            signature,
            alignment=self.alignment,
            alloc_graph_input=alloc_input,
            alloc_graph_output=alloc_output,
            alloc_mutable_buffers=alloc_mutable,
            submodules=plan_submodules,
            name=where,
        )
        devices = self.enable_non_cpu_memory_planning
        ex, arenas = constrained(ex, graph_module, where, self.algorithm, self.alignment, devices)
        stock = stock_of(ex, graph_module, signature, self.algorithm, self.alignment)  # needs specs unplanned
        graph = Graph(graph_module, signature, where, self.alignment, arenas)
        return self._planned(ex, graph, graph_signature, stock, submodules)

    def _planned(
        self,
        ex: Extraction,
        graph: Graph,
        graph_signature: ExportGraphSignature | None,
        stock: Stock,
        submodules: dict[str, MethodResult],
    ) -> MethodResult:
        """The constrained extraction through levers -> solve -> apply; the lever rewrites after."""
        graph_module, arenas = graph.graph_module, graph.arenas
        costs = Costs(ex, list(graph_module.graph.nodes))
        site = Site(
            graph_module,
            graph.signature,
            graph_signature,
            solve=functools.partial(self.algorithm.solver.solve, where=graph.where),
            cost=costs.of if self.algorithm.memory_map is not None else None,
        )
        if isinstance(self.algorithm.translation, Untranslated):
            reshaped, choice = Reshaped(ex), as_given(self.algorithm, graph, ex)
        else:
            reshaped = reshape(self.levers, site, ex, self.algorithm.shared_objects)
            choice = choose(self.algorithm, graph, reshaped, costs, switched_off(self.levers))
        planned, plan = choice.planned, choice.plan
        removed = reshaped.removed if choice.levers else frozenset()
        sizes = written(choice, arenas, graph_module, self.algorithm.memory_map)
        note = choice.note
        if arenas.devices:
            note += "; device arenas: " + ", ".join(
                planned.problem.pool_label(p) for p in sorted(arenas.devices)
            )
        insert_calls_to_free(graph_module, set(ex.specs))
        spec_of = reshaped.extraction.spec_of
        reports = rewrite_after_plan(reshaped, site, spec_of, plan) if choice.levers else {}
        graph_module.meta["non_const_buffer_sizes"] = sizes
        return MethodResult(
            planned.problem,
            plan,
            sizes,
            stock,
            submodules,
            reports,
            specs=dict(planned.spec_of),
            padding=ex.extra_padding,
            algorithm=self.algorithm.translation.name,
            note=note,
            arenas=arenas,
            traffic=costs.traffic(planned.problem, plan, removed),
        )

    # -- methods and shared state --------------------------------------------------
    def _shares(self, context: ExportContext | None) -> bool:
        if not self.alloc_mutable_buffers:
            return False
        if self.share_mutable_buffers is not None:
            return self.share_mutable_buffers
        return context is not None and context.num_methods > 1

    def _fallback_name(self) -> str:
        return "forward" if "forward" not in self.results else f"method_{len(self.results)}"

    def _register(
        self,
        context: ExportContext | None,
        method: str,
        graph_module: torch.fx.GraphModule,
        graph_signature: ExportGraphSignature,
        share: bool,
    ) -> None:
        """Record the method for `run_multimethod`; `graph_signature` is read only from here on."""
        session = current_session(context.key if context else None, method)
        memory_map = self.algorithm.memory_map
        session.methods[method] = MethodState(
            method=method,
            graph_module=graph_module,
            graph_signature=graph_signature,
            refs=state_buffers(graph_module, graph_signature, unplaced=share),
            num_nodes=len(graph_module.graph.nodes),
            alignment=self.alignment,
            shared=share,
            flags=(self.alloc_graph_input, self.alloc_graph_output),
            owner=self,
            state_pool=(
                STATE_POOL
                if memory_map is None
                else banked_state_pool(memory_map, self.results[method].problem)
            ),
        )


__all__ = ["PlannerPass", "PlanningError", "MethodResult", "ExtractionError"]
