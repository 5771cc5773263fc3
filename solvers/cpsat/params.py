"""The options of `solve_cpsat` (`CpsatParams`) and the defaults they start from.

A module of its own so that the entry point (`driver`), the reproducible mode
and the registry read the options without importing each other. Why the
constants have their values: docs/exact_solver.md, "Tuning constants".
"""

from __future__ import annotations

from dataclasses import dataclass

from memplan.errors import SolverOptionError
from memplan.solvers.cpsat.placement_model import SKYLINE_ORDERS
from memplan.solvers.cpsat.searches import LADDER
from memplan.solvers.exact.canonical import PREORDER_LETTERS

DEFAULT_WORKERS = 2
"""Workers of CP-SAT's default search; the machines this runs on have two cores.
The skyline portfolio runs one single-worker thread per order instead."""

SEARCHES = ("auto", "skyline", "default")

PORTFOLIO = ("start", "lifetime", "start-area")
"""Orders run side by side by default: together they find plans for all eleven
MiniMalloc benchmarks at their capacity, none of them alone does."""

CANONICAL = ("TWA",)
"""MiniMalloc preorders of the canonical search (solvers.exact.canonical) in decisions: the first gets
the head start (`CANONICAL_HEAD_START`); with `canonical_in_portfolio` all of them take turns in one
more thread beside the skyline portfolio (off by default: there it decided nothing sooner)."""

CANONICAL_HEAD_START = 5
"""Nodes per unit the canonical search gets alone in a decision, before the heuristics and the
portfolio start: enough to decide the instances it decides at all, little for the others."""

CANONICAL_DESCENT = 3
"""Minimising one pool: before the skyline probes, the canonical search asks for the lower bound
(`CANONICAL_HEAD_START` nodes per unit), then bisects between it and the heuristic plan, each probe
limited to this many nodes per unit, so it does the same work at any machine load (a probe out of
nodes raises only its own floor, not the proven one)."""


@dataclass(frozen=True)
class CpsatParams:
    """The techniques of `solve_cpsat`, each switchable so a benchmark can show what it adds."""

    num_workers: int = DEFAULT_WORKERS  # workers of CP-SAT's default search
    warm_start: bool = (
        True  # the heuristic plan is a hint and an upper bound; at the lower bound it is returned
    )
    cumulative: bool = True  # a redundant Cumulative per pool (bytes live at once <= the arena)
    symmetry: bool = True  # identical free units that live together are ordered by offset
    decompose: bool = True  # independent parts (solvers.exact.decompose) are solved one by one
    search: str = "auto"  # "auto", "skyline" (the portfolio and probes only) or "default" (CP-SAT's own)
    skyline_orders: tuple[str, ...] = PORTFOLIO  # tie-break orders run side by side by the skyline portfolio
    skyline_heuristic: bool = (
        True  # the heuristic plan is the better of best-fit and skyline (False: best-fit)
    )
    ladder: tuple[tuple[str, float], ...] = LADDER  # the rungs of the minimising probes (cpsat_search.LADDER)
    skyline_presolve: bool | None = None  # CP-SAT presolves before each skyline search (None: by size)
    canonical: tuple[str, ...] = (
        CANONICAL  # MiniMalloc preorders of the canonical search (solvers.exact.canonical)
    )
    canonical_head_start: int = CANONICAL_HEAD_START  # its nodes per unit alone, before the rest (0: none)
    canonical_in_portfolio: bool = False  # it also runs beside the skyline portfolio in decisions
    timeout_stops_lower: bool = False  # a bisecting probe out of time stops the probes below it
    canonical_descent: int = CANONICAL_DESCENT  # minimising: its nodes per unit per bisection probe (0: none)
    minimise: bool | None = None  # minimise the arena (None: without a capacity only)
    log: bool = False  # CP-SAT's search log on stdout
    reproducible: bool = False  # deterministic time budget, no races: same input, same plan
    bound_seconds: float = 0.0  # seconds for window lower bounds before the search (0: off)

    def __post_init__(self) -> None:
        object.__setattr__(self, "skyline_orders", tuple(self.skyline_orders))
        object.__setattr__(self, "ladder", tuple(tuple(r) for r in self.ladder))
        object.__setattr__(self, "canonical", tuple(self.canonical))
        if self.canonical_head_start < 0 or self.canonical_descent < 0:
            raise SolverOptionError(
                f"cpsat: canonical_head_start and canonical_descent are nodes per unit, >= 0; got"
                f" {self.canonical_head_start} and {self.canonical_descent}"
            )
        bad_codes = [c for c in self.canonical if not c or set(c) - set(PREORDER_LETTERS)]
        if bad_codes:
            raise SolverOptionError(
                f"cpsat: bad canonical preorders {bad_codes}; each is letters from {PREORDER_LETTERS!r}"
            )
        if self.num_workers < 1:
            raise SolverOptionError(f"cpsat: num_workers must be >= 1, got {self.num_workers}")
        if self.search not in SEARCHES:
            raise SolverOptionError(
                f"cpsat: unknown search {self.search!r}; choose one of: {', '.join(SEARCHES)}"
            )
        unknown = [o for o in self.skyline_orders if o not in SKYLINE_ORDERS]
        if unknown or not self.skyline_orders:
            raise SolverOptionError(
                f"cpsat: unknown skyline orders {unknown}; choose from {', '.join(SKYLINE_ORDERS)}"
            )
        bad_rungs = [
            r for r in self.ladder if len(r) != 2 or r[0] not in ("between", "below") or not 0 <= r[1] < 1
        ]
        if not 0 <= self.bound_seconds < float("inf"):
            raise SolverOptionError(f"cpsat: bound_seconds must be >= 0 and finite, got {self.bound_seconds}")
        if self.bound_seconds and self.reproducible:
            raise SolverOptionError(
                "cpsat: bound_seconds is wall-clock time, so the bound depends on the machine's load;"
                " it cannot be combined with reproducible"
            )
        if bad_rungs or not self.ladder:
            raise SolverOptionError(
                f"cpsat: bad ladder rungs {bad_rungs}; each is ('between' or 'below', fraction in [0, 1))"
            )
