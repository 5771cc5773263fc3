"""One method planned: its graph levers first (`rewrite_graph`), then the graph and its control-flow
submodules as ExecuTorch's `apply_algo` plans them (`plan_graph`): extract (`constrain`) -> levers
(`run_levers`) -> solve (`solve`) -> apply (`apply`).

ExecuTorch's helpers read a `frozen` signature; only a lever's rewrite (cat fusion renames outputs
in the program's own signature) gets the program's own `graph_signature`.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import torch
from executorch.exir.memory_planning import insert_calls_to_free
from torch.export.exported_program import ExportGraphSignature

from memplan.planner.algorithms.translation import Untranslated
from memplan.planner.compat import merge_bufsizes
from memplan.planner.graph.extract import Extraction, control_flow_submodules, forget_lifetimes
from memplan.planner.graph.signature import frozen
from memplan.planner.levers.lever import Lever, Site
from memplan.planner.stages.apply import written
from memplan.planner.stages.constrain import Flags, constrained, extracted
from memplan.planner.stages.costs import Costs
from memplan.planner.stages.result import MethodResult
from memplan.planner.stages.run_levers import (
    Reshaped,
    reshape,
    rewrite_after_plan,
    rewrite_before_extraction,
    switched_off,
)
from memplan.planner.stages.solve import Graph, as_given, choose
from memplan.planner.stages.solver import Algorithm
from memplan.planner.stages.stock import Stock, before_rewrite, stock_of


@dataclass(frozen=True)
class Planning:
    """What the pass plans every graph of one method with: its algorithm, levers, alignment, and
    whether each device gets its own arenas (`enable_non_cpu_memory_planning`)."""

    algorithm: Algorithm
    levers: tuple[Lever, ...]
    alignment: int
    devices: bool


def rewrite_graph(
    planning: Planning,
    graph_module: torch.fx.GraphModule,
    graph_signature: ExportGraphSignature | None,
    flags: Flags,
    state_planned: bool,
) -> tuple[dict[str, object], Stock | None]:
    """Run the graph levers on the method's graph: their reports by lever name, and the stock figure
    of the graph before one of them changed it (None when none did, or the graph has control flow)."""
    signature = frozen(graph_signature)

    def extract_now() -> Extraction:
        now = extracted(graph_module, signature, planning.alignment, flags)
        forget_lifetimes(graph_module)
        return now

    site = Site(
        graph_module, signature, graph_signature, state_planned, outputs_planned=flags[1], extract=extract_now
    )
    before: list[Stock] = []

    def before_change() -> None:
        if not control_flow_submodules(graph_module):
            before.append(
                before_rewrite(graph_module, signature, planning.algorithm, planning.alignment, flags)
            )

    reports = rewrite_before_extraction(planning.levers, site, before_change)
    return reports, before[0] if before else None


def plan_graph(
    planning: Planning,
    graph_module: torch.fx.GraphModule,
    graph_signature: ExportGraphSignature | None,
    where: str,
    flags: Flags,
) -> MethodResult:
    """Plan `graph_module`, its control-flow submodules first (each under `where/<target>`)."""
    submodules: dict[str, MethodResult] = {}
    signature = frozen(graph_signature)

    def plan_submodules() -> list[int]:
        sizes: list[int] = []
        for node, sub_alloc_input in control_flow_submodules(graph_module):
            target = str(node.target)
            sub = getattr(graph_module, target)
            res = plan_graph(
                planning, sub, graph_signature, f"{where}/{target}", (sub_alloc_input, True, True)
            )
            sub.meta["non_const_buffer_sizes"] = res.buffer_sizes
            submodules[target] = res
            merge_bufsizes(sizes, res.buffer_sizes)
        return sizes

    algorithm, alignment = planning.algorithm, planning.alignment
    ex = extracted(graph_module, signature, alignment, flags, plan_submodules, where)
    ex, arenas = constrained(ex, graph_module, where, algorithm, alignment, planning.devices)
    stock = stock_of(ex, graph_module, signature, algorithm, alignment)  # needs specs unplanned
    graph = Graph(graph_module, signature, where, alignment, arenas)
    return planned(planning, ex, graph, graph_signature, stock, submodules)


def planned(
    planning: Planning,
    ex: Extraction,
    graph: Graph,
    graph_signature: ExportGraphSignature | None,
    stock: Stock,
    submodules: dict[str, MethodResult],
) -> MethodResult:
    """The constrained extraction through levers -> solve -> apply; the lever rewrites after."""
    algorithm, levers = planning.algorithm, planning.levers
    graph_module, arenas = graph.graph_module, graph.arenas
    nodes = list(graph_module.graph.nodes)  # as extracted: node i is step i
    costs = Costs(ex, nodes)
    site = Site(
        graph_module,
        graph.signature,
        graph_signature,
        solve=functools.partial(algorithm.solver.solve, where=graph.where),
        cost=costs.of if algorithm.memory_map is not None else None,
    )
    if isinstance(algorithm.translation, Untranslated):
        reshaped, choice = Reshaped(ex), as_given(algorithm, graph, ex)
    else:
        reshaped = reshape(levers, site, ex, algorithm.shared_objects)
        choice = choose(algorithm, graph, reshaped, costs, switched_off(levers))
    chosen, plan = choice.planned, choice.plan
    removed = reshaped.removed if choice.levers else frozenset()
    sizes = written(choice, arenas, graph_module, algorithm.memory_map)
    note = choice.note
    if arenas.devices:
        note += "; device arenas: " + ", ".join(chosen.problem.pool_label(p) for p in sorted(arenas.devices))
    insert_calls_to_free(graph_module, set(ex.specs))
    spec_of = reshaped.extraction.spec_of
    reports = rewrite_after_plan(reshaped, site, spec_of, plan) if choice.levers else {}
    graph_module.meta["non_const_buffer_sizes"] = sizes
    return MethodResult(
        chosen.problem,
        plan,
        sizes,
        stock,
        submodules,
        reports,
        specs=dict(chosen.spec_of),
        padding=ex.extra_padding,
        algorithm=algorithm.translation.name,
        note=note,
        arenas=arenas,
        traffic=costs.traffic(chosen.problem, plan, removed),
        steps=tuple(n.name for n in nodes),
    )
