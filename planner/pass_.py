"""`PlannerPass`: a drop-in replacement for ExecuTorch's `MemoryPlanningPass`.

    edge.to_executorch(ExecutorchBackendConfig(
        memory_planning_pass=PlannerPass(solver="cpsat", time_limit_s=10)))

It extracts each method's `Problem` (planner.graph.extract), solves it with a
memplan solver, validates the plan, writes it into the TensorSpecs the way
`apply_algo` would, and checks the result with ExecuTorch's `Verifier`
semantics (planner.graph.storage_reuse: its storage-reuse check in O(n log n), its
graph input/output check as is). The
per-method dict form of `memory_planning_pass` works too. Problems and plans
stay available as `pass_.results[method].problem` / `.plan`.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import torch
import torch.utils._pytree as pytree
from executorch.exir.banked_memory_planning import BankedGreedy, TargetMemoryMap
from executorch.exir.memory_planning import (
    MemoryPlanningAlgorithmSuite,
    Verifier,
    insert_calls_to_free,
)
from executorch.exir.pass_base import PassResult
from executorch.exir.passes.memory_planning_pass import MemoryPlanningPass
from executorch.exir.tensor import ALIGNMENT, TensorSpec
from torch.export.exported_program import ExportGraphSignature

from memplan import solvers
from memplan.banks import traffic, traffic_cost
from memplan.errors import PlanningError, ProblemError, UnsupportedProblemError
from memplan.plan import Outcome, Plan
from memplan.planner.algorithms.given import GivenPlan, placed_by
from memplan.planner.algorithms.memplan_algorithm import MemplanAlgorithm
from memplan.planner.algorithms.translate import NO_FUSION, Translation, Untranslated, translate
from memplan.planner.compat import ExportContext, export_context, merge_bufsizes
from memplan.planner.graph.extract import (
    Extraction,
    ExtractionError,
    control_flow_submodules,
    extract,
    state_buffers,
)
from memplan.planner.graph.offsets import apply_plan
from memplan.planner.graph.signature import frozen
from memplan.planner.graph.storage_reuse import verify_storage_reuse
from memplan.planner.levers.cat.decisions import CatFusion
from memplan.planner.levers.cat.policy import plan_with_cat_fusion
from memplan.planner.levers.cat.report import CatReport
from memplan.planner.levers.cat.rewrite import fuse_cats
from memplan.planner.levers.slice_noop.analysis import analyze_slices
from memplan.planner.levers.slice_noop.decisions import SliceNoops
from memplan.planner.levers.slice_noop.rewrite import remove_noop_slices
from memplan.planner.levers.state_in_place import StateReport, StateStatus, analyze, rewrite
from memplan.planner.memory.bank_maps import bank_buffer_sizes, with_memory_map
from memplan.planner.memory.bank_maps import state_pool as banked_state_pool
from memplan.planner.memory.bank_maps import stock_sizes as banked_stock_sizes
from memplan.planner.memory.devices import DeviceArenas, place_zero_size, split_by_device, with_device_arenas
from memplan.planner.memory.instruction_traffic import argument_bytes
from memplan.planner.stages.shared_state import (
    STATE_POOL,
    MethodState,
    SharedLayout,
    check_default_mem_ids,
    current_session,
    finish_session,
    lay_out,
    reject_foreign_planners,
    with_state,
)
from memplan.problem import Problem


@dataclass
class MethodResult:
    """What the pass did for one method (or control-flow submodule).

    `buffer_sizes` is the `non_const_buffer_sizes` written into the program;
    `stock_sizes` is the `non_const_buffer_sizes` of the program ExecuTorch's
    own `MemoryPlanningPass` (under a memory map: its BankedGreedy; [] when
    that raises BankPlacementError) builds from the same edge program, for
    comparison: the write-backs as ExecuTorch emits them (the problem is taken
    before `state_in_place` rewrites them), and the shared-state arena when
    state is shared across methods (ExecuTorch's `share_mutable_buffers` lays
    it out the same way). Without a memory map it is computed on first use by
    memplan's byte-exact replica of that greedy (solvers.greedy), so the pass
    does not pay for the solve. In a method with control flow, the bytes
    reserved for its submodules are memplan's.
    """

    problem: Problem
    plan: Plan
    buffer_sizes: list[int]
    stock: Callable[[], list[int]] = field(repr=False)  # computes `stock_sizes`
    submodules: dict[str, MethodResult] = field(default_factory=dict)
    cat_report: CatReport | None = None  # set when cat fusion is on (memplan.planner.levers.cat)
    specs: dict[str, TensorSpec] = field(default_factory=dict)  # buffer id -> its TensorSpec
    padding: int = 0  # bytes added on top of every arena with tensors (XNNPACK)
    state_report: StateReport | None = (
        None  # set when state_in_place is on (memplan.planner.levers.state_in_place)
    )
    algorithm: str = (
        ""  # the algorithm given to the pass (memplan.planner.algorithms.translate.algorithm_name)
    )
    note: str = ""  # how it was honoured: translated (and whose plan was kept) or run as given
    arenas: DeviceArenas = field(default_factory=DeviceArenas)  # the device of each non-host arena
    slice_noops: SliceNoops | None = None  # set when slice_noop is on (memplan.planner.levers.slice_noop)
    # Bytes per arena of every instruction's tensor arguments, as the emitted program counts them
    # (planner.memory.instruction_traffic): what a memory map's fast banks serve.
    traffic: dict[int, int] = field(default_factory=dict)

    @cached_property
    def stock_sizes(self) -> list[int]:
        return self.stock()


@dataclass
class _Choice:
    """The plan chosen for one graph (`PlannerPass._choose`) and how it was chosen."""

    planned: Extraction  # the extraction the plan is for (cat fusion's problem when cats are fused)
    plan: Plan
    note: str
    fusion: CatFusion | None = None
    without: Plan | None = None  # the plan without cat fusion
    as_given: GivenPlan | None = None  # set when the given algorithm ran as given
    reference_kept: bool = False  # the reference algorithm's plan of the extraction before any lever


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
    off by default (docs/slice_noop.md).
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
        cat_fusion: bool = True,
        cat_fusion_relax_alignment: bool = False,
        cat_fusion_partial: bool = False,
        cat_fusion_allow_growth: bool = False,
        memory_map: TargetMemoryMap | None = None,
        state_in_place: bool = True,
        slice_noop: bool = False,
    ) -> None:
        solvers.entry(solver).make_params(dict(solver_options or {}))  # bad names fail here, not mid-export
        if share_mutable_buffers and not alloc_mutable_buffers:
            raise PlanningError("share_mutable_buffers is only meaningful when alloc_mutable_buffers is True")
        if memory_planning_algo is None:
            memory_planning_algo = MemoryPlanningAlgorithmSuite(
                algo_list=[MemplanAlgorithm(solver, time_limit_s, solver_options)]
            )
        self.translation = translate(memory_planning_algo)
        if isinstance(self.translation, Translation) and self.translation.solver is not None:
            solver, time_limit_s = self.translation.solver, self.translation.time_limit_s
            solver_options = dict(self.translation.solver_options)
        if isinstance(self.translation, Translation) and self.translation.memory_map is not None:
            if memory_map is not None and memory_map is not self.translation.memory_map:
                raise PlanningError(
                    f"memory_map was given twice: as an argument and by {self.translation.name}; give one"
                )
            memory_map = self.translation.memory_map
        if memory_map is not None:
            try:
                solvers.for_memory_map(solver)
            except UnsupportedProblemError as e:
                raise PlanningError(str(e)) from None
        super().__init__(
            memory_planning_algo,
            allow_lifetime_and_storage_overlap=allow_lifetime_and_storage_overlap,
            alloc_graph_input=alloc_graph_input,
            alloc_graph_output=alloc_graph_output,
            alloc_mutable_buffers=alloc_mutable_buffers,
            share_mutable_buffers=bool(share_mutable_buffers),
            alignment=alignment,
        )
        self.share_mutable_buffers: bool | None = share_mutable_buffers  # type: ignore[assignment]
        self.solver = solver
        self.time_limit_s = time_limit_s
        self.solver_options = dict(solver_options or {})
        self.capacity = capacity
        self.cat_fusion = cat_fusion
        self.cat_fusion_relax_alignment = cat_fusion_relax_alignment
        self.cat_fusion_partial = cat_fusion_partial
        self.cat_fusion_allow_growth = cat_fusion_allow_growth
        self.memory_map = memory_map
        self.state_in_place = state_in_place
        self.slice_noop = slice_noop
        self.results: dict[str, MethodResult] = {}
        self.shared_state: SharedLayout | None = None

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
        if share and graph_signature is not None and self.memory_map is None:
            check_default_mem_ids(graph_module)
        alloc_mutable = self.alloc_mutable_buffers and not share
        state_report, stock = None, None
        if self.state_in_place:
            state_report, stock = self._update_state_in_place(graph_module, graph_signature, alloc_mutable)
        result = self._plan_graph(
            graph_module,
            graph_signature,
            method,
            self.alloc_graph_input,
            self.alloc_graph_output,
            alloc_mutable,
        )
        result.state_report = state_report
        result.stock = functools.partial(self._with_shared_state_arena, stock or result.stock, share)
        self.results[method] = result
        checked = frozen(graph_signature)  # after cat fusion renamed outputs
        # An algorithm run as given keeps its mem_obj_ids; a translation may waive the check.
        if isinstance(self.translation, Translation) and self.translation.check_storage_reuse:
            verify_storage_reuse(
                graph_module,
                checked,
                alloc_graph_input=self.alloc_graph_input,
                alloc_graph_output=self.alloc_graph_output,
                alloc_mutable_buffers=alloc_mutable,
                allow_lifetime_and_storage_overlap=self.allow_lifetime_and_storage_overlap,
            )
        Verifier(
            graph_module, self.alloc_graph_input, self.alloc_graph_output, alloc_mutable, checked
        ).verify_graph_input_output()
        if checked is not None:
            self._register(context, method, graph_module, checked, share)
        return PassResult(graph_module, True)

    def run_multimethod(self) -> None:
        """Lay out the state shared by all methods of this export (first call only)."""
        context = export_context()
        session = finish_session()
        if session is None:
            return
        if context is not None:
            reject_foreign_planners(session, context.key)
        layout = lay_out(session)
        if layout is None:
            return
        for m in session.methods.values():
            if not m.shared:
                continue
            owner: PlannerPass = m.owner
            owner.shared_state = layout
            res = owner.results[m.method]
            res.problem, res.plan = with_state(res.problem, res.plan, m, layout)
            shared = {r.node: r.spec for r in m.refs if r.fqn in layout.offsets}
            moved = sum(argument_bytes(shared, m.graph_module.graph.nodes).values())
            res.traffic = {**res.traffic, layout.pool: res.traffic.get(layout.pool, 0) + moved}
            res.specs.update({r.node: r.spec for r in m.refs if r.fqn in layout.offsets})
            res.buffer_sizes = list(m.graph_module.meta["non_const_buffer_sizes"])

    # -- planning one graph ------------------------------------------------------
    def _plan_graph(
        self,
        graph_module: torch.fx.GraphModule,
        graph_signature: ExportGraphSignature | None,
        where: str,
        alloc_graph_input: bool,
        alloc_graph_output: bool,
        alloc_mutable_buffers: bool,
    ) -> MethodResult:
        """Plan `graph_module` and its control-flow submodules like `apply_algo`.

        ExecuTorch's helpers read a `frozen` signature; only `fuse_cats`, which
        renames outputs in the program's own signature, gets `graph_signature`.
        """
        submodules: dict[str, MethodResult] = {}
        signature = frozen(graph_signature)

        def plan_submodules() -> list[int]:
            sizes: list[int] = []
            for node, sub_alloc_input in control_flow_submodules(graph_module):
                target = str(node.target)
                sub = getattr(graph_module, target)
                res = self._plan_graph(sub, graph_signature, f"{where}/{target}", sub_alloc_input, True, True)
                sub.meta["non_const_buffer_sizes"] = res.buffer_sizes
                submodules[target] = res
                merge_bufsizes(sizes, res.buffer_sizes)
            return sizes

        ex = extract(
            graph_module,
            signature,
            alignment=self.alignment,
            alloc_graph_input=alloc_graph_input,
            alloc_graph_output=alloc_graph_output,
            alloc_mutable_buffers=alloc_mutable_buffers,
            submodules=plan_submodules,
            name=where,
        )
        ex, arenas = self._constrained(ex, graph_module, where)
        stock = self._stock(ex, graph_module, signature)
        noops, plain = None, ex
        if self.slice_noop and not self._shared_objects:  # before cat fusion: cats leave grouped slices alone
            noops = analyze_slices(graph_module, signature, ex)
            ex = dataclasses.replace(ex, problem=noops.problem)
        removed = frozenset(noops.nodes_removed) if noops else frozenset()
        costs = _Costs(plain, list(graph_module.graph.nodes), removed)
        choice = self._choose(ex, graph_module, signature, where, arenas, costs)
        planned, plan, fusion, note = choice.planned, choice.plan, choice.fusion, choice.note
        levers = not (choice.reference_kept or choice.as_given is not None)
        if not levers:
            noops = None  # the kept plan is of the graph with every slice's copy
        moved = costs.traffic(planned.problem, plan, fusion, levers)
        sizes = self._written(choice, arenas, graph_module)
        if arenas.devices:
            note += "; device arenas: " + ", ".join(
                planned.problem.pool_label(p) for p in sorted(arenas.devices)
            )
        insert_calls_to_free(graph_module, set(ex.specs))
        report = None
        if fusion is not None:
            report = CatReport.of(
                fusion, plan, choice.without, fuse_cats(graph_module, fusion, ex.spec_of, graph_signature)
            )
        if noops is not None:
            remove_noop_slices(graph_module, noops, ex.spec_of)
        graph_module.meta["non_const_buffer_sizes"] = sizes
        return MethodResult(
            planned.problem,
            plan,
            sizes,
            stock,
            submodules,
            report,
            dict(planned.spec_of),
            ex.extra_padding,
            algorithm=self.translation.name,
            note=note,
            arenas=arenas,
            slice_noops=noops,
            traffic=moved,
        )

    def _constrained(
        self, ex: Extraction, graph_module: torch.fx.GraphModule, where: str
    ) -> tuple[Extraction, DeviceArenas]:
        """The extraction with the memory map's banks, the algorithm's own constraints, its form and one
        pool per device; the submodule reservations set where ExecuTorch's algorithms read them."""
        if self.memory_map is not None:
            ex = with_memory_map(ex, graph_module, self.memory_map, self.alignment)
        if isinstance(self.translation, Translation) and self.translation.constrain is not None:
            ex = self.translation.constrain(ex, graph_module, where)
        ex = self._in_form(ex)
        arenas = DeviceArenas()
        if self.enable_non_cpu_memory_planning:
            ex, arenas = split_by_device(ex, where)
        reserved = [0] * (max(ex.reserved, default=0) + 1)
        for pool, size in ex.reserved.items():
            reserved[pool] = size
        graph_module.input_mem_buffer_sizes = reserved  # type: ignore[assignment]  # what ExecuTorch's greedy reads
        return ex, arenas

    def _written(
        self, choice: _Choice, arenas: DeviceArenas, graph_module: torch.fx.GraphModule
    ) -> list[int]:
        """Write the chosen plan into the specs; the `non_const_buffer_sizes` (and devices) to emit."""
        planned, plan = choice.planned, choice.plan
        sizes = apply_plan(planned, plan)
        if choice.as_given is not None:
            sizes = merge_bufsizes(sizes, choice.as_given.buffer_sizes)  # it may reserve more than it places
            # Its mem_obj_ids may mean more than shared bytes (Vulkan reads them as allocations).
            for spec, obj in choice.as_given.objects:
                spec.mem_obj_id = obj
        if arenas.devices:
            place_zero_size(planned, arenas)
            sizes = with_device_arenas(sizes, arenas)
            if (devices := arenas.buffer_devices(len(sizes))) is not None:
                graph_module.meta["non_const_buffer_device"] = devices
        if self.memory_map is not None:
            sizes = bank_buffer_sizes(sizes, planned.problem.banks, dict(plan.arena_sizes))
        return sizes

    def _choose(
        self,
        ex: Extraction,
        graph_module: torch.fx.GraphModule,
        signature: ExportGraphSignature | None,
        where: str,
        arenas: DeviceArenas,
        costs: _Costs,
    ) -> _Choice:
        """The plan of one graph: the given algorithm's run as given, or memplan's unless a reference is better.

        The reference is the given algorithm's own plan, or ExecuTorch's BankedGreedy under a
        memory map given by keyword; it plans `costs.plain` (the extraction before slice no-ops), as
        stock would. Plans are ordered by `_Costs`: under a memory map the emitted program's
        traffic cost comes first.
        """
        translation = self.translation
        plain = costs.plain

        def given(algorithm: Callable[..., Any], name: str, keep: bool) -> GivenPlan:
            return placed_by(
                algorithm, name, plain, graph_module, signature, self.alignment, arenas, keep=keep
            )

        if isinstance(translation, Untranslated):
            own = given(self.memory_planning_algo, translation.name, True)
            note = f"{translation.name} run as given ({translation.reason}); its plan passed validation"
            return _Choice(dataclasses.replace(plain, problem=own.problem), own.plan, note, as_given=own)
        reference: GivenPlan | str | None = None
        if translation.reference:
            reference = self._reference(functools.partial(given, self.memory_planning_algo, translation.name))
        elif self.memory_map is not None:
            banked = MemoryPlanningAlgorithmSuite(algo_list=[BankedGreedy(self.memory_map)])
            reference = self._reference(functools.partial(given, banked, "banked_greedy"))
        fusion, without = None, None
        if self.cat_fusion and not translation.shared_objects:
            fusion, plan, without = plan_with_cat_fusion(
                graph_module,
                signature,
                ex,
                lambda problem: self._solve(problem, where),
                relax_alignment=self.cat_fusion_relax_alignment,
                partial=self.cat_fusion_partial,
                allow_growth=self.cat_fusion_allow_growth or self.memory_map is not None,
                cost=(lambda f, p: costs.of(f.problem if f else ex.problem, p, f))
                if self.memory_map
                else None,
            )
            planned = dataclasses.replace(ex, problem=fusion.problem)
        else:
            plan, planned = self._solve(ex.problem, where), ex
        note = f"{translation.name}: planned by memplan {self.solver}"
        choice = _Choice(planned, plan, note, fusion, without)
        off = [
            name for name, on in (("cat fusion", self.cat_fusion), ("slice no-ops", self.slice_noop)) if on
        ]
        aside = f" ({' and '.join(off)} off: {NO_FUSION})" if translation.shared_objects and off else ""
        if isinstance(reference, str):
            choice.note = f"{translation.name} translated; its own plan was not kept: {reference}{aside}"
        elif reference is not None:
            mine = costs.of(choice.planned.problem, choice.plan, choice.fusion)
            theirs = costs.of(reference.problem, reference.plan, None, levers=False)
            choice.note = (
                f"{translation.name} translated; memplan {self.solver}: {_shown(mine)}, the reference"
                f" ({reference.plan.solver}): {_shown(theirs)}{aside}"
            )
            removes = costs.slices_removed or (choice.fusion is not None and bool(choice.fusion.removed))
            if theirs < mine or (theirs == mine and not removes):  # memplan's replaces it only when better
                planned = dataclasses.replace(plain, problem=reference.problem)
                return _Choice(
                    planned, reference.plan, choice.note + ", the reference's kept", reference_kept=True
                )
        else:
            choice.note += aside
        return choice

    def _reference(self, given: Callable[[bool], GivenPlan]) -> GivenPlan | str:
        """The reference algorithm's own plan, or why there is none (it failed, or its plan is invalid)."""
        try:
            return given(False)
        except ProblemError as e:
            return f"{type(e).__name__}: {str(e).splitlines()[0]}"
        except Exception as e:  # the algorithm's own failure: memplan's plan stands
            return f"it raised {type(e).__name__}: {e}"

    def _stock(
        self, ex: Extraction, graph_module: torch.fx.GraphModule, signature: ExportGraphSignature | None
    ) -> Callable[[], list[int]]:
        """What computes `stock_sizes` for `ex`: lazily, except ExecuTorch's BankedGreedy, which needs
        the specs unplanned."""
        if self.memory_map is None:
            return functools.partial(_greedy_sizes, ex)
        banked = banked_stock_sizes(self.memory_map, self.alignment, ex, graph_module, signature)
        return functools.partial(list, [0, *banked[1:]] if banked else [])

    def _update_state_in_place(
        self,
        graph_module: torch.fx.GraphModule,
        graph_signature: ExportGraphSignature | None,
        alloc_mutable_buffers: bool,
    ) -> tuple[StateReport, Callable[[], list[int]] | None]:
        """Rewrite the write-backs; and, when that changes the graph, the stock figure of the graph
        ExecuTorch would plan (taken before, so the write-backs' values and copies are in it)."""
        signature = frozen(graph_signature)
        decisions = analyze(graph_module, signature, state_planned=self.alloc_mutable_buffers)
        stock = None
        changes = any(d.status is not StateStatus.KEPT for d in decisions)
        if changes and not control_flow_submodules(graph_module):
            before = extract(
                graph_module,
                signature,
                alignment=self.alignment,
                alloc_graph_input=self.alloc_graph_input,
                alloc_graph_output=self.alloc_graph_output,
                alloc_mutable_buffers=alloc_mutable_buffers,
            )
            if self.memory_map is not None:
                before = with_memory_map(before, graph_module, self.memory_map, self.alignment)
            stock = self._stock(self._in_form(before), graph_module, signature)
            _forget_lifetimes(graph_module)  # ExecuTorch's lifetime analysis only ever widens them
        return StateReport(tuple(decisions), rewrite(graph_module, decisions)), stock

    @property
    def _shared_objects(self) -> bool:
        """True if the given algorithm plans the shared-objects form (translate.Translation.shared_objects)."""
        return isinstance(self.translation, Translation) and self.translation.shared_objects

    def _in_form(self, ex: Extraction) -> Extraction:
        """The extraction with its problem in the form the given algorithm plans (shared objects or not)."""
        if not self._shared_objects:
            return ex
        return dataclasses.replace(ex, problem=dataclasses.replace(ex.problem, shared_objects=True))

    def _with_shared_state_arena(self, stock: Callable[[], list[int]], share: bool) -> list[int]:
        """`stock()`, plus the arena of state shared across methods (as `share_mutable_buffers` lays it out)."""
        sizes = list(stock())
        layout = self.shared_state
        if share and layout is not None and sizes:
            sizes += [0] * (layout.pool - len(sizes)) + [layout.arena]
        return sizes

    def _solve(self, problem: Problem, where: str) -> Plan:
        """The plan `solve` chooses with fallbacks (solvers.fallback), validated; errors name the method.

        A failure keeps its type (`InfeasibleError`, `InvalidPlanError`, ...) and gets a note
        naming the method and the solver.
        """
        if not problem.buffers:
            return Plan(
                offsets={}, arena_sizes={}, solver=self.solver, proven_optimal=True, outcome=Outcome.OPTIMAL
            )
        try:
            return solvers.solve(
                problem, self.solver, self.time_limit_s, self.capacity, fallback=True, **self.solver_options
            )
        except ProblemError as e:
            e.add_note(f"memory planning of {where!r} with solver {self.solver!r} failed")
            raise

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
                if self.memory_map is None
                else banked_state_pool(self.memory_map, self.results[method].problem)
            ),
        )


