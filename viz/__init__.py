"""Plots of problems and plans (pure matplotlib; no notebooks or CLI here)."""

from viz.compare import compare
from viz.gantt import gantt
from viz.profile import profile
from viz.side_by_side import panels, side_by_side

__all__ = ["compare", "gantt", "panels", "profile", "side_by_side"]
