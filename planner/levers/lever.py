"""The lever protocol: decide from the graph with reasons, reshape the problem, rewrite the graph, report.

A lever is one folder under `levers/` with a `lever.py` holding its options
(a frozen dataclass whose `enabled` switches it) and a class following
`Lever`, which names its `PlannerPass` keyword and options class;
registering it is one line in `levers.registry.LEVERS` (and its keywords in
`PlannerPass.__init__`, which a test holds to the registry). The pass runs
every lever the same way:

* `decide(site, extraction)`: every candidate instruction decided, each one
  left alone naming its `levers.refusals.Refusal` reasons; the `Decided`
  says how the problem changes (`problem`) and which instructions the
  rewrite deletes (`removes`). A lever whose decisions depend on plans
  (cat fusion keeps only fusions that pay) plans through `site.solve` and
  hands its plans back (`plan`, `without`).
* `rewrite(site, decided, spec_of)`: the graph rewritten to match, once the
  plan is in the specs (a `Phase.GRAPH` lever: before the graph is
  extracted, with no plan yet); returns what its report counts.
* `report(decided, plan, rewritten)`: what the lever did, for
  `results[method].reports`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, ClassVar, Protocol

import torch
from executorch.exir.tensor import TensorSpec
from torch.export.exported_program import ExportGraphSignature

from memplan.plan import Plan
from memplan.planner.graph.extract import Extraction
from memplan.problem import Problem


class Phase(Enum):
    """When a lever runs."""

    GRAPH = "graph"  # decided and carried out on the method's graph before it is extracted
    PROBLEM = "problem"  # decided on the extraction; the graph is rewritten once the plan is written


Cost = Callable[[Problem, Plan, frozenset[str]], tuple[float, int]]
"""The cost of a plan of a problem whose emitted program lacks the named instructions (stages.costs)."""


@dataclass(frozen=True)
class Site:
    """One graph as the levers see it.

    `signature` is the frozen signature the analyses read; `program_signature`
    the program's own, which a rewrite may change (cat fusion renames outputs).
    `solve` plans a problem with the pass's solver (validated); `cost` orders
    plans under a memory map (None without one); `removed` names the
    instructions the levers decided before this one delete; `extract` extracts
    the graph's tensors as they are now, lifetimes from its current order (for a
    graph lever: None where no method's graph is planned).
    """

    graph_module: torch.fx.GraphModule
    signature: ExportGraphSignature | None
    program_signature: ExportGraphSignature | None
    state_planned: bool = True
    outputs_planned: bool = True  # alloc_graph_output
    solve: Callable[[Problem], Plan] | None = None
    cost: Cost | None = None
    removed: frozenset[str] = frozenset()
    extract: Callable[[], Extraction] | None = None


@dataclass(frozen=True)
class Decided:
    """A lever's decisions about one graph and what they do to the problem.

    `decisions` are the lever's own records; `changes` says whether any of them
    changes the program (the graph, or the problem the pass plans); `problem`
    is the reshaped problem (None: unchanged); `removes` the instructions the
    rewrite deletes; `plan` and `without` the plans a lever made to decide (the
    plan of `problem`, and of the problem without the lever: None when only the
    reshaped problem fits).
    """

    decisions: Any
    changes: bool
    problem: Problem | None = None
    removes: frozenset[str] = frozenset()
    plan: Plan | None = None
    without: Plan | None = field(default=None, repr=False)


class Lever(Protocol):
    """One lever, configured by its options (see the module docstring)."""

    name: ClassVar[str]  # how notes, reports and `results[method].reports` name it
    keyword: ClassVar[str]  # its `PlannerPass` keyword; `<keyword>_<field>` sets one field of its options
    options_type: ClassVar[type[Any]]  # its options class (a frozen dataclass with `enabled`)
    phase: ClassVar[Phase]
    # Places a tensor at an offset inside another's allocation: off when the given algorithm plans
    # shared objects (algorithms.translate.NO_FUSION).
    nests: ClassVar[bool]

    def __init__(self, options: Any) -> None: ...

    @property
    def options(self) -> Any:
        """Its frozen options (of `options_type`); `options.enabled` switches it."""

    def decide(self, site: Site, extraction: Extraction | None) -> Decided: ...

    def rewrite(self, site: Site, decided: Decided, spec_of: dict[str, TensorSpec]) -> Any: ...

    def report(self, decided: Decided, plan: Plan | None, rewritten: Any) -> object: ...
