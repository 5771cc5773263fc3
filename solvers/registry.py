"""The registered solvers as values, and the questions asked of them: which exists, which plans under a memory map.

An entry's fallbacks and banked counterpart are entries themselves (XLA's
`HeapAlgorithmWithFallback` holds algorithms, not names), so composing them
(`solvers.fallback`) needs no lookup by name. Entries are defined before the
entries that fall back to them; the dictionaries list them in the order
`available()` shows.
"""

from __future__ import annotations

import dataclasses

from memplan.bank_placement import place_in_banks
from memplan.errors import UnknownSolverError, UnsupportedProblemError
from memplan.problem import Problem
from memplan.solvers.contract import Capabilities, SolverEntry

_PLACEMENT = Capabilities(fixed_offsets=True, groups=True, same_offsets=True, capacity=False)
_EXACT = Capabilities(fixed_offsets=True, groups=True, same_offsets=True, capacity=True)

# Solvers for problems with banks only (a memory map); `available(banks=True)` lists them.
BANKED_GREEDY = SolverEntry(
    "banked_greedy",
    "memplan.solvers.banked.banked_greedy:solve_banked_greedy",
    "memplan.solvers.banked.banked_greedy:BankedGreedyParams",
    Capabilities(
        fixed_offsets=True, groups=True, same_offsets=False, capacity=False, banks=True, shared_objects=True
    ),
    reproducible="deterministic",
)
BANKED_BESTFIT = SolverEntry(
    "banked_bestfit",
    "memplan.solvers.banked.banked_bestfit:solve_banked_bestfit",
    "memplan.solvers.banked.banked_bestfit:BankedBestfitParams",
    dataclasses.replace(_PLACEMENT, banks=True, fixed_in_banks=True),
    reproducible="untimed",
)

GREEDY = SolverEntry(
    "greedy",
    "memplan.solvers.heuristics.greedy:solve_greedy",
    "memplan.solvers.heuristics.greedy:GreedyParams",
    Capabilities(fixed_offsets=False, groups=True, same_offsets=False, capacity=False, shared_objects=True),
    banked=BANKED_GREEDY,
    reproducible="deterministic",
)
BESTFIT = SolverEntry(
    "bestfit",
    "memplan.solvers.heuristics.bestfit:solve_bestfit",
    "memplan.solvers.heuristics.bestfit:BestfitParams",
    _PLACEMENT,
    fallback=(GREEDY,),
    banked=BANKED_BESTFIT,
    reproducible="untimed",
)
SKYLINE = SolverEntry(
    "skyline",
    "memplan.solvers.heuristics.skyline:solve_skyline",
    "memplan.solvers.heuristics.skyline:SkylineParams",
    _PLACEMENT,
    reproducible="untimed",
)
CPSAT = SolverEntry(
    "cpsat",
    "memplan.solvers.cpsat.driver:solve_cpsat",
    "memplan.solvers.cpsat.params:CpsatParams",
    dataclasses.replace(_EXACT, banks=True, fixed_in_banks=True),
    fallback=(BESTFIT, GREEDY),
    bank_fallback=(BANKED_BESTFIT,),
    reproducible="option",
)
MILP = SolverEntry(
    "milp",
    "memplan.solvers.exact.milp:solve_milp",
    "memplan.solvers.exact.milp:MilpParams",
    _EXACT,
    fallback=(BESTFIT, GREEDY),
)

# The shared-objects form (`Problem.shared_objects`): with or without banks; its plans suit any problem.
SHARED_OBJECTS = SolverEntry(
    "shared_objects",
    "memplan.solvers.shared_objects.best_packing:solve_shared_objects",
    "memplan.solvers.shared_objects.best_packing:SharedObjectsParams",
    dataclasses.replace(_PLACEMENT, banks=True, shared_objects=True),
    reproducible="untimed",
)

REGISTRY: dict[str, SolverEntry] = {e.name: e for e in (GREEDY, BESTFIT, SKYLINE, CPSAT, MILP)}
BANK_ONLY: dict[str, SolverEntry] = {e.name: e for e in (BANKED_GREEDY, BANKED_BESTFIT)}
# Solvers for one form of problem, not listed by `available()` (sweeps run every listed solver).
FORM_ONLY: dict[str, SolverEntry] = {SHARED_OBJECTS.name: SHARED_OBJECTS}

# Solvers that choose a bank for each buffer themselves. The others plan a problem with banks
# only when no buffer has a choice (every buffer in its pool, capacities checked afterwards).
BANK_SOLVERS: tuple[str, ...] = tuple(name for name, e in (BANK_ONLY | REGISTRY).items() if e.supports.banks)


def available(banks: bool = False) -> list[str]:
    """Names accepted by `solve`; with `banks`, the solvers that choose banks (for memory maps)."""
    return list(BANK_SOLVERS) if banks else list(REGISTRY)


def reproducible_solvers() -> list[str]:
    """Names of the solvers with a reproducible mode (`SolverEntry.reproducible`)."""
    return [name for name, e in (REGISTRY | BANK_ONLY | FORM_ONLY).items() if e.reproducible]


def entry(name: str) -> SolverEntry:
    """The registry entry of `name`; an unknown name raises `UnknownSolverError` listing the valid ones."""
    found = REGISTRY.get(name) or BANK_ONLY.get(name) or FORM_ONLY.get(name)
    if found is None:
        raise UnknownSolverError(
            f"unknown solver {name!r}; choose one of: {', '.join(available())}"
            f" (for memory maps also {', '.join(BANK_ONLY)}; for shared objects {', '.join(FORM_ONLY)})"
        )
    return found


def for_memory_map(name: str) -> SolverEntry:
    """The solver that plans for `name` under a memory map: itself or its banked counterpart;
    `UnsupportedProblemError` if neither chooses banks."""
    spec = entry(name)
    banked = spec.banked or spec
    if not banked.supports.banks:
        choices = ", ".join(n for n in BANK_SOLVERS)
        raise UnsupportedProblemError(
            f"{name} cannot plan across the banks of a memory map; use one of {choices}"
            " (greedy and bestfit stand for banked_greedy and banked_bestfit)",
            "banks",
        )
    return banked


def alternatives(problem: Problem) -> list[SolverEntry]:
    """The solvers an error about `problem` may suggest: the bank solvers for a problem with banks,
    and those making shared objects when it asks for them."""
    found = [entry(name) for name in BANK_SOLVERS] if problem.banks else list(REGISTRY.values())
    if problem.shared_objects:
        found = [e for e in found if e.supports.shared_objects] + list(FORM_ONLY.values())
    return found


def prepared(problem: Problem, spec: SolverEntry) -> Problem:
    """What `spec` plans for `problem`: a problem with banks goes to a solver without bank choice
    placed in its banks (possible only when no buffer has a choice)."""
    if not problem.banks or spec.supports.banks:
        return problem
    if problem.has_bank_choice:
        raise UnsupportedProblemError(
            f"{spec.name} cannot choose banks, but buffers of this problem may go to several;"
            f" use one of {', '.join(sorted(BANK_SOLVERS))}",
            "banks",
        )
    return place_in_banks(problem, {})