@dataclass
class _Costs:
    """What "better" means between two valid plans of one graph: under a memory map, less traffic
    cost as the emitted program counts it (planner.memory.instruction_traffic: every instruction's tensor arguments at
    their bytes, by bank); then fewer bytes.

    memplan's plans are counted without the instructions their levers delete (fused cats, no-op
    slices); a reference plan (`fusion` None, `levers` False) keeps every instruction. The bytes
    each buffer moves are read off the graph once per set of deleted instructions.
    """

    plain: Extraction
    nodes: list[torch.fx.Node]
    slices_removed: frozenset[str]
    _moved: dict[frozenset[str], dict[str, int]] = field(default_factory=dict)

    def moved(self, fusion: CatFusion | None, levers: bool = True) -> dict[str, int]:
        """Per buffer id: the bytes the emitted instructions move through it."""
        gone = self.slices_removed | (fusion.instructions_removed if fusion else frozenset())
        gone = gone if levers else frozenset()
        if gone not in self._moved:
            self._moved[gone] = argument_bytes(
                self.plain.spec_of, [n for n in self.nodes if n.name not in gone]
            )
        return self._moved[gone]

    def traffic(
        self, problem: Problem, plan: Plan, fusion: CatFusion | None, levers: bool = True
    ) -> dict[int, int]:
        """Bytes per arena of every instruction's tensor arguments in the program this plan emits."""
        return traffic(problem, plan.pools, self.moved(fusion, levers))

    def of(
        self, problem: Problem, plan: Plan, fusion: CatFusion | None, levers: bool = True
    ) -> tuple[float, int]:
        if not problem.banks:
            return 0.0, plan.arena_size
        return traffic_cost(problem, plan.pools, self.moved(fusion, levers)), plan.arena_size


def _shown(cost: tuple[float, int]) -> str:
    traffic_cost, size = cost
    return f"{size:,} B" + (f", bank traffic cost {traffic_cost:,.0f}" if traffic_cost else "")


def _forget_lifetimes(graph_module: torch.fx.GraphModule) -> None:
    """Every TensorSpec of the graph back to the lifetime it had before any analysis."""
    for node in graph_module.graph.nodes:
        for spec in pytree.tree_leaves(node.meta.get("spec")):
            if isinstance(spec, TensorSpec):
                spec.lifetime = [None, None]


def _greedy_sizes(ex: Extraction) -> list[int]:
    """`non_const_buffer_sizes` ExecuTorch's greedy gives the extracted tensors (its replica, solvers.greedy;
    `fallback` lays it out above the submodules' reservation, as ExecuTorch does)."""
    return ex.pool_sizes(dict(solvers.solve(ex.problem, "greedy", fallback=True).arena_sizes))


__all__ = ["PlannerPass", "PlanningError", "MethodResult", "ExtractionError"]
