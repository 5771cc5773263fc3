"""What the fuzzers (`bench.fuzz`, its bank part `bench.fuzz_banks`) share: their tally of outcomes, and
what an error message claims against the error's `proven` flag.

A solver that gives up must not say it proved anything, and a proof must carry `proven=True`; the
fuzzers count a disagreement as a false proof.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from dataclasses import dataclass, field

from memplan.problem import Problem

_CLAIM = re.compile(r"\bprov(ed|en|es)\b", re.IGNORECASE)


def claims_proof(message: str) -> bool:
    """True if an error message says something was proved (and not that it was not)."""
    return bool(_CLAIM.search(message)) and "not proven" not in message.lower()


def honest(message: str, proven: bool) -> bool:
    """An `InfeasibleError`'s message and its `proven` agree: no proof claimed without the flag,
    no flag on a message that says "not proven"."""
    return "not proven" not in message.lower() if proven else not claims_proof(message)


@dataclass
class Report:
    """Counts per solver label and outcome kind, and the failures found (with the problems that failed)."""

    counts: dict[str, Counter] = field(default_factory=lambda: defaultdict(Counter))
    failures: list[tuple[str, str, str]] = field(default_factory=list)  # (problem, solver, what)
    failing: dict[str, Problem] = field(default_factory=dict)

    def fail(self, problem: Problem, label: str, kind: str, what: str) -> None:
        self.counts[label][kind] += 1
        self.failures.append((problem.name, label, f"{kind}: {what}"))
        self.failing[problem.name] = problem

    def total(self, kind: str) -> int:
        return sum(c[kind] for c in self.counts.values())
