"""The registered solvers as values, and the questions asked of them: which exists, which plans under a memory map.

An entry's fallbacks and banked counterpart are entries themselves (XLA's
`HeapAlgorithmWithFallback` holds algorithms, not names), so composing them
(`solvers.fallback`) needs no lookup by name. Entries are defined before the
entries that fall back to them. One mapping, `SOLVERS`, holds them all; each
entry's `form` says which problems it is for, and every list of names below is
read off that mapping (in its order, form by form).
"""

from __future__ import annotations

import dataclasses

from memplan.bank_placement import place_in_banks
from memplan.errors import UnknownSolverError, UnsupportedProblemError
from memplan.problem import Problem
from memplan.solvers.contract import Capabilities, Form, SolverEntry

_PLACEMENT = Capabilities(fixed_offsets=True, groups=True, same_offsets=True, capacity=False)
_EXACT = Capabilities(fixed_offsets=True, groups=True, same_offsets=True, capacity=True)

BANKED_GREEDY = SolverEntry(
    "banked_greedy",
    "memplan.solvers.banked.banked_greedy:solve_banked_greedy",
    "memplan.solvers.banked.banked_greedy:BankedGreedyParams",
    Capabilities(
        fixed_offsets=True, groups=True, same_offsets=False, capacity=False, banks=True, shared_objects=True
    ),
    reproducible="deterministic",
    form=Form.BANKS,
)
BANKED_BESTFIT = SolverEntry(
    "banked_bestfit",
    "memplan.solvers.banked.banked_bestfit:solve_banked_bestfit",
    "memplan.solvers.banked.banked_bestfit:BankedBestfitParams",
    dataclasses.replace(_PLACEMENT, banks=True, fixed_in_banks=True),
    reproducible="untimed",
    form=Form.BANKS,
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

SHARED_OBJECTS = SolverEntry(
    "shared_objects",
    "memplan.solvers.shared_objects.best_packing:solve_shared_objects",
    "memplan.solvers.shared_objects.best_packing:SharedObjectsParams",
    dataclasses.replace(_PLACEMENT, banks=True, shared_objects=True),
    reproducible="untimed",
    form=Form.SHARED_OBJECTS,
)

SOLVERS: dict[str, SolverEntry] = {
    e.name: e for e in (BANKED_GREEDY, BANKED_BESTFIT, GREEDY, BESTFIT, SKYLINE, CPSAT, MILP, SHARED_OBJECTS)
}
"""Every registered solver by name, each entry tagged with its `form`."""


def of_form(*forms: Form) -> list[str]:
    """Names of the solvers of `forms`, form by form, each in registry order."""
    return [name for form in forms for name, e in SOLVERS.items() if e.form is form]


def available(banks: bool = False) -> list[str]:
    """Names accepted by `solve` for any problem; with `banks`, the solvers that choose banks (for
    memory maps: the others plan a problem with banks only when no buffer has a choice)."""
    if banks:
        return [name for name in of_form(Form.BANKS, Form.ANY) if SOLVERS[name].supports.banks]
    return of_form(Form.ANY)


def reproducible_solvers() -> list[str]:
    """Names of the solvers with a reproducible mode (`SolverEntry.reproducible`)."""
    return [name for name in of_form(*Form) if SOLVERS[name].reproducible]


def makes_shared_objects(name: str) -> bool:
    """True for a registered solver whose plans always take the shared-objects form."""
    found = SOLVERS.get(name)
    return found is not None and found.form is Form.SHARED_OBJECTS


def entry(name: str) -> SolverEntry:
    """The registry entry of `name`; an unknown name raises `UnknownSolverError` listing the valid ones."""
    found = SOLVERS.get(name)
    if found is None:
        raise UnknownSolverError(
            f"unknown solver {name!r}; choose one of: {', '.join(available())}"
            f" (for memory maps also {', '.join(of_form(Form.BANKS))};"
            f" for shared objects {', '.join(of_form(Form.SHARED_OBJECTS))})"
        )
    return found


def for_memory_map(name: str) -> SolverEntry:
    """The solver that plans for `name` under a memory map: itself or its banked counterpart;
    `UnsupportedProblemError` if neither chooses banks."""
    spec = entry(name)
    banked = spec.banked or spec
    if not banked.supports.banks:
        choices = ", ".join(available(banks=True))
        raise UnsupportedProblemError(
            f"{name} cannot plan across the banks of a memory map; use one of {choices}"
            " (greedy and bestfit stand for banked_greedy and banked_bestfit)",
            "banks",
        )
    return banked


def alternatives(problem: Problem) -> list[SolverEntry]:
    """The solvers an error about `problem` may suggest: the bank solvers for a problem with banks,
    and those making shared objects when it asks for them."""
    found = [SOLVERS[name] for name in available(banks=bool(problem.banks))]
    if problem.shared_objects:
        found = [e for e in found if e.supports.shared_objects] + [
            SOLVERS[name] for name in of_form(Form.SHARED_OBJECTS)
        ]
    return found


def prepared(problem: Problem, spec: SolverEntry) -> Problem:
    """What `spec` plans for `problem`: a problem with banks goes to a solver without bank choice
    placed in its banks (possible only when no buffer has a choice)."""
    if not problem.banks or spec.supports.banks:
        return problem
    if problem.has_bank_choice:
        raise UnsupportedProblemError(
            f"{spec.name} cannot choose banks, but buffers of this problem may go to several;"
            f" use one of {', '.join(sorted(available(banks=True)))}",
            "banks",
        )
    return place_in_banks(problem, {})
