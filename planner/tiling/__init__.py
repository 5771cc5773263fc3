"""Spatial tiling (patch-based inference): compute a high-resolution CNN stage one row band at a time,
so its activations exist a band at a time and the arena falls below the untiled graph's lower bound;
then the stage where the peak sits next, with a band count of its own (`TilingOptions.max_regions`).

    ep = torch.export.export(model, example_inputs)
    tiled = tile(ep, TilingOptions(max_extra_macs=0.15))     # before to_edge / partitioning
    edge = to_edge_transform_and_lower(tiled.program, ...)
    edge.to_executorch(ExecutorchBackendConfig(memory_planning_pass=PlannerPass(tiling=...)))

Why before lowering: tiling adds ops (slices, pads, per-band convolutions, a cat). In the memory
planning pass the graph is already out-variant with every tensor's spec fixed, and under XNNPACK the
convolutions are inside delegate blobs, so it can only be a transform of the exported ATen program.
`PlannerPass(tiling=...).tile(ep)` runs it with the pass's options and the pass then reports it per
method. Modules: `semantics` (rows an op reads), `region` (legal regions, rows per band),
`schedule` (the pieces), `channels` (regions in groups of channels: a head's mean), `shared_chains` (a float chain computed
again for a reduction reading it), `cost` (peak and MACs from a graph), `search`, `rewrite`, `report`.
"""

from __future__ import annotations

import copy
import dataclasses
from dataclasses import dataclass

import torch
from torch.export import ExportedProgram
from torch.fx import GraphModule

from memplan.errors import UsageError
from memplan.planner.tiling.channels import C
from memplan.planner.tiling.cost import GraphSteps, arena_tensors, graph_macs, peak_bytes
from memplan.planner.tiling.options import TilingOptions, tiling_options
from memplan.planner.tiling.partitioned import mark_origins
from memplan.planner.tiling.report import TiledRegion, TilingReport
from memplan.planner.tiling.rewrite import rewrite
from memplan.planner.tiling.search import Search, cut_points, extra, search
from memplan.planner.tiling.semantics import Refusal
from memplan.planner.tiling.shared_chains import shared_chains, split_shared_chains

__all__ = [
    "Refusal",
    "TiledRegion",
    "Tiled",
    "TilingOptions",
    "TilingReport",
    "tile",
    "tile_module",
    "tiling_options",
]


@dataclass(frozen=True)
class Tiled:
    """The exported program after tiling (the one given when nothing was tiled) and the report."""

    program: ExportedProgram
    report: TilingReport


def tile_module(module: GraphModule, options: TilingOptions) -> TilingReport:
    """Tile `module`'s graph in place (it needs node meta "val", as exported graphs have): the best
    region, then where the peak sits next, up to `options.max_regions`. Under a budget no single region
    reaches, regions are tiled in turn for the smallest peak on a copy, kept if they reach it. Where a
    float chain is shared by a reduction and another reader (`shared_chains`), the graph is also tiled
    with the chain computed again for the reduction, and the smaller peak is kept."""
    mark_origins(module.graph)
    shared = options.recompute_shared_chains and shared_chains(
        module.graph, cut_points(list(module.graph.nodes))
    )
    if not shared:
        return _tiled_in_place(module, options)
    split = copy.deepcopy(module)  # before tiling changes `module`
    split_shared_chains(split, cut_points(list(split.graph.nodes)))
    report = _tiled_in_place(module, options)
    with_copies = _tiled_in_place(split, options)
    if not with_copies.tiled or with_copies.peak >= report.peak:
        return report
    module.graph = split.graph
    return dataclasses.replace(
        with_copies, base_peak=report.base_peak, base_macs=report.base_macs, recomputed_chains=len(shared)
    )


