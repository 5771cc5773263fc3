"""Mutable state updated where it lives: write-back `copy_` removal (`analysis` decides, `rewrite`
carries the decisions out, `report` counts them; the write window it shares with every placing lever
is `levers.write_window`)."""

from __future__ import annotations

import torch
from torch.export.exported_program import ExportGraphSignature

from memplan.planner.levers.state_in_place.analysis import StateStatus, WriteBack, analyze, is_write_back
from memplan.planner.levers.state_in_place.kernels import ALIAS_SAFE_ARGS, alias_safe_args
from memplan.planner.levers.state_in_place.report import StateReport
from memplan.planner.levers.state_in_place.rewrite import StateRewriteError, rewrite


def update_state_in_place(
    graph_module: torch.fx.GraphModule,
    graph_signature: ExportGraphSignature | None,
    *,
    state_planned: bool = True,
) -> StateReport:
    """Decide every write-back of the graph and rewrite it accordingly (before planning).

    The graph module's code is stale until the caller recompiles it (the pass does, after planning).
    """
    decisions = analyze(graph_module, graph_signature, state_planned=state_planned)
    removed = rewrite(graph_module, decisions)
    return StateReport(tuple(decisions), removed)


__all__ = [
    "ALIAS_SAFE_ARGS",
    "StateReport",
    "StateRewriteError",
    "StateStatus",
    "WriteBack",
    "alias_safe_args",
    "analyze",
    "is_write_back",
    "rewrite",
    "update_state_in_place",
]
