"""A zoo model with its methods tiled (memplan.planner.tiling) by a `PlannerPass`'s tiling options.

Tiling is a transform of the exported program, so it happens here, before `to_edge`: every method is
exported, tiled by `planner_pass.tile` (which keeps the report for the pass's results) and replaced by
the tiled program's module. The eager reference stays the untiled model: `check` compares the tiled
program against it.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from memplan.errors import UsageError
from memplan.experiments.zoo import ZooModel


def tiled_model(model: ZooModel, planner_pass: Any) -> ZooModel:
    """`model` with each method's module replaced by its tiled program's module."""
    from memplan.experiments.zoo import runtime

    if model.shared_state:
        raise UsageError(
            f"{model.name}: tiling re-exports each method alone; methods sharing state cannot be"
        )
    programs = runtime.export_methods(model)
    methods = {
        name: (planner_pass.tile(programs[name], name).module(), example)
        for name, (_, example) in model.methods.items()
    }
    return dataclasses.replace(model, methods=methods)
