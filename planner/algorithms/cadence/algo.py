"""memplan's solvers as a Cadence `MemoryPlanningAlgo`, for Cadence's own flow.

    CadenceMemoryPlanning(memory_config, mode, mem_algo) picks one of
    `get_mem_algos(...)`; `MemplanCadenceAlgo(memory_config, mode, ...)` is a
    drop-in for either (same constructor), e.g. in a `MemoryPlanningPass(algo)`.

One call plans all of Cadence's specs at once (`plan_with_constraints`):
the memories become banks, blocked and pinned memories the buffers' bank
choices, relative constraints contiguous groups (planner.algorithms.cadence.problem_of).
Candidates, every one checked by memplan's validator on that problem:

1. memplan's bank solver (least traffic in the fastest memories, then packed);
2. Cadence's own `PositionBasedGreedyWithHierarchy` and `GreedyWithHeuristic`,
   run on copies of the state and constraints;
3. each candidate's memory choice packed again by memplan's solver.

The best by (traffic cost, total bytes) is written into the specs, so the
result is never worse than either Cadence algorithm under that order.
"""

from __future__ import annotations

import copy
import dataclasses
import time
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import torch
from executorch.backends.cadence.aot.memory_constraints import ConstraintsGenPass, MemConstraints
from executorch.backends.cadence.aot.memory_planning import (
    GreedyWithHeuristic,
    PositionBasedGreedyWithHierarchy,
)
from executorch.backends.cadence.aot.memory_planning_algo import MemoryPlanningAlgo, MemoryPlanningState
from executorch.backends.cadence.aot.pass_utils import CompileMode
from executorch.backends.cadence.aot.utils import MemoryConfig, MemoryPlanningAlgoFailure
from executorch.exir.tensor import TensorSpec
from torch.export.exported_program import ExportGraphSignature

from memplan import solvers
from memplan.bank_placement import place_in_banks, traffic_cost
from memplan.errors import InfeasibleError, PlanningError, ProblemError
from memplan.plan import Outcome, Plan, arena_sizes_of
from memplan.planner.algorithms.cadence.problem_of import CadenceProblem, cadence_problem, memory_banks
from memplan.problem import Problem
from memplan.validate import check_plan, validate

CADENCE_ALGORITHMS: dict[str, type[MemoryPlanningAlgo]] = {
    "position_greedy": PositionBasedGreedyWithHierarchy,
    "greedy_heuristic": GreedyWithHeuristic,
}
"""Cadence's own algorithms, by the names plans and reports use (their `mem_algo` index order)."""


@dataclass(frozen=True)
class Candidate:
    """One plan considered: where it came from, its score, or why it was not usable."""

    source: str
    plan: Plan | None
    reason: str = ""
    traffic_cost: float = 0.0  # bytes accessed, weighted by each memory's place in the hierarchy

    @property
    def score(self) -> tuple[float, int]:
        """Less traffic in slow memories first, then fewer bytes over all memories."""
        assert self.plan is not None
        return (self.traffic_cost, self.plan.arena_size)


@dataclass(frozen=True)
class CadenceResult:
    """What one planning call did: the problem, the plan written, and every candidate considered."""

    cadence: CadenceProblem
    plan: Plan
    chosen: str
    candidates: tuple[Candidate, ...]

    def bytes_per_memory(self) -> list[int]:
        """Arena bytes of memory 1..N (Cadence's `bufsizes[1:]`)."""
        return [self.plan.arena_sizes.get(b.pool, 0) for b in self.cadence.problem.banks]


