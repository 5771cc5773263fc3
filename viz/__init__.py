"""Plots of problems and plans (pure matplotlib; no notebooks or CLI here)."""

from memplan.viz.banks import bank_gantt, bank_profile
from memplan.viz.breakdown import anytime, fragmentation, kinds
from memplan.viz.captions import describe
from memplan.viz.compare import compare
from memplan.viz.gantt import gantt
from memplan.viz.profile import peak_window, profile
from memplan.viz.side_by_side import panels, side_by_side

__all__ = [
    "anytime",
    "bank_gantt",
    "bank_profile",
    "compare",
    "describe",
    "fragmentation",
    "gantt",
    "kinds",
    "panels",
    "peak_window",
    "profile",
    "side_by_side",
]

if __name__ != "memplan.viz":  # pragma: no cover - only a wrong sys.path gets here
    raise ImportError(
        f"memplan's viz/ directory was imported as {__name__!r}; it is the package"
        " memplan.viz (install memplan with pip and import memplan.viz)"
    )
