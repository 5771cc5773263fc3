"""What a registered solver promises: the constraints it honours, its parameters, its fallbacks.

In the spirit of XLA's `HeapAlgorithm` / `HeapAlgorithmWithFallback` and
MiniMalloc's `SolverParams`: every registry entry declares what it supports,
so `solve()` refuses a problem it cannot plan before any work (naming the
capability), and its parameters are one frozen dataclass whose fields are the
techniques it can switch.
"""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from enum import Enum
from typing import Any

from memplan.errors import SolverOptionError, UnsupportedProblemError
from memplan.plan import Plan
from memplan.problem import Problem


@dataclass(frozen=True)
class Capabilities:
    """The problem features a solver honours. Without one, `solve()` raises `UnsupportedProblemError`."""

    fixed_offsets: bool  # buffers pinned at a given offset (`Buffer.offset`)
    groups: bool  # contiguous groups: members at fixed offsets inside a parent
    same_offsets: bool  # sets of buffers that must share one offset
    capacity: bool  # searches within `Problem.capacity`; False: its plan is only checked against it
    banks: bool = False  # chooses among several memory banks with their own capacities
    fixed_in_banks: bool = False  # buffers pinned at an offset that list banks (the bank is still chosen)
    shared_objects: bool = False  # the shared-objects form (`Problem.shared_objects`)

    def missing(self, problem: Problem) -> list[str]:
        """The capabilities `problem` needs that are absent (capacity is never refused: it is checked)."""
        needed = {
            "fixed_offsets": any(b.offset is not None for b in problem.buffers),
            "groups": bool(problem.groups),
            "same_offsets": bool(problem.same_offsets),
            "fixed_in_banks": bool(_fixed_in_banks(problem)),
            "shared_objects": problem.shared_objects,
        }
        return [name for name, needs in needed.items() if needs and not getattr(self, name)]


class Form(Enum):
    """Which problems a registered solver is for, which decides where it is listed."""

    ANY = "any"  # any problem (listed by `available()`, run by sweeps); a memory map via `banked`
    BANKS = "banks"  # problems with banks only (listed by `available(banks=True)`)
    SHARED_OBJECTS = (
        "shared_objects"  # the shared-objects form, with or without banks; its plans suit any problem
    )


@dataclass(frozen=True)
class SolverEntry:
    """One registered solver: where it lives, what it supports, and what backs it up.

    `function` and `params` are "module:name" strings, imported on first use so
    that asking for `bestfit` never imports OR-Tools or PuLP. `fallback` holds
    the entries whose plans replace this one's when they are smaller and this
    one's is not proven optimal (`solvers.fallback`); under a memory map the
    `banked` counterpart plans instead, with `bank_fallback`. They are entries,
    not names: composing them needs no registry lookup.
    """

    name: str
    function: str  # "module:function" with signature (problem, params, *, time_limit_s) -> Plan
    params: str  # "module:Class" of its frozen parameter dataclass
    supports: Capabilities
    fallback: tuple[SolverEntry, ...] = ()
    banked: SolverEntry | None = None  # the solver that stands for this one under a memory map (None: itself)
    bank_fallback: tuple[SolverEntry, ...] = ()  # fallbacks under a memory map, compared by traffic cost
    # How it gives the same plan on every run: "deterministic" (always), "untimed" (every ordering,
    # no time cut), "option" (its params take reproducible=True); "": it cannot.
    reproducible: str = ""
    form: Form = Form.ANY

    def load(self) -> Callable[..., Plan]:
        return _load(self.function)

    def params_type(self) -> type:
        return _load(self.params)

    def make_params(self, options: dict[str, Any]) -> Any:
        """The parameter object for keyword options; an unknown name raises `SolverOptionError`."""
        cls = self.params_type()
        known = [f.name for f in dataclasses.fields(cls)]
        unknown = sorted(set(options) - set(known))
        if unknown:
            raise SolverOptionError(
                f"{self.name}: unknown option(s) {unknown}; its options are: {', '.join(known) or 'none'}"
            )
        return cls(**options)

    def check(self, problem: Problem, registry: Iterable[SolverEntry] = ()) -> None:
        """Raise `UnsupportedProblemError` naming the first capability `problem` needs and this lacks,
        the buffers that need it, and the registered solvers that have it."""
        missing = self.supports.missing(problem)
        if not missing:
            return
        capability = missing[0]
        others = [e.name for e in registry if getattr(e.supports, capability)]
        use = f"; use {', '.join(others[:-1])} or {others[-1]}" if len(others) > 1 else ""
        use = f"; use {others[0]}" if len(others) == 1 else use
        raise UnsupportedProblemError(
            f"{self.name} cannot honour {_WHAT[capability]}, but {_needing(problem, capability)}{use}",
            capability,
        )


_WHAT = {
    "fixed_offsets": "fixed offsets",
    "groups": "contiguous groups",
    "same_offsets": "same-offset sets",
    "fixed_in_banks": "fixed offsets on buffers that choose a bank",
    "shared_objects": "the shared-objects form (intersecting buffers start at the same offset)",
}


def _fixed_in_banks(problem: Problem) -> list[str]:
    """The buffers pinned at an offset (themselves or through a group member) that list banks."""
    fixed_roots = {problem.root_of(b.id)[0] for b in problem.buffers if b.offset is not None}
    return [r for r in fixed_roots if problem.buffer(r).banks]


def _needing(problem: Problem, capability: str) -> str:
    """The buffers of `problem` that need `capability`, in words (the first ten)."""
    if capability == "fixed_offsets":
        return f"buffers {_names([b.id for b in problem.buffers if b.offset is not None])} are pinned"
    if capability == "fixed_in_banks":
        return f"buffers {_names(sorted(_fixed_in_banks(problem)))} are pinned at an offset and list banks"
    if capability == "shared_objects":
        return "the problem asks for shared objects (ExecuTorch's allow_overlapping_allocations=False)"
    if capability == "groups":
        return f"buffers {_names([g.parent for g in problem.groups])} hold contiguous groups"
    return f"the problem has same-offset sets {_names([list(s.buffers) for s in problem.same_offsets])}"


def _names(items: list[Any]) -> str:
    shown = ", ".join(repr(x) for x in items[:10])
    return shown + (f" and {len(items) - 10} more" if len(items) > 10 else "")


def _load(target: str) -> Any:
    module_name, attribute = target.split(":")
    return getattr(importlib.import_module(module_name), attribute)
