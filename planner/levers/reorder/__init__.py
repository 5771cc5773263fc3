"""Reorder: the method's instructions given a memory-aware order before it is planned.

Lowering loses the order a program was written in: when a partitioner fuses each partition into a
delegate call, `create_submodule_from_nodes` (executorch/exir/lowered_backend_module.py) re-sorts
the whole graph with torch.fx's `legalize_graph`, a Kahn topological sort that runs every node
whose inputs are ready first. A tiled CNN's bands then start with every band's slice of the input
(and its quantize), all live at once. This lever gives the graph back the order `to_edge` numbered it in
(`exported`) and sinks each instruction to just before its first user where that lengthens no other
tensor's lifetime (`sink`), only moving what has no side effects (`legality`); of the orders tried the
one with the lowest live-bytes lower bound is kept, and only if that bound does not grow (`lever`).
On exactly when tiling is, unless told (`PlannerPass(reorder=True/False)`); it runs first.
"""

from memplan.planner.levers.reorder.lever import ReorderLever, ReorderOptions
from memplan.planner.levers.reorder.report import ReorderReport

__all__ = ["ReorderLever", "ReorderOptions", "ReorderReport"]
