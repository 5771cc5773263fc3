"""The solve stage: the plan of one graph, and how it was chosen.

The given algorithm is run as given when memplan cannot translate it.
Otherwise memplan's plan (a lever's, or the solver's of the reshaped
problem) is compared with a reference: the given algorithm's own plan, or
ExecuTorch's BankedGreedy under a memory map given by keyword. The
reference plans the extraction before any lever, as stock would; it is
replaced only by a better plan (`stages.costs`: under a memory map the
emitted program's traffic cost first, then bytes; on a tie, memplan's only
when its levers remove instructions), so its exact offsets stay on a tie.
Under a memory map memplan's must also serve no smaller share of the
emitted traffic from the faster banks (traffic cost per byte moved): a
lever that deletes fast-bank instructions lowers that share at an equal
slow-bank count.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from dataclasses import dataclass

import torch
from executorch.exir.banked_memory_planning import BankedGreedy
from executorch.exir.memory_planning import MemoryPlanningAlgorithmSuite
from torch.export.exported_program import ExportGraphSignature

from memplan.errors import ProblemError
from memplan.plan import Plan
from memplan.planner.algorithms.given import GivenPlan, placed_by
from memplan.planner.algorithms.translation import NO_FUSION, Untranslated
from memplan.planner.graph.extract import Extraction
from memplan.planner.memory.devices import DeviceArenas
from memplan.planner.stages.costs import Costs, shown
from memplan.planner.stages.run_levers import Reshaped
from memplan.planner.stages.solver import Algorithm


@dataclass
class Choice:
    """The plan chosen for one graph and how it was chosen.

    `levers` is False when the kept plan is of the graph as given (the given
    algorithm's, run as given or as the reference): no lever rewrites it.
    """

    planned: Extraction  # the extraction the plan is for
    plan: Plan
    note: str
    levers: bool = True
    as_given: GivenPlan | None = None  # set when the given algorithm ran as given


@dataclass(frozen=True)
class Graph:
    """What the given algorithm needs to run on one graph as `apply_algo` runs it."""

    graph_module: torch.fx.GraphModule
    signature: ExportGraphSignature | None
    where: str
    alignment: int
    arenas: DeviceArenas

    def placed_by(
        self, algorithm: Callable[..., object], name: str, plain: Extraction, keep: bool
    ) -> GivenPlan:
        return placed_by(
            algorithm, name, plain, self.graph_module, self.signature, self.alignment, self.arenas, keep=keep
        )


def as_given(algorithm: Algorithm, graph: Graph, plain: Extraction) -> Choice:
    """The given algorithm memplan cannot translate, run as given; its plan validated."""
    translation = algorithm.translation
    assert isinstance(translation, Untranslated)
    own = graph.placed_by(algorithm.given, translation.name, plain, True)
    note = f"{translation.name} run as given ({translation.reason}); its plan passed validation"
    return Choice(dataclasses.replace(plain, problem=own.problem), own.plan, note, False, own)


def choose(algorithm: Algorithm, graph: Graph, reshaped: Reshaped, costs: Costs, off: list[str]) -> Choice:
    """memplan's plan of the reshaped problem unless the reference is better; `off` names the levers
    the shared-objects form switched off."""
    translation = algorithm.translation
    assert not isinstance(translation, Untranslated)
    plain = costs.plain
    reference: GivenPlan | str | None = None
    if translation.reference:
        reference = _reference(functools.partial(graph.placed_by, algorithm.given, translation.name, plain))
    elif algorithm.memory_map is not None:
        banked = MemoryPlanningAlgorithmSuite(algo_list=[BankedGreedy(algorithm.memory_map)])
        reference = _reference(functools.partial(graph.placed_by, banked, "banked_greedy", plain))
    planned = reshaped.extraction
    plan = (
        reshaped.plan if reshaped.plan is not None else algorithm.solver.solve(planned.problem, graph.where)
    )
    note = f"{translation.name}: planned by memplan {algorithm.solver.name}"
    aside = f" ({' and '.join(off)} off: {NO_FUSION})" if algorithm.shared_objects and off else ""
    if isinstance(reference, str):
        note = f"{translation.name} translated; its own plan was not kept: {reference}{aside}"
    elif reference is not None:
        mine = costs.of(planned.problem, plan, reshaped.removed)
        theirs = costs.of(reference.problem, reference.plan, frozenset())
        note = (
            f"{translation.name} translated; memplan {algorithm.solver.name}: {shown(mine)}, the reference"
            f" ({reference.plan.solver}): {shown(theirs)}{aside}"
        )
        thinner = costs.per_byte(planned.problem, plan, reshaped.removed) > costs.per_byte(
            reference.problem, reference.plan, frozenset()
        )
        if thinner:
            note += "; memplan's serves a smaller share of the traffic from the faster banks"
        if (
            thinner or theirs < mine or (theirs == mine and not reshaped.changes)
        ):  # memplan's only when better
            kept = dataclasses.replace(plain, problem=reference.problem)
            return Choice(kept, reference.plan, note + ", the reference's kept", levers=False)
    else:
        note += aside
    return Choice(planned, plan, note)


def _reference(given: Callable[[bool], GivenPlan]) -> GivenPlan | str:
    """The reference algorithm's own plan, or why there is none (it failed, or its plan is invalid)."""
    try:
        return given(False)
    except ProblemError as e:
        return f"{type(e).__name__}: {str(e).splitlines()[0]}"
    except Exception as e:  # the algorithm's own failure: memplan's plan stands
        return f"it raised {type(e).__name__}: {e}"
