"""What a given algorithm plans, in memplan's terms, and the registry of translators.

A translator recognises one algorithm and says what problem it plans
(`Translation`), or returns None; `register_translator` adds one (a backend
registers its algorithms here: Cadence's, planner.algorithms.cadence).
`translate` (planner.algorithms.translate) asks them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from executorch.exir.banked_memory_planning import TargetMemoryMap

from memplan.planner.graph.extract import Extraction

Constrain = Callable[[Extraction, torch.fx.GraphModule, str], Extraction]
"""Adds an algorithm's own constraints to a graph's extraction (the graph, its name for errors)."""


@dataclass(frozen=True)
class Translation:
    """What a given algorithm plans, in memplan's terms.

    `solver` (with its options and time limit) is the memplan solver the
    algorithm asks for; None means the pass's own. `reference` runs the given
    algorithm too, so the pass never returns a worse plan than it would.
    `check_storage_reuse` False skips ExecuTorch's `verify_storage_reuse` on the
    written plan, for problems whose members are placed by their exact bytes
    (Cadence's, whose padding may reach a neighbour; stock skips the check for
    every algorithm but greedy); memplan's validator still checks the plan.
    `shared_objects` says the algorithm plans the shared-objects form
    (`allow_overlapping_allocations=False`: each tensor at offset 0 of its
    object, `mem_obj_id` one allocation, as Vulkan reads it): the problem asks
    for it (`Problem.shared_objects`), and cat fusion and slice no-ops stay off
    (`NO_FUSION`).
    """

    name: str
    memory_map: TargetMemoryMap | None = None
    constrain: Constrain | None = None
    solver: str | None = None
    solver_options: tuple[tuple[str, Any], ...] = ()
    time_limit_s: float | None = None
    reference: bool = True
    check_storage_reuse: bool = True
    shared_objects: bool = False


NO_FUSION = (
    "they place a tensor at an offset inside another tensor's allocation, which a consumer reading"
    " mem_obj_id as one allocation (Vulkan) does not see"
)
"""Why cat fusion and slice no-ops stay off for an algorithm planning shared objects."""


@dataclass(frozen=True)
class Untranslated:
    """A given algorithm memplan cannot translate: it is run as given, and `reason` says why."""

    name: str
    reason: str


Translator = Callable[[Any], Translation | None]
TRANSLATORS: list[Translator] = []
"""Every registered translator, the last registered first."""


def register_translator(translator: Translator) -> Translator:
    """Add a translator (asked before those registered earlier); usable as a decorator."""
    TRANSLATORS.insert(0, translator)
    return translator
