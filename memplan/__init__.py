"""memplan: memory planning for ExecuTorch programs.

The front door: the problem types, `solve`, `PlannerPass` (the drop-in
`MemoryPlanningPass`) with its levers' option objects (`CatFusionOptions`, `StateInPlaceOptions`,
`SliceNoopOptions`, `ReorderOptions`, `TilingOptions`), `MemplanAlgorithm` (memplan's solvers as an ExecuTorch
memory-planning algorithm, for the stock pass), and for notebooks and scripts `plan_model` (any model:
export, plan, compare with the stock planner, run), `load_program` (a zoo name,
`.pt2` or `file.py:factory`), `read_program` (a built `.pte`), `substituted` (memplan in place of every
`MemoryPlanningPass` a block of code builds; `memplan run` on the command line) and
`sweep` and `load_results` (a sweep folder as a typed DataFrame). Those are loaded on first
use, so that `import memplan` and the solvers never import torch.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version
from typing import TYPE_CHECKING, Any

from memplan.errors import InfeasibleError, ProblemError
from memplan.peak_bound import lower_bound
from memplan.plan import Plan
from memplan.problem import Buffer, BufferKind, ContiguousGroup, Problem, SameOffset
from memplan.validate import validate

if TYPE_CHECKING:
    from memplan.experiments.planning import plan_model
    from memplan.experiments.sweep.results import load_results
    from memplan.experiments.sweep.run import sweep
    from memplan.experiments.zoo.programs import load as load_program
    from memplan.planner.algorithms.memplan_algorithm import MemplanAlgorithm
    from memplan.planner.levers.cat.lever import CatFusionOptions
    from memplan.planner.levers.reorder.lever import ReorderOptions
    from memplan.planner.levers.slice_noop.lever import SliceNoopOptions
    from memplan.planner.levers.state_in_place.lever import StateInPlaceOptions
    from memplan.planner.pass_ import PlannerPass
    from memplan.planner.pte.program import read_program
    from memplan.planner.substitute import substituted
    from memplan.planner.tiling.options import TilingOptions
    from memplan.solvers import available, solve

try:
    __version__ = version("memplan")
except PackageNotFoundError:  # pragma: no cover - running from a source tree without install
    __version__ = "0+unknown"

__all__ = [
    "Buffer",
    "BufferKind",
    "CatFusionOptions",
    "ContiguousGroup",
    "InfeasibleError",
    "MemplanAlgorithm",
    "Plan",
    "PlannerPass",
    "Problem",
    "ProblemError",
    "ReorderOptions",
    "SameOffset",
    "SliceNoopOptions",
    "StateInPlaceOptions",
    "TilingOptions",
    "__version__",
    "available",
    "load_program",
    "load_results",
    "lower_bound",
    "plan_model",
    "read_program",
    "sweep",
    "solve",
    "substituted",
    "validate",
]


_LAZY = {  # upper floors, imported on first use: the ground floor imports none of them
    "available": ("memplan.solvers", "available"),
    "solve": ("memplan.solvers", "solve"),
    "PlannerPass": ("memplan.planner.pass_", "PlannerPass"),
    "MemplanAlgorithm": ("memplan.planner.algorithms.memplan_algorithm", "MemplanAlgorithm"),
    "CatFusionOptions": ("memplan.planner.levers.cat.lever", "CatFusionOptions"),
    "StateInPlaceOptions": ("memplan.planner.levers.state_in_place.lever", "StateInPlaceOptions"),
    "SliceNoopOptions": ("memplan.planner.levers.slice_noop.lever", "SliceNoopOptions"),
    "ReorderOptions": ("memplan.planner.levers.reorder.lever", "ReorderOptions"),
    "TilingOptions": ("memplan.planner.tiling.options", "TilingOptions"),
    "plan_model": ("memplan.experiments.planning", "plan_model"),
    "load_program": ("memplan.experiments.zoo.programs", "load"),
    "read_program": ("memplan.planner.pte.program", "read_program"),
    "substituted": ("memplan.planner.substitute", "substituted"),
    "load_results": ("memplan.experiments.sweep.results", "load_results"),
    "sweep": ("memplan.experiments.sweep.run", "sweep"),
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        module, attribute = _LAZY[name]
        return getattr(importlib.import_module(module), attribute)
    raise AttributeError(f"module 'memplan' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(__all__)
