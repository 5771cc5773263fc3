"""Fusions that would overwrite a state before its old value is read for the last time.

With state in place a cat's output can be a state's own storage. Fusing
that cat makes the producer of each (nested) piece write into the state as
it runs, so the state's write window opens at the earliest of them
(`memplan.planner.levers.write_window`). `held_cats` names, for every such
write followed by a read of the old value, the cat that put the piece
there; `analyze` refuses those cats (STATE_READ_LATER) and decides again.
"""

from __future__ import annotations

from collections.abc import Sequence

from executorch.exir.tensor import TensorSpec

from memplan.planner.levers.cat.decisions import CatFusion, CatStatus, CopySlot
from memplan.planner.levers.cat.legality import CatFacts, InputFacts
from memplan.planner.levers.graph_facts import GraphFacts
from memplan.planner.levers.write_window import ExtraWrite, late_reads


def held_cats(
    facts: GraphFacts,
    fusion: CatFusion,
    cats: Sequence[CatFacts],
    member_of: dict[str, tuple[str, int]],
    copies: Sequence[tuple[CatFacts, InputFacts]],
) -> dict[str, str]:
    """Cat node name -> why it must keep its copy, for every late read of a state's old value.

    `member_of` and `copies` are the decider's (fused members, PARTIAL
    inputs cloned into their slot, in `fusion.copies` order).
    """
    spec_of = facts.extraction.spec_of
    cat_of_output = {cat.bid: cat.node.name for cat in cats if cat.bid}

    def where(spec: TensorSpec) -> tuple[TensorSpec, int]:
        bid, offset = facts.bid_of.get(id(spec)), 0
        if bid is None:
            return spec, 0
        while bid in fusion.parent_of:
            bid, step = fusion.parent_of[bid]
            offset += step
        return spec_of[bid], offset

    removed = {facts.by_name[d.cat] for d in fusion.decisions if d.status is not CatStatus.REFUSED}
    extra = [_clone(facts, spec_of[slot.region], slot, inp) for slot, (_, inp) in zip(fusion.copies, copies)]
    held: dict[str, str] = {}
    for late in late_reads(facts.nodes, where, skipped=removed, extra_writes=extra):
        bid = facts.bid_of.get(id(late.written))
        found = {cat_of_output[member_of[bid][0]]} if bid in member_of else set()
        found |= {
            cat.node.name
            for slot, (cat, _) in zip(fusion.copies, copies)
            if slot.before == late.writer and spec_of[slot.region] is late.written
        }
        # Only fused pieces and clones are placed inside a state; should another write get there,
        # every removed cat keeps its copy, which ends the rounds.
        found = found or {node.name for node in removed}
        if not found:
            raise AssertionError(f"cat fusion: no cat placed what makes this read late: {late.detail()}")
        for name in found:
            held[name] = late.detail()
    return held


def _clone(facts: GraphFacts, region: TensorSpec, slot: CopySlot, inp: InputFacts) -> ExtraWrite:
    """The clone a PARTIAL cat puts before `slot.before`: it reads the input, writes its slot."""
    return ExtraWrite(facts.by_name[slot.before], region, slot.offset, inp.nbytes, facts.by_name[slot.source])
