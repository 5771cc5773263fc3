"""Plan one graph with cat fusion, undoing fusions that would grow the arena.

Fusing a cat widens its output's lifetime to cover every input's (the
region is reserved from the first input's birth), so on some graphs the
arena grows even though copies go away. By default a fusion that makes the
plan larger is undone: first, while the fused lower bound exceeds the
arena of the unfused plan, the fused cat whose removal lowers the bound most
(among the regions live at the peak) is refused with ARENA_GREW; then, if
the solver's fused plan is still larger than its plan without fusion, every
cat is refused. "Without" is always the same solver on the problem minus the
groups.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import torch
from torch.export.exported_program import ExportGraphSignature

import memplan.timeline as timeline
from memplan.errors import InfeasibleError
from memplan.peak_bound import lower_bound, lower_bounds
from memplan.plan import Plan
from memplan.planner.graph.extract import Extraction
from memplan.planner.levers.cat.analysis import analyze
from memplan.planner.levers.cat.decisions import CatDecision, CatFusion
from memplan.planner.levers.cat.legality import is_cat
from memplan.planner.levers.refusals import Refusal
from memplan.problem import Problem


def plan_with_cat_fusion(
    graph_module: torch.fx.GraphModule,
    graph_signature: ExportGraphSignature | None,
    extraction: Extraction,
    solve: Callable[[Problem], Plan],
    *,
    relax_alignment: bool = False,
    partial: bool = False,
    allow_growth: bool = False,
    cost: Callable[[CatFusion | None, Plan], Any] | None = None,
) -> tuple[CatFusion, Plan, Plan | None]:
    """(fusion decisions, plan of `fusion.problem`, plan without fusion), both from `solve`.

    With `allow_growth=False` the first plan is never larger than the second.
    `cost` (of a plan with this fusion, or of the plan without: None) orders
    the two when given: under a memory map, the emitted program's bank traffic,
    then bytes; every cat is refused when fusing costs more.
    Under a capacity, whichever of the two fits is used: the plan without
    fusion is None when only the fused problem fits, and every cat is
    refused (ARENA_GREW) when only the unfused one does.
    """

    def decide(blocked: frozenset[str], by: Refusal = Refusal.ARENA_GREW) -> CatFusion:
        return analyze(
            graph_module,
            graph_signature,
            extraction,
            relax_alignment=relax_alignment,
            partial=partial,
            blocked=blocked,
            blocked_by=by,
        )

    def keep_every_cat(by: Refusal = Refusal.ARENA_GREW) -> CatFusion:
        return decide(frozenset(n.name for n in graph_module.graph.nodes if is_cat(n)), by)

    fusion = decide(frozenset())
    without = _fitting(solve, extraction.problem)
    if not fusion.removed:
        if isinstance(without, InfeasibleError):
            raise without
        return fusion, without, without
    if isinstance(without, Plan) and not allow_growth:
        fusion = _within(fusion, decide, without.arena_sizes)
        if not fusion.removed:
            return fusion, without, without
    fused = _fitting(solve, fusion.problem)
    if isinstance(fused, InfeasibleError):
        if isinstance(without, InfeasibleError):
            raise fused
        return keep_every_cat(), without, without
    if isinstance(without, InfeasibleError):
        return fusion, fused, None
    if cost is not None and cost(fusion, fused) > cost(None, without):
        return keep_every_cat(Refusal.TRAFFIC_GREW), without, without
    if not allow_growth and fused.arena_size > without.arena_size:
        return keep_every_cat(), without, without
    return fusion, fused, without


def _fitting(solve: Callable[[Problem], Plan], problem: Problem) -> Plan | InfeasibleError:
    """The plan, or the error if no plan fits the capacity; any other failure propagates."""
    try:
        return solve(problem)
    except InfeasibleError as e:
        return e


def _within(
    fusion: CatFusion, decide: Callable[[frozenset[str]], CatFusion], arenas: Mapping[int, int]
) -> CatFusion:
    """Refuse fused cats one at a time until no pool's fused lower bound exceeds its unfused arena.

    A plan can never beat its lower bound, so above that line fusion cannot pay.
    """
    blocked: frozenset[str] = frozenset()
    while fusion.removed:
        grown = [pool for pool, lb in lower_bounds(fusion.problem).items() if lb > arenas.get(pool, 0)]
        if not grown:
            break
        at_peak = {d.cat for pool in grown for d in _live_at(fusion, pool, _peak_time(fusion.problem, pool))}
        candidates = sorted(at_peak) or sorted(d.cat for d in fusion.removed)
        best = min(candidates, key=lambda cat: (lower_bound(decide(blocked | {cat}).problem), cat))
        blocked |= {best}
        fusion = decide(blocked)
    return fusion


def _peak_time(problem: Problem, pool: int) -> int:
    """The first moment the bytes live in `pool` (groups counted once) are at their maximum."""
    return timeline.peak([(b.start, b.end, b.size) for b in problem.roots() if b.pool == pool])[1]


def _live_at(fusion: CatFusion, pool: int, t: int) -> list[CatDecision]:
    """Removed cats whose region (outermost parent) occupies `pool` at time `t`."""
    found = []
    for d in fusion.removed:
        root = d.output
        while root in fusion.parent_of:
            root = fusion.parent_of[root][0]
        buf = fusion.problem.buffer(root)
        if buf.pool == pool and buf.start <= t < buf.end:
            found.append(d)
    return found