def _tiled_in_place(module: GraphModule, options: TilingOptions) -> TilingReport:
    found = search(module.graph, options)
    not_tiled = TilingReport(
        options,
        found.base_peak,
        found.base_macs,
        refusal=found.refusal,
        peak=found.base_peak,
        macs=found.base_macs,
        candidates=found.scored,
        regions_refused=found.regions_refused,
        over_limit=None
        if found.best_over_limit is None
        else (found.best_over_limit.peak, extra(found.best_over_limit.macs, found.base_macs)),
    )
    budget = options.budget_bytes
    if found.chosen is None and found.refusal is Refusal.BUDGET_UNREACHABLE and options.max_regions > 1:
        smallest = dataclasses.replace(options, budget_bytes=None)
        trial = copy.deepcopy(module)
        turns = _in_turn(trial, smallest, search(trial.graph, smallest, found.base_macs), found.base_macs)
        if turns.regions and budget is not None and turns.peak <= budget:
            module.graph = trial.graph
            return _tiled(not_tiled, turns)
        return not_tiled
    if found.chosen is None:
        return not_tiled
    return _tiled(not_tiled, _in_turn(module, options, found, found.base_macs))


@dataclass(frozen=True)
class _Turns:
    regions: tuple[TiledRegion, ...]
    peak: int
    macs: int
    scored: int


def _in_turn(module: GraphModule, options: TilingOptions, found: Search, untiled_macs: int) -> _Turns:
    """Tile `found`'s choice, search the tiled graph again and tile its choice while it lowers the
    peak, up to `options.max_regions` regions (or until the peak fits the budget). Where two stages
    hold the same peak, a region lowering one leaves the peak as it was (fewer steps reach it) and the
    next lowers it; regions after the last that lowered the peak are undone (the graph kept from
    before the first of them)."""
    regions: list[TiledRegion] = []
    scored = found.scored
    peak, macs = found.base_peak, found.base_macs
    gain = (found.base_peak, found.base_at_peak)
    before_ties: tuple[GraphModule, int, int, int] | None = None  # the graph, its peak, MACs, regions
    while found.chosen is not None and found.chosen.gain < gain:
        chosen = found.chosen
        if chosen.peak < peak:
            before_ties = None
        elif before_ties is None:
            before_ties = (copy.deepcopy(module), peak, macs, len(regions))
        rewrite(module, chosen.region, chosen.pieces())
        names = tuple(n.name for n in chosen.region.nodes)
        regions.append(
            TiledRegion(
                chosen.region.start.name,
                chosen.region.end.name,
                names,
                chosen.patches,
                chosen.peak,
                by_channels=chosen.region.axis == C,
            )
        )
        peak, macs, gain = chosen.peak, chosen.macs, chosen.gain
        if len(regions) == options.max_regions or (
            options.budget_bytes is not None and peak <= options.budget_bytes
        ):
            break
        found = search(module.graph, options, untiled_macs)
        scored += found.scored
    if before_ties is not None:
        kept, peak, macs, count = before_ties
        module.graph = kept.graph
        regions = regions[:count]
    return _Turns(tuple(regions), peak, macs, scored)


def _tiled(untiled: TilingReport, turns: _Turns) -> TilingReport:
    if not turns.regions:  # the regions found only tied the peak, and were undone
        return dataclasses.replace(untiled, refusal=Refusal.NO_GAIN, candidates=turns.scored)
    return dataclasses.replace(
        untiled,
        tiled=True,
        refusal=None,
        over_limit=None,
        regions=turns.regions,
        peak=turns.peak,
        macs=turns.macs,
        candidates=turns.scored,
    )


def tile(program: ExportedProgram, options: TilingOptions | bool = True) -> Tiled:
    """`program` with its best region tiled (per `options`), re-exported from the rewritten graph.

    The report's peak and MACs after tiling are counted again on the re-exported graph, so they are
    the program's own, not the search's estimate.
    """
    chosen = tiling_options(options)
    if chosen is None:
        raise UsageError("tile() needs tiling options (or True for the defaults)")
    if program.example_inputs is None:
        raise UsageError("tile() re-exports the program: export it with example inputs")
    args, kwargs = program.example_inputs
    module = program.module()
    report = tile_module(module, chosen)
    if not report.tiled:
        return Tiled(program, report)
    with torch.no_grad():
        exported = torch.export.export(module, tuple(args), kwargs or None, strict=False)
    graph = exported.module().graph
    counted = dataclasses.replace(
        report,
        peak=peak_bytes(GraphSteps(graph, arena_tensors(graph, chosen)).steps),
        macs=graph_macs(graph),
    )
    return Tiled(exported, counted)
