"""Cadence's `MemoryPlanningAlgo` as a memplan translation (planner.algorithms.translate).

`PlannerPass(algo)` (or Cadence's `CadenceMemoryPlanning(memory_config, mode,
mem_algo)`, whose `MemoryPlanningPass` is a `PlannerPass` under the drop-in)
plans Cadence's problem with memplan's solver: the extraction gets Cadence's
memories as banks (sizes, alignments), the blocked and invalid mem_ids and
pinned placements as each buffer's bank choices, and the relative
placements (`GenerateMemConstraints`: cat inputs inside the cat output,
slice/select outputs inside their input) as contiguous groups
(planner.algorithms.cadence.problem_of). Cadence's own algorithm still runs as the
reference, and its plan is kept when at least as good.

`register()` adds the translator; `memplan.planner.algorithms.translate` calls it when
Cadence is importable.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import torch

from memplan.errors import ExtractionError
from memplan.planner.algorithms.cadence.importable import cadence_passes_importable
from memplan.planner.algorithms.translation import Constrain, Translation, register_translator
from memplan.planner.graph.extract import Extraction
from memplan.problem import Buffer, ContiguousGroup, Problem

cadence_passes_importable()

from executorch.backends.cadence.aot.memory_constraints import MemConstraints  # noqa: E402
from executorch.backends.cadence.aot.memory_planning_algo import (  # noqa: E402
    MemoryPlanningAlgo,
    MemoryPlanningState,
)

from memplan.planner.algorithms.cadence.algo import MemplanCadenceAlgo, copy_constraints  # noqa: E402
from memplan.planner.algorithms.cadence.problem_of import cadence_problem  # noqa: E402


def constrain_for(algo: MemoryPlanningAlgo) -> Constrain:
    """Adds `algo`'s memories and placement constraints to a graph's extraction.

    Cadence's constraint generation (`GenerateMemConstraints`) rewrites the
    graph (a cat or slice it can place in memory becomes a no-op), so it must
    run once per graph: the constraints generated here are handed to `algo`'s
    own run on the same graph (the reference) instead of generating them again.
    """
    made = algo.__dict__.get(_CONSTRAIN)
    if made is not None:  # one per algorithm: the reference reads what this one generated
        return made  # type: ignore[no-any-return]
    generated: dict[int, tuple[torch.fx.GraphModule, MemConstraints]] = {}
    own = algo.populate_constraints

    def populate_constraints(
        graph_module: torch.fx.GraphModule,
    ) -> tuple[MemoryPlanningState, MemConstraints]:
        found = generated.get(id(graph_module))
        if found is None or found[0] is not graph_module:
            return own(graph_module)
        return MemoryPlanningState(algo.memory_config), copy_constraints(found[1])

    def constrain(extraction: Extraction, graph_module: torch.fx.GraphModule, where: str) -> Extraction:
        _, constraints = own(graph_module)
        generated[id(graph_module)] = (graph_module, copy_constraints(constraints))
        return with_cadence_constraints(algo, constraints, extraction, graph_module, where)

    algo.populate_constraints = populate_constraints  # type: ignore[method-assign]
    setattr(algo, _CONSTRAIN, constrain)
    return constrain


_CONSTRAIN = "_memplan_constrain"


def with_cadence_constraints(
    algo: MemoryPlanningAlgo,
    constraints: MemConstraints,
    extraction: Extraction,
    graph_module: torch.fx.GraphModule,
    where: str,
) -> Extraction:
    """The extraction's problem as Cadence's `algo` plans it under `constraints` (memplan's groups kept)."""
    planned = list(extraction.spec_of.values())
    cadence = cadence_problem(
        planned,
        graph_module,
        algo.memory_config,
        constraints,
        valid_mem_ids=algo.memory_id_is_valid,
        name=where,
    )
    ours = {id(spec): bid for bid, spec in extraction.spec_of.items()}
    rename = {cid: ours[id(spec)] for cid, spec in cadence.spec_of.items() if id(spec) in ours}
    old = extraction.problem
    theirs = {rename[b.id]: b for b in cadence.problem.buffers if b.id in rename}
    added = [
        ContiguousGroup(rename[g.parent], tuple((rename[m], off) for m, off in g.members if m in rename))
        for g in cadence.problem.groups
        if g.parent in rename
    ]
    added = [g for g in added if g.members]
    members = {m for g in added for m, _ in g.members}
    kept_groups = []
    for group in old.groups:
        clash = [m for m, _ in group.members if m in members]
        if clash:
            raise ExtractionError(
                f"{where}: {', '.join(clash)} is placed inside {group.parent} by memplan's extraction and"
                " inside another tensor by Cadence's constraints"
            )
        kept_groups.append(group)
    every_bank = tuple(b.pool for b in cadence.problem.banks)
    buffers: list[Buffer] = []
    for buf in old.buffers:
        their = theirs.get(buf.id)
        if their is None:  # Cadence left it out (its source unplanned): any memory Cadence allows
            buffers.append(dataclasses.replace(buf, pool=every_bank[0], banks=every_bank))
            continue
        size = their.size if buf.id in members else max(buf.size, their.size)
        buffers.append(
            dataclasses.replace(
                buf,
                start=min(buf.start, their.start),
                end=max(buf.end, their.end),
                size=size,
                alignment=their.alignment,  # Cadence aligns by memory (the banks), not by the pass
                offset=their.offset if their.offset is not None else buf.offset,
                pool=their.pool,
                banks=their.banks,
                accesses=their.accesses,
            )
        )
    problem = Problem(
        tuple(buffers),
        tuple(kept_groups) + tuple(added),
        old.same_offsets,
        capacity=old.capacity,
        name=old.name,
        banks=cadence.problem.banks,
    )
    return dataclasses.replace(extraction, problem=problem)


def _cadence(algorithm: Any) -> Translation | None:
    """A Cadence algorithm (not memplan's own, `MemplanCadenceAlgo`, which plans with memplan already)."""
    if isinstance(algorithm, MemoryPlanningAlgo) and not isinstance(algorithm, MemplanCadenceAlgo):
        return Translation(
            f"cadence.{type(algorithm).__name__}",
            constrain=constrain_for(algorithm),
            check_storage_reuse=False,  # a member's padding may reach its neighbour, as in Cadence's own flow
        )
    return None


def register() -> None:
    """Add the Cadence translator (once)."""
    if _cadence not in _registered:
        register_translator(_cadence)
        _registered.append(_cadence)


_registered: list[Any] = []
