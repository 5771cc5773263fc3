"""Mutable state updated where it lives: write-back `copy_` removal (see `writeback`), and the
write window every lever that places a tensor inside another must respect (see `window`)."""

from __future__ import annotations

import torch
from torch.export.exported_program import ExportGraphSignature

from memplan.planner.levers.state_in_place.analysis import (
    StateRefusal,
    StateStatus,
    WriteBack,
    analyze,
    is_write_back,
)
from memplan.planner.levers.state_in_place.kernels import ALIAS_SAFE_ARGS, alias_safe_args
from memplan.planner.levers.state_in_place.report import StateReport
from memplan.planner.levers.state_in_place.rewrite import StateRewriteError, rewrite
from memplan.planner.levers.state_in_place.window import ExtraWrite, LateRead, late_reads


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
    "ExtraWrite",
    "LateRead",
    "StateRefusal",
    "StateReport",
    "StateRewriteError",
    "StateStatus",
    "WriteBack",
    "alias_safe_args",
    "analyze",
    "is_write_back",
    "late_reads",
    "rewrite",
    "update_state_in_place",
]
