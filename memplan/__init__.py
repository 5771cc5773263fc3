"""memplan: memory planning for ExecuTorch programs.

The front door: the problem types, `solve`, and `PlannerPass` (the drop-in
`MemoryPlanningPass`). `PlannerPass` is loaded on first use, so that
`import memplan` and the solvers never import torch.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version
from typing import TYPE_CHECKING, Any

from memplan.planner.problem import (
    Buffer,
    BufferKind,
    ContiguousGroup,
    InfeasibleError,
    Plan,
    Problem,
    ProblemError,
    SameOffset,
    lower_bound,
    validate,
)
from memplan.solvers import available, solve

if TYPE_CHECKING:
    from memplan.planner.et.pass_ import PlannerPass

try:
    __version__ = version("memplan")
except PackageNotFoundError:  # pragma: no cover - running from a source tree without install
    __version__ = "0+unknown"

__all__ = [
    "Buffer",
    "BufferKind",
    "ContiguousGroup",
    "InfeasibleError",
    "Plan",
    "PlannerPass",
    "Problem",
    "ProblemError",
    "SameOffset",
    "__version__",
    "available",
    "lower_bound",
    "solve",
    "validate",
]


def __getattr__(name: str) -> Any:
    if name == "PlannerPass":
        from memplan.planner.et.pass_ import PlannerPass

        return PlannerPass
    raise AttributeError(f"module 'memplan' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(__all__)
