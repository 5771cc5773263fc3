"""The algorithm the pass was given, read once: its translation, the memplan solver, the memory map.

`PlannerPass(solver=...)` without an algorithm plans with that solver
directly (`translate.own_solver`); the suite of `MemplanAlgorithm` it keeps
as `memory_planning_algo` is only there for code that reads it as stock's
(`algo_list[0]`). A given algorithm is translated (algorithms.translate): a
translation may name its own solver and memory map.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from executorch.exir.banked_memory_planning import TargetMemoryMap
from executorch.exir.memory_planning import MemoryPlanningAlgorithmSuite

from memplan import solvers
from memplan.errors import PlanningError, ProblemError, UnsupportedProblemError
from memplan.plan import Outcome, Plan
from memplan.planner.algorithms.memplan_algorithm import MemplanAlgorithm
from memplan.planner.algorithms.translate import algorithm_name, own_solver, translate
from memplan.planner.algorithms.translation import Translation, Untranslated
from memplan.problem import Problem


@dataclass(frozen=True)
class Solver:
    """The memplan solver every graph of the pass is planned with, its options and limits."""

    name: str
    time_limit_s: float | None
    options: dict[str, Any]
    capacity: int | None = None

    def solve(self, problem: Problem, where: str) -> Plan:
        """The plan `solve` chooses with fallbacks (solvers.fallback), validated; errors name the graph.

        A failure keeps its type (`InfeasibleError`, `InvalidPlanError`, ...) and gets a note
        naming the graph and the solver.
        """
        if not problem.buffers:
            return Plan(offsets={}, arena_sizes={}, solver=self.name, outcome=Outcome.OPTIMAL)
        try:
            return solvers.solve(
                problem, self.name, self.time_limit_s, self.capacity, fallback=True, **self.options
            )
        except ProblemError as e:
            e.add_note(f"memory planning of {where!r} with solver {self.name!r} failed")
            raise


@dataclass(frozen=True)
class Algorithm:
    """The given algorithm (`given`, as stock keeps it), what it plans (`translation`) and with what."""

    given: Callable[..., Any]
    translation: Translation | Untranslated
    solver: Solver
    memory_map: TargetMemoryMap | None

    @property
    def shared_objects(self) -> bool:
        """True if the algorithm plans the shared-objects form (translate.Translation.shared_objects)."""
        return isinstance(self.translation, Translation) and self.translation.shared_objects


def algorithm(
    given: Callable[..., Any] | None,
    solver: str,
    time_limit_s: float | None,
    solver_options: dict[str, Any],
    capacity: int | None,
    memory_map: TargetMemoryMap | None,
) -> Algorithm:
    """The algorithm read once; bad solver options or a solver without banks for a map fail here."""
    solvers.entry(solver).make_params(dict(solver_options))  # bad names fail here, not mid-export
    translation: Translation | Untranslated
    if given is None:
        given = MemoryPlanningAlgorithmSuite(
            algo_list=[MemplanAlgorithm(solver, time_limit_s, solver_options)]
        )
        translation = dataclasses.replace(
            own_solver(solver, time_limit_s, solver_options), name=algorithm_name(given)
        )
    else:
        translation = translate(given)
    if isinstance(translation, Translation) and translation.solver is not None:
        solver, time_limit_s = translation.solver, translation.time_limit_s
        solver_options = dict(translation.solver_options)
    if isinstance(translation, Translation) and translation.memory_map is not None:
        if memory_map is not None and memory_map is not translation.memory_map:
            raise PlanningError(
                f"memory_map was given twice: as an argument and by {translation.name}; give one"
            )
        memory_map = translation.memory_map
    if memory_map is not None:
        try:
            solvers.for_memory_map(solver)
        except UnsupportedProblemError as e:
            raise PlanningError(str(e)) from None
    return Algorithm(
        given, translation, Solver(solver, time_limit_s, dict(solver_options), capacity), memory_map
    )