class MemplanCadenceAlgo(MemoryPlanningAlgo):
    """A Cadence memory-planning algorithm backed by memplan's solvers; never worse than Cadence's own.

    `solver` plans the bank choice (a bank solver: cpsat, banked_bestfit,
    banked_greedy) and `time_limit_s` bounds each solver run. `baselines`
    names the Cadence algorithms also run and kept when better (all by default).
    `results` lists a `CadenceResult` per planning call, `attempts` every call's candidates.
    """

    def __init__(
        self,
        memory_config: MemoryConfig,
        mode: CompileMode = CompileMode.DEFAULT,
        alloc_graph_input: bool = True,
        alloc_graph_output: bool = True,
        additional_constraint_gen_passes: Sequence[ConstraintsGenPass] | None = None,
        *,
        solver: str = "cpsat",
        time_limit_s: float | None = solvers.DEFAULT_TIME_LIMIT_S,
        baselines: Sequence[str] = tuple(CADENCE_ALGORITHMS),
    ) -> None:
        super().__init__(
            memory_config, mode, alloc_graph_input, alloc_graph_output, additional_constraint_gen_passes
        )
        memory_banks(memory_config)  # a malformed config fails here, not mid-export
        solvers.for_memory_map(solver)  # so does a solver that cannot choose memories
        unknown = [name for name in baselines if name not in CADENCE_ALGORITHMS]
        if unknown:
            raise PlanningError(
                f"unknown Cadence baselines {unknown}; choose from {sorted(CADENCE_ALGORITHMS)}"
            )
        self.solver = solver
        self.time_limit_s = time_limit_s
        self.baselines = tuple(baselines)
        self.results: list[CadenceResult] = []
        self.attempts: list[tuple[Candidate, ...]] = []  # every call's candidates, also when none fits

    def plan(
        self,
        specs: Iterable[TensorSpec],
        graph_module: torch.fx.GraphModule,
        graph_signature: ExportGraphSignature,
        state: MemoryPlanningState,
        placement_constraints: MemConstraints,
        extra_padding: int = 0,
    ) -> None:
        """Place `specs` (unconstrained or memory-pinned, as Cadence's staged planning passes them)."""
        self._plan(list(specs), graph_module, graph_signature, state, placement_constraints, baselines=())

    def plan_with_constraints(
        self,
        specs: Iterable[TensorSpec],
        graph_module: torch.fx.GraphModule,
        graph_signature: ExportGraphSignature,
        state: MemoryPlanningState,
        placement_constraints: MemConstraints,
        extra_padding: int = 0,
    ) -> None:
        """Every spec at once: pinned, memory-pinned, free and relatively placed ones."""
        self._plan(
            list(specs), graph_module, graph_signature, state, placement_constraints, baselines=self.baselines
        )

    # -- one planning call ------------------------------------------------------------
    def _plan(
        self,
        specs: list[TensorSpec],
        graph_module: torch.fx.GraphModule,
        graph_signature: ExportGraphSignature,
        state: MemoryPlanningState,
        constraints: MemConstraints,
        baselines: Sequence[str],
    ) -> None:
        cadence = cadence_problem(
            specs,
            graph_module,
            self.memory_config,
            constraints,
            valid_mem_ids=self.memory_id_is_valid,
            name=graph_module.__class__.__name__,
        )
        problem = cadence.problem
        candidates = [self._memplan(problem)]
        for name in baselines:
            candidates.append(
                self._baseline(name, cadence, specs, graph_module, graph_signature, constraints)
            )
        for found in list(candidates):
            if found.plan is not None:
                candidates.append(self._repacked(problem, found))
        self.attempts.append(tuple(candidates))
        usable = [c for c in candidates if c.plan is not None]
        if not usable:
            error = InfeasibleError(
                f"no plan fits the Cadence memories {list(self.memory_config.memory_sizes)}: "
                + "; ".join(f"{c.source}: {c.reason}" for c in candidates)
            )
            raise error
        best = min(usable, key=lambda c: c.score)
        assert best.plan is not None
        check_plan(problem, best.plan)
        _write(cadence, best.plan, state, constraints)
        self.results.append(CadenceResult(cadence, best.plan, best.source, tuple(candidates)))

    def _memplan(self, problem: Problem) -> Candidate:
        if not problem.buffers:
            return _scored("memplan", problem, Plan({}, {}, self.solver, outcome=Outcome.OPTIMAL))
        try:
            plan = solvers.solve(problem, self.solver, self.time_limit_s, fallback=True)
        except InfeasibleError as e:
            return Candidate("memplan", None, str(e))
        return _scored("memplan", problem, plan)

    def _repacked(self, problem: Problem, found: Candidate) -> Candidate:
        """`found`'s memory choice kept, every memory packed again by memplan's solver (smaller arenas)."""
        assert found.plan is not None
        source = f"{found.source}+repacked"
        placed = place_in_banks(problem, found.plan.pools)
        flat = dataclasses.replace(placed, banks=())
        if not flat.buffers:
            return Candidate(source, None, "nothing to pack")
        try:
            plan = solvers.solve(flat, "cpsat", self.time_limit_s, fallback=True)
        except ProblemError as e:  # e.g. a pinned offset off a memory's alignment: this candidate only
            return Candidate(source, None, str(e))
        repacked = dataclasses.replace(
            plan, pools=dict(found.plan.pools), arena_sizes=arena_sizes_of(placed, plan.offsets)
        )
        over = [b.name for b in problem.banks if repacked.arena_sizes.get(b.pool, 0) > b.capacity]
        if over or validate(problem, repacked):
            return Candidate(source, None, f"does not fit {over}" if over else "breaks a constraint")
        return _scored(source, problem, repacked)

    def _baseline(
        self,
        name: str,
        cadence: CadenceProblem,
        specs: list[TensorSpec],
        graph_module: torch.fx.GraphModule,
        graph_signature: ExportGraphSignature,
        constraints: MemConstraints,
    ) -> Candidate:
        """Cadence's algorithm `name` on copies of the state and constraints; specs restored afterwards."""
        algo = CADENCE_ALGORITHMS[name](
            self.memory_config,
            self.mode,
            self.alloc_graph_input,
            self.alloc_graph_output,
            self.additional_constraint_gen_passes,
        )
        algo.memory_id_is_valid = list(self.memory_id_is_valid)
        touched = list({id(s): s for s in [*specs, *cadence.spec_of.values()]}.values())
        saved = [(s.mem_id, s.mem_offset) for s in touched]
        started = time.perf_counter()
        try:
            algo.plan_with_constraints(
                specs,
                graph_module,
                graph_signature,
                MemoryPlanningState(self.memory_config),
                copy_constraints(constraints),
            )
            placed = {bid: (s.mem_id, s.mem_offset) for bid, s in cadence.spec_of.items()}
        except (MemoryPlanningAlgoFailure, MemoryError, AssertionError) as e:  # their ways of not fitting
            return Candidate(name, None, f"{type(e).__name__}: {str(e)[:200]}")
        finally:
            for spec, (mem_id, offset) in zip(touched, saved):
                spec.mem_id, spec.mem_offset = mem_id, offset
        return _as_candidate(name, cadence.problem, placed, time.perf_counter() - started)


