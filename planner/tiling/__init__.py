"""Spatial tiling (patch-based inference): compute a high-resolution CNN stage one row band at a time,
so its activations exist a band at a time and the arena falls below the untiled graph's lower bound.

    ep = torch.export.export(model, example_inputs)
    tiled = tile(ep, TilingOptions(max_extra_macs=0.15))     # before to_edge / partitioning
    edge = to_edge_transform_and_lower(tiled.program, ...)
    edge.to_executorch(ExecutorchBackendConfig(memory_planning_pass=PlannerPass(tiling=...)))

Why before lowering: tiling adds ops (slices, pads, per-band convolutions, a cat). In the memory
planning pass the graph is already out-variant with every tensor's spec fixed, and under XNNPACK the
convolutions are inside delegate blobs, so it can only be a transform of the exported ATen program.
`PlannerPass(tiling=...).tile(ep)` runs it with the pass's options and the pass then reports it per
method. Modules: `semantics` (rows an op reads), `region` (legal regions, rows per band),
`schedule` (the pieces), `cost` (peak and MACs from a graph), `search`, `rewrite`, `report`.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch.export import ExportedProgram
from torch.fx import GraphModule

from memplan.errors import UsageError
from memplan.planner.tiling.cost import arena_tensors, graph_macs, graph_steps, peak_bytes
from memplan.planner.tiling.options import TilingOptions, tiling_options
from memplan.planner.tiling.report import TilingReport
from memplan.planner.tiling.rewrite import rewrite
from memplan.planner.tiling.search import extra, search
from memplan.planner.tiling.semantics import Refusal

__all__ = ["Refusal", "Tiled", "TilingOptions", "TilingReport", "tile", "tile_module", "tiling_options"]


@dataclass(frozen=True)
class Tiled:
    """The exported program after tiling (the one given when nothing was tiled) and the report."""

    program: ExportedProgram
    report: TilingReport


def tile_module(module: GraphModule, options: TilingOptions) -> TilingReport:
    """Tile `module`'s graph in place (it needs node meta "val", as exported graphs have)."""
    found = search(module.graph, options)
    report = TilingReport(
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
    chosen = found.chosen
    if chosen is None:
        return report
    rewrite(module, chosen.region, chosen.pieces())
    return TilingReport(
        options,
        found.base_peak,
        found.base_macs,
        tiled=True,
        start=chosen.region.start.name,
        end=chosen.region.end.name,
        ops=tuple(n.name for n in chosen.region.nodes),
        patches=chosen.patches,
        peak=chosen.peak,
        macs=chosen.macs,
        candidates=found.scored,
        regions_refused=found.regions_refused,
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
    counted = TilingReport(
        **{
            **report.__dict__,
            "peak": peak_bytes(graph_steps(graph, held=arena_tensors(graph, chosen))),
            "macs": graph_macs(graph),
        }
    )
    return Tiled(exported, counted)
