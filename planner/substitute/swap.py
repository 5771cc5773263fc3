"""ExecuTorch's `MemoryPlanningPass` as memplan's `PlannerPass`: the same arguments, the same meaning.

A stock pass keeps every constructor argument as an attribute of the same name, so the swap reads them
off the instance whatever built it (a flow's own code, the `ExecutorchBackendConfig` default, a
subclass's `super().__init__`). A subclass keeps its own methods: it is rebased on `PlannerPass`, so
an overridden `run` that calls `super().run(...)` runs memplan's.
"""

from __future__ import annotations

from typing import Any

from executorch.exir.memory_planning import MemoryPlanningAlgorithmSuite, greedy
from executorch.exir.passes.memory_planning_pass import MemoryPlanningPass

from memplan.planner.pass_ import PlannerPass

STOCK_ARGUMENTS = (
    "memory_planning_algo",
    "allow_lifetime_and_storage_overlap",
    "alloc_graph_input",
    "alloc_graph_output",
    "alloc_mutable_buffers",
    "share_mutable_buffers",
    "alignment",
)
"""`MemoryPlanningPass.__init__`'s parameters, each stored as the attribute of the same name."""


def is_default_algorithm(algorithm: Any) -> bool:
    """True for ExecuTorch's default, `MemoryPlanningAlgorithmSuite()` (greedy alone): memplan's own
    algorithm then plans, and the stock figure is that greedy's."""
    return isinstance(algorithm, MemoryPlanningAlgorithmSuite) and list(algorithm.algo_list) == [greedy]


def stock_arguments(stock: MemoryPlanningPass) -> dict[str, Any]:
    """The arguments `stock` was built with, as `PlannerPass` takes them."""
    arguments = {name: getattr(stock, name) for name in STOCK_ARGUMENTS}
    if is_default_algorithm(arguments["memory_planning_algo"]):
        arguments["memory_planning_algo"] = None
    return arguments


def as_planner(stock: object, options: dict[str, Any]) -> PlannerPass | str:
    """`stock` as a `PlannerPass` with memplan's `options`, or why it stays as it is."""
    if isinstance(stock, PlannerPass):
        return stock
    if not isinstance(stock, MemoryPlanningPass):
        return f"{type(stock).__name__} is not a MemoryPlanningPass; left as it is"
    arguments = stock_arguments(stock)
    if type(stock) is MemoryPlanningPass:
        return PlannerPass(**arguments, **options)
    rebased = _rebased(type(stock))
    planner = rebased.__new__(rebased)
    planner.__dict__.update(stock.__dict__)  # the subclass's own attributes
    PlannerPass.__init__(planner, **arguments, **options)
    return planner


_REBASED: dict[type, type[PlannerPass]] = {}


def _rebased(cls: type[MemoryPlanningPass]) -> type[PlannerPass]:
    """`cls` with `PlannerPass` between it and `MemoryPlanningPass`: its overrides first, then memplan's."""
    if cls not in _REBASED:
        namespace = {"__module__": cls.__module__, "__qualname__": cls.__qualname__}
        _REBASED[cls] = type(cls.__name__, (cls, PlannerPass), namespace)
    return _REBASED[cls]
