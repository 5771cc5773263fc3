"""An interactive, self-contained HTML report of a program's memory plan, and the diff of two programs.

`memplan report` and `PlannedModel.report` write it; the notebooks show its figures inline.
Layers: `model` (the data), `sources` (built from a lowering or a `.pte`), `explain` (what memplan did
per tensor), `budget` (the whole budget, a verdict per bank), `figures` (plotly), `page` (the HTML),
`diff` (two programs compared).
"""

from memplan.viz.report.budget import BudgetBank, parse_budget, verdicts
from memplan.viz.report.diff import ProgramDiff, diff_programs
from memplan.viz.report.figures import arena_figure, profile_figure
from memplan.viz.report.model import (
    BankedPlan,
    BankUse,
    LeverTry,
    MethodReport,
    PlanView,
    ProgramReport,
    TensorInfo,
)
from memplan.viz.report.page import render, write
from memplan.viz.report.sources import from_lowered, from_pte

__all__ = [
    "BankUse",
    "BankedPlan",
    "BudgetBank",
    "LeverTry",
    "MethodReport",
    "PlanView",
    "ProgramDiff",
    "ProgramReport",
    "TensorInfo",
    "arena_figure",
    "diff_programs",
    "from_lowered",
    "from_pte",
    "parse_budget",
    "profile_figure",
    "render",
    "verdicts",
    "write",
]
