"""A proof re-checked on the emitted program: "proven optimal" stands only where the arena equals the
least bytes the emitted program's own instruction stream keeps live at once.

The solver proves its plan optimal for the problem the pass built from the graph. What runs is the
program ExecuTorch emits from that graph, and the two can differ (a tensor the problem counts that no
instruction names, an instruction a lever removed). So after planning every method, the pass emits
the program as `to_executorch` is about to, derives each method's lifetimes from its instructions as
`memplan inspect` does (planner.pte), and keeps a proof only when the plan's arena equals that
program's lower bound: no layout of those instructions can then be smaller. Otherwise the plan is
reported as not proven, with both figures. The same equality proves a plan the solver did not (a time
limit, a heuristic, a bound of its problem below the program's): an arena at the emitted program's
lower bound is optimal by definition, so every method's plan is checked, claimed or not.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from memplan.plan import Outcome, Plan
from memplan.planner.compat import PTEFile, serialize_pte_binary
from memplan.planner.pte.program import read_program
from memplan.planner.stages.result import MethodResult


@dataclass(frozen=True)
class EmittedBound:
    """One emitted method's lower bound (None when its lifetimes cannot be derived, and why)."""

    bound: int | None
    why: str = ""


def emitted_bounds(programs: Mapping[str, Any], alignment: int) -> dict[str, EmittedBound]:
    """Per method: the lower bound of the program `emit_program` makes of these ExportedPrograms."""
    from executorch.exir.emit import emit_program

    # The emitter drops the state write-backs from each graph's output node in place; `to_executorch`
    # emits the same graphs next, so each output node gets its arguments back.
    outputs = {name: program.graph_module.graph.output_node() for name, program in programs.items()}
    saved = {name: (node.args, dict(node.meta)) for name, node in outputs.items()}
    try:
        emitted = emit_program(dict(programs))
    finally:
        for name, program in programs.items():
            node = program.graph_module.graph.output_node()
            node.args, node.meta = saved[name][0], saved[name][1]
            program.graph_module.recompile()
    data = bytes(serialize_pte_binary(PTEFile(program=emitted.program)))
    return {
        name: EmittedBound(method.lower_bound, "; ".join(method.cannot))
        for name, method in read_program(data, alignment).methods.items()
    }


def with_checked_proof(plan: Plan, emitted: EmittedBound) -> Plan:
    """`plan` with its proof kept only when its arena equals the emitted program's lower bound."""
    if not plan.proven_optimal or emitted.bound == plan.arena_size:
        return plan
    if emitted.bound is None:
        why = f"its lower bound is unknown ({emitted.why})"
    else:
        why = f"the emitted program's lower bound is {emitted.bound:,} B"
    status = f"not proven for the emitted program: arena {plan.arena_size:,} B, {why}"
    return dataclasses.replace(plan, outcome=Outcome.NOT_PROVEN, status=status)


def proven_at_bound(plan: Plan, emitted: EmittedBound) -> Plan:
    """`plan`, proven optimal when its arena equals the emitted program's lower bound, whatever the
    solver concluded: no layout of that program's instructions is smaller."""
    if plan.proven_optimal or emitted.bound != plan.arena_size:
        return plan
    was = plan.status or plan.outcome.value
    status = f"optimal: the arena is the emitted program's lower bound, {plan.arena_size:,} B (solver: {was})"
    return dataclasses.replace(plan, outcome=Outcome.OPTIMAL, status=status, lower_bound=plan.arena_size)


def check_proofs(results: Mapping[str, MethodResult], programs: Mapping[str, Any], alignment: int) -> None:
    """Keep each method's "proven optimal" only if its arena is the emitted program's lower bound, and
    give it to every plan at that bound.

    `programs` are the ExportedPrograms `to_executorch` is about to emit; `results` the pass's.
    A failure to emit withdraws the proofs and never breaks the export.
    """
    checked = [m for m in programs if m in results and results[m].emitted_lower_bound is None]
    checked = [m for m in checked if not results[m].emitted_bound_unknown]
    if not checked:
        return
    try:
        bounds = emitted_bounds(programs, alignment)
    except Exception as e:  # the export goes on; the proofs cannot be checked, so they go
        bounds = {m: EmittedBound(None, f"emitting it raised {type(e).__name__}: {e}") for m in checked}
    for method in checked:
        result = results[method]
        emitted = bounds.get(method, EmittedBound(None, "the method is not in the emitted program"))
        result.emitted_lower_bound = emitted.bound
        result.emitted_bound_unknown = "" if emitted.bound is not None else emitted.why or "not derived"
        result.plan = proven_at_bound(with_checked_proof(result.plan, emitted), emitted)
