"""Problem model, extraction from ExecuTorch, the planning pass and file I/O.

`PlannerPass` is loaded lazily so that `planner.problem` stays importable
without torch (solvers depend on it).
"""

from typing import Any


def __getattr__(name: str) -> Any:
    if name == "PlannerPass":
        from planner.pass_ import PlannerPass

        return PlannerPass
    raise AttributeError(f"module 'planner' has no attribute {name!r}")
