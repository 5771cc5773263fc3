"""What can be swept: zoo models and solvers, each with a one-line description."""

from __future__ import annotations

import sys


def models() -> list[tuple[str, str]]:
    """(name, description; how it is lowered) of every zoo model, in zoo order."""
    from memplan.experiments import zoo

    built = [(name, zoo.get(name)) for name in zoo.names()]
    return [(name, f"{m.description}; lowered with {m.lowering}") for name, m in built]


def solvers() -> list[tuple[str, str]]:
    """(name, first line of its module's docstring) of every registered solver."""
    from memplan import solvers as registry

    entries = []
    for name in registry.available():
        module = sys.modules[registry.get_solver(name).__module__]
        doc = (module.__doc__ or "").strip().splitlines()
        entries.append((name, doc[0] if doc else ""))
    return entries


def describe(entries: list[tuple[str, str]]) -> str:
    """`name  description` lines, names padded to one column."""
    width = max((len(n) for n, _ in entries), default=0)
    return "\n".join(f"{n.ljust(width)}  {d}" for n, d in entries)
