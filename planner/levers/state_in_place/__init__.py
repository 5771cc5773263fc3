"""Mutable state updated where it lives: write-back `copy_` removal (`analysis` decides, `rewrite`
carries the decisions out, `report` counts them, `lever` is the lever protocol's face; the write
window it shares with every placing lever is `levers.write_window`)."""

from __future__ import annotations

from memplan.planner.levers.state_in_place.analysis import StateStatus, WriteBack, analyze, is_write_back
from memplan.planner.levers.state_in_place.kernels import ALIAS_SAFE_ARGS, alias_safe_args
from memplan.planner.levers.state_in_place.report import StateReport
from memplan.planner.levers.state_in_place.rewrite import StateRewriteError, rewrite

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
]