def copy_constraints(constraints: MemConstraints) -> MemConstraints:
    """A copy another algorithm may resolve (resolving empties `unresolved_loc_constraints`).

    `MemConstraints` keeps its tables in private attributes; the tables are
    copied one level deep (their keys are spec ids, their values frozen records or sets).
    """
    twin = copy.copy(constraints)
    twin.unresolved_loc_constraints = defaultdict(
        set, {k: set(v) for k, v in constraints.unresolved_loc_constraints.items()}
    )
    twin._relative_placement_constraint = dict(constraints._relative_placement_constraint)
    twin._mem_id_blocklist = {k: set(v) for k, v in constraints._mem_id_blocklist.items()}
    twin._absolute_placement_constraints = dict(constraints._absolute_placement_constraints)
    return twin


def _as_candidate(
    name: str, problem: Problem, placed: dict[str, tuple[int | None, int | None]], seconds: float
) -> Candidate:
    """A Cadence algorithm's placement as a memplan plan, if it placed everything and passes the validator."""
    missing = [bid for bid, (mem, off) in placed.items() if mem is None or off is None]
    if missing:
        return Candidate(name, None, f"left {', '.join(missing[:5])} unplaced")
    offsets = {bid: int(off) for bid, (_, off) in placed.items() if off is not None}
    pools = {b.id: int(placed[b.id][0] or 0) for b in problem.roots()}
    try:
        arena = arena_sizes_of(place_in_banks(problem, pools), offsets)
    except ValueError as e:  # a memory the problem does not allow (ProblemError is a ValueError)
        return Candidate(name, None, str(e))
    plan = Plan(offsets, arena, name, seconds=seconds, pools=pools)
    broken = validate(problem, plan)
    if broken:
        return Candidate(name, None, f"fails memplan's validator: {broken[0].message}")
    return _scored(name, problem, plan)


def _scored(source: str, problem: Problem, plan: Plan) -> Candidate:
    return Candidate(source, plan, traffic_cost=traffic_cost(problem, plan.pools))


def _write(
    cadence: CadenceProblem, plan: Plan, state: MemoryPlanningState, constraints: MemConstraints
) -> None:
    """Write the plan into the specs, record the placed ones in Cadence's state, resolve the dependents."""
    problem = cadence.problem
    for bid, spec in cadence.spec_of.items():
        root, _ = problem.root_of(bid)
        spec.mem_id = plan.pools.get(root, problem.buffer(root).pool)
        spec.mem_offset = plan.offsets[bid]
    for bid in cadence.roots:
        spec = cadence.spec_of[bid]
        state.place_spec(spec)
        constraints.resolve_relative_loc_constraints(spec)
