"""Remove the fused cats from a planned graph (the second half of cat fusion).

Runs after a plan has been written into the TensorSpecs. Every FUSED or
ALIASED cat's output already has a planned `memory.alloc` node (its `out=`
argument) that the emitter turns into a tensor value without an
instruction, so the cat's users are pointed at that node and the
`aten.cat.out` call is deleted: the producers now write straight into the
output's bytes. A PARTIAL cat first gets a stock `aten.clone.out` per input
it could not place, writing into that input's slice.

The specs are also told the truth for ExecuTorch's `Verifier`: each placed
tensor's `storage_base` is its smallest enclosing placed tensor (so
overlapping bytes are always a base chain), and each region's lifetime is
the widened one the plan used.
"""

from __future__ import annotations

import torch
from executorch.exir import memory
from executorch.exir.tensor import TensorSpec
from torch.export.exported_program import ExportGraphSignature, TensorArgument

from memplan.errors import ProblemError
from memplan.planner.levers.cat.decisions import CatFusion, CatStatus


class CatRewriteError(ProblemError):
    """The graph no longer matches the cat-fusion decisions; the message names the node."""


def fuse_cats(
    graph_module: torch.fx.GraphModule,
    fusion: CatFusion,
    spec_of: dict[str, TensorSpec],
    graph_signature: ExportGraphSignature | None = None,
) -> int:
    """After the grouped plan is in the specs: record it there and delete the cats. Returns cats removed."""
    link_specs(fusion, spec_of)
    return remove_fused_cats(graph_module, fusion, spec_of, graph_signature)


def link_specs(fusion: CatFusion, spec_of: dict[str, TensorSpec]) -> None:
    """Record the fusion in the planned specs: storage bases, widened lifetimes, relaxed alignment."""
    for child, (parent, rel) in fusion.parent_of.items():
        spec = spec_of[child]
        spec.storage_base = spec_of[parent]
        spec.storage_base_offset = rel
        if fusion.relax_alignment:
            # Padding a member up to the pass alignment would reach into its neighbour.
            spec.realign(torch._utils._element_size(spec.dtype))
    before = {b.id: b for b in fusion.problem_without.buffers}
    for buf in fusion.problem.buffers:
        old = before[buf.id]
        if (buf.start, buf.end) != (old.start, old.end):  # widened regions, shortened copy sources
            spec_of[buf.id].lifetime = [buf.start, buf.end - 1]


def remove_fused_cats(
    graph_module: torch.fx.GraphModule,
    fusion: CatFusion,
    spec_of: dict[str, TensorSpec],
    graph_signature: ExportGraphSignature | None = None,
) -> int:
    """Delete every removable cat from the planned graph; return how many instructions went.

    Specs must already carry the plan (mem_id/mem_offset) because the clone
    targets of PARTIAL cats are placed relative to their region. A removed
    cat that was a graph output is renamed to its alloc node in
    `graph_signature`'s output specs (shared with the ExportedProgram, as
    ExecuTorch's own write-back pass relies on), so names still match nodes.
    """
    graph = graph_module.graph
    nodes = {n.name: n for n in graph.nodes}

    def node(name: str) -> torch.fx.Node:
        if name not in nodes:
            raise CatRewriteError(f"cat fusion: node {name!r} is no longer in the graph")
        return nodes[name]

    for slot in fusion.copies:
        source, before = node(slot.source), node(slot.before)
        region = spec_of[slot.region]
        spec = _copy_spec(
            source.meta["spec"], region, slot.offset, spec_of[slot.enclosing], slot.enclosing_offset
        )
        with graph.inserting_before(before):
            target = graph.call_function(memory.alloc, ((tuple(spec.shape), spec.dtype),))
            target.meta["spec"] = spec
            clone = graph.call_function(torch.ops.aten.clone.out, (source,), {"out": target})
            clone.meta["spec"] = spec
            clone.meta["stack_trace"] = before.meta.get("stack_trace", "")

    removed = 0
    renamed: dict[str, str] = {}
    for decision in fusion.decisions:
        if decision.status is CatStatus.REFUSED:
            continue
        cat = node(decision.cat)
        out = cat.kwargs.get("out")
        if not isinstance(out, torch.fx.Node) or out.meta.get("spec") is not cat.meta.get("spec"):
            raise CatRewriteError(f"cat fusion: {cat.name} has no memory.alloc out= node sharing its spec")
        cat.replace_all_uses_with(out)
        graph.erase_node(cat)
        renamed[cat.name] = out.name
        removed += 1
    if graph_signature is not None:
        for spec in graph_signature.output_specs:
            if isinstance(spec.arg, TensorArgument) and spec.arg.name in renamed:
                spec.arg.name = renamed[spec.arg.name]
    if removed or fusion.copies:
        graph_module.recompile()
    return removed


def _copy_spec(
    value: TensorSpec, region: TensorSpec, offset: int, enclosing: TensorSpec, rel: int
) -> TensorSpec:
    """A planned spec for a clone target `offset` bytes into `region`."""
    spec = TensorSpec(dtype=value.dtype, shape=torch.Size(value.shape))
    spec.realign(torch._utils._element_size(value.dtype))
    spec.mem_id = region.mem_id
    spec.mem_offset = region.mem_offset + offset
    spec.mem_obj_id = region.mem_obj_id
    spec.lifetime = list(enclosing.lifetime)
    spec.storage_base = enclosing
    spec.storage_base_offset = rel
    return spec
