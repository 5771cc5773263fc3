"""What a sweep may be asked for: its runs (`StockRun`, `PlanRun`), the grid of them, and the checks.

A bad value raises `UsageError` naming it and the valid choices, before
any work starts.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from memplan.errors import UsageError
from memplan.experiments.checks import check_alignment, check_choice, check_model, check_time_limit
from memplan.experiments.sweep.executors import EXECUTORS
from memplan.solvers import DEFAULT_ALIGNMENT, DEFAULT_TIME_LIMIT_S

DEFAULT_ALIGNMENTS = (DEFAULT_ALIGNMENT,)
DEFAULT_CAT_FUSION = (True,)

# Settings that, with model and solver, identify a run (and so a resumable unit).
SETTINGS = ("alignment", "cat_fusion", "time_limit_s", "reproducible")
KEY = ("model", "solver", *SETTINGS)


@dataclass(frozen=True)
class StockRun:
    """Lower `model` with ExecuTorch's own MemoryPlanningPass at `alignment` (its banked pass under a map)."""

    model: str
    alignment: int
    memory_map: str = ""  # "sram:64KiB,dram:16MiB" (planner.memory.bank_maps.parse_memory_map), "" for none
    lowering: str = ""  # the user's lowering options (zoo.programs.lowering_text), "" for the model's own

    @property
    def key(self) -> tuple:
        key = ("stock", self.model, self.alignment) + ((self.memory_map,) if self.memory_map else ())
        return key + ((self.lowering,) if self.lowering else ())


@dataclass(frozen=True)
class PlanRun:
    """Lower `model` with PlannerPass(solver, settings); `check` also runs it against eager."""

    model: str
    solver: str
    alignment: int
    cat_fusion: bool
    time_limit_s: float
    check: bool = False
    reproducible: bool = False  # the solver's reproducible mode (solvers.solve)
    memory_map: str = ""  # as in StockRun; part of the key only when given (older run logs stay valid)
    lowering: str = ""  # as in StockRun; part of the key only when given
    tiling: str = ""  # tiling_text of the TilingOptions every method is tiled with; in the key when given

    @property
    def key(self) -> tuple:
        key = (
            "plan",
            self.model,
            self.solver,
            self.alignment,
            self.cat_fusion,
            self.time_limit_s,
            self.reproducible,
        )
        return (
            key
            + ((self.memory_map,) if self.memory_map else ())
            + ((self.lowering,) if self.lowering else ())
            + ((self.tiling,) if self.tiling else ())
        )


def tiling_text(options: Any) -> str:
    """A TilingOptions as the sweep keeps it ("" for no tiling): `max_extra_macs=0.15[,budget=N]`."""
    if options is None:
        return ""
    text = f"max_extra_macs={options.max_extra_macs:g}"
    return text + (f",budget={options.budget_bytes}" if options.budget_bytes is not None else "")


def tiling_options_of(text: str) -> Any:
    """`tiling_text`'s TilingOptions back (None for "")."""
    from memplan.planner.tiling import TilingOptions

    if not text:
        return None
    fields = dict(part.split("=", 1) for part in text.split(","))
    budget = fields.get("budget")
    return TilingOptions(float(fields["max_extra_macs"]), int(budget) if budget is not None else None)


Run = StockRun | PlanRun


def grid(
    models: Sequence[str],
    solvers: Sequence[str],
    alignments: Sequence[int] = DEFAULT_ALIGNMENTS,
    cat_fusion: Sequence[bool] = DEFAULT_CAT_FUSION,
    time_limit_s: float = DEFAULT_TIME_LIMIT_S,
    check: bool = False,
    reproducible: bool = False,
    memory_map: str = "",
    lowering: str = "",
    tiling: str = "",
) -> list[Run]:
    """Every run of the sweep, model by model, each model's stock runs first.

    Model-major order, with the executor's affinity by model, lets a worker
    process reuse the model it exported for the previous run. Repeated names
    count once.
    """
    runs: list[Run] = []
    for model in dict.fromkeys(models):
        runs += [StockRun(model, a, memory_map, lowering) for a in dict.fromkeys(alignments)]
        runs += [
            PlanRun(
                model, solver, a, fuse, float(time_limit_s), check, reproducible, memory_map, lowering, tiling
            )
            for a in dict.fromkeys(alignments)
            for fuse in dict.fromkeys(cat_fusion)
            for solver in dict.fromkeys(solvers)
        ]
    return runs


def validate_grid(
    models: Sequence[str],
    solvers: Sequence[str],
    alignments: Sequence[int],
    cat_fusion: Sequence[bool],
    time_limit_s: float,
    jobs: int,
    executor: str,
    memory_map: str = "",
) -> None:
    """Raise `UsageError` naming the bad value and the valid choices."""
    from memplan import solvers as solver_registry
    from memplan.experiments import zoo

    if not models:
        raise UsageError(f"no model given; choose from: {', '.join(zoo.names())}")
    if not solvers:
        raise UsageError(f"no solver given; choose from: {', '.join(solver_registry.available())}")
    for name in models:
        check_model(name)
    for name in solvers:
        check_choice("solver", name, solver_registry.available())
    if memory_map:
        check_memory_map(memory_map, solvers)
    if not alignments:
        raise UsageError("no alignment given; give powers of two such as 16")
    for alignment in alignments:
        check_alignment(alignment)
    if not cat_fusion:
        raise UsageError("cat fusion needs at least one of: on, off")
    check_time_limit(time_limit_s)
    if jobs < 1:
        raise UsageError(f"jobs must be at least 1, got {jobs}")
    if executor not in EXECUTORS:
        raise UsageError(f"unknown executor {executor!r}; choose one of: {', '.join(EXECUTORS)}")


BANK_SWEEP_SOLVERS = ("greedy", "bestfit", "cpsat")  # under a map: banked_greedy, banked_bestfit, cpsat


def check_memory_map(memory_map: str, solvers: Sequence[str]) -> None:
    """The map must parse, and every solver must be able to plan across banks."""
    from memplan.planner.memory.bank_maps import parse_memory_map

    try:
        parse_memory_map(memory_map)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    cannot = [s for s in solvers if s not in BANK_SWEEP_SOLVERS]
    if cannot:
        raise UsageError(
            f"solvers {cannot} cannot plan across the banks of --memory-map; choose from"
            f" {', '.join(BANK_SWEEP_SOLVERS)} (greedy = ExecuTorch's BankedGreedy)"
        )
