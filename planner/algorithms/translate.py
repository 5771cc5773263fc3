"""An ExecuTorch memory-planning algorithm, read as a memplan problem.

`MemoryPlanningPass(memory_planning_algo)` takes a callable that places the
specs itself, normally a `MemoryPlanningAlgorithmSuite` of algorithms
(`greedy`, `naive`, `BankedGreedy(target)`, ...) whose smallest plan wins.
`PlannerPass` takes the same callable. A translator recognises one algorithm
and says what problem it plans (`Translation`): the memory map it plans
across, the extra constraints it honours (`constrain`, e.g. several memories,
blocked mem_ids, placement constraints) and the memplan solver it asks for.
memplan then plans that problem with its own solver; the given algorithm
also runs on the same tensors (`reference`) and its plan is kept if it is the
better one. An algorithm no translator recognises is run as given
(`Untranslated`, with the reason).

A backend adds its algorithms with `register_translator` (algorithms.translation):
a function taking the algorithm object and returning a `Translation`, or None
when it does not recognise it. Translators registered later are asked first. Backends whose
code may be missing register on first use, when importable (Cadence:
planner.algorithms.cadence.as_translation).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

from executorch.exir.banked_memory_planning import BankedGreedy, TargetMemoryMap
from executorch.exir.memory_planning import MemoryPlanningAlgorithmSuite, greedy, naive

from memplan.planner.algorithms.memplan_algorithm import MemplanAlgorithm
from memplan.planner.algorithms.translation import (
    TRANSLATORS,
    Translation,
    Untranslated,
    register_translator,
)
from memplan.solvers import DEFAULT_TIME_LIMIT_S, makes_shared_objects


def algorithm_name(algorithm: Any) -> str:
    """The name ExecuTorch's suite reports for an algorithm ("greedy", "banked_greedy", ...)."""
    if isinstance(algorithm, functools.partial):
        keywords = ", ".join(f"{k}={v!r}" for k, v in algorithm.keywords.items())
        return f"{algorithm_name(algorithm.func)}({keywords})" if keywords else algorithm_name(algorithm.func)
    if isinstance(algorithm, MemoryPlanningAlgorithmSuite):
        return f"MemoryPlanningAlgorithmSuite[{', '.join(algorithm_name(a) for a in algorithm.algo_list)}]"
    if isinstance(algorithm, BankedGreedy) and not algorithm.allow_overlapping_allocations:
        return f"{algorithm.__name__}(allow_overlapping_allocations=False)"
    return str(getattr(algorithm, "__name__", type(algorithm).__name__))


def translate(memory_planning_algo: Any) -> Translation | Untranslated:
    """The problem `memory_planning_algo` (a suite or one algorithm) plans, or why memplan cannot say.

    A suite translates when every algorithm in it does and they plan the same
    problem (same memory map, same constraints).
    """
    _load_backend_translators()
    name = algorithm_name(memory_planning_algo)
    items: Sequence[Any] = (
        memory_planning_algo.algo_list
        if isinstance(memory_planning_algo, MemoryPlanningAlgorithmSuite)
        else [memory_planning_algo]
    )
    found = []
    for item in items:
        translation = next((t for t in map(lambda f: f(item), TRANSLATORS) if t is not None), None)
        if translation is None:
            return Untranslated(name, f"{algorithm_name(item)} has no memplan translation")
        found.append(translation)
    if not found:
        return Untranslated(name, "the suite lists no algorithm")
    first = found[0]
    for other in found[1:]:
        if (
            other.memory_map is not first.memory_map
            or other.constrain is not first.constrain
            or other.shared_objects != first.shared_objects
        ):
            return Untranslated(name, f"{first.name} and {other.name} plan different problems")
    own = next((t for t in found if t.solver is not None), first)
    return Translation(
        name=name if isinstance(memory_planning_algo, MemoryPlanningAlgorithmSuite) else first.name,
        memory_map=first.memory_map,
        constrain=first.constrain,
        solver=own.solver,
        solver_options=own.solver_options,
        time_limit_s=own.time_limit_s,
        reference=any(t.reference for t in found),
        check_storage_reuse=all(t.check_storage_reuse for t in found),
        shared_objects=first.shared_objects,
    )


_BACKENDS_LOADED: list[bool] = []


def _load_backend_translators() -> None:
    """Register the translators of backends that are importable (Cadence), on first use."""
    if _BACKENDS_LOADED:
        return
    _BACKENDS_LOADED.append(True)
    try:
        from memplan.planner.algorithms.cadence.as_translation import register
    except ImportError:  # Cadence's compiler is not installed: its algorithms stay untranslated
        return
    register()


# -- ExecuTorch's own algorithms and memplan's --------------------------------------


def _shared_objects(name: str, memory_map: TargetMemoryMap | None = None) -> Translation:
    """The shared-objects form, planned by memplan's shared_objects solver (with the pass's default time)."""
    return Translation(
        name,
        memory_map=memory_map,
        solver="shared_objects",
        time_limit_s=DEFAULT_TIME_LIMIT_S,
        shared_objects=True,
    )


@register_translator
def _stock(algorithm: Any) -> Translation | None:
    """`greedy` and `naive` plan the one-arena problem memplan extracts.

    `greedy(allow_overlapping_allocations=False)` plans its shared-objects form
    (tensors sharing a mem_obj_id all start at its base: Vulkan reads mem_obj_id
    as one allocation).
    """
    func, keywords = (
        (algorithm.func, dict(algorithm.keywords))
        if isinstance(algorithm, functools.partial)
        else (algorithm, {})
    )
    if func is greedy and set(keywords) <= {"allow_overlapping_allocations"}:
        if keywords.get("allow_overlapping_allocations", True):
            return Translation("greedy")
        return _shared_objects(algorithm_name(algorithm))
    if func is naive and not keywords:
        return Translation("naive")
    return None


@register_translator
def _banked(algorithm: Any) -> Translation | None:
    """`BankedGreedy(target)` plans across `target`'s banks (memplan.planner.memory.bank_maps); with
    `allow_overlapping_allocations=False`, their shared-objects form."""
    if not isinstance(algorithm, BankedGreedy):
        return None
    if algorithm.allow_overlapping_allocations:
        return Translation("banked_greedy", memory_map=algorithm.target)
    return _shared_objects(algorithm_name(algorithm), algorithm.target)


def own_solver(solver: str, time_limit_s: float | None, options: dict[str, Any]) -> Translation:
    """memplan's own solver as the algorithm: planned by that solver, nothing to compare with (a solver of
    one form, `shared_objects`, plans that form)."""
    return Translation(
        f"memplan_{solver}",
        solver=solver,
        solver_options=tuple(sorted(options.items())),
        time_limit_s=time_limit_s,
        reference=False,
        shared_objects=makes_shared_objects(solver),
    )


@register_translator
def _memplan(algorithm: Any) -> Translation | None:
    """`MemplanAlgorithm(solver)`: its solver, as `own_solver`."""
    if isinstance(algorithm, MemplanAlgorithm):
        return own_solver(algorithm.solver, algorithm.time_limit_s, algorithm.solver_options)
    return None
