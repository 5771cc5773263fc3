"""Decide every cat of one graph: fuse biggest copies first, then alias cats whose inputs already sit together.

Phase 1 (`_try_fuse`) makes each legal cat's inputs members of its output,
largest cats first, so a buffer joins at most one output. Phase 2
(`_try_alias`) places a cat whose inputs already sit back to back inside a
fused region over them. The result is turned into planning constraints by
`grouping` and reported as `CatDecision`s.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import torch
from torch.export.exported_program import ExportGraphSignature

from memplan.planner.graph.extract import Extraction
from memplan.planner.levers.cat.decisions import (
    COPYABLE,
    WHOLLY_PLACED,
    CatDecision,
    CatFusion,
    CatInput,
    CatStatus,
)
from memplan.planner.levers.cat.grouping import copy_slots, copy_source_ends, grouped_problem
from memplan.planner.levers.cat.legality import CatFacts, InputFacts, inspect_cat, is_cat
from memplan.planner.levers.cat.regions import (
    Copies,
    Interval,
    MemberOf,
    Roots,
    intervals_of,
    laminar_parents,
    nests,
    roots_of,
    value_key,
    value_locations,
)
from memplan.planner.levers.cat.state_reads import held_cats
from memplan.planner.levers.graph_facts import GraphFacts, elem_size
from memplan.planner.levers.refusals import Refusal
from memplan.planner.memory.instruction_traffic import without_instructions


def analyze(
    graph_module: torch.fx.GraphModule,
    graph_signature: ExportGraphSignature | None,
    extraction: Extraction,
    *,
    relax_alignment: bool = False,
    partial: bool = False,
    blocked: Iterable[str] = (),
    blocked_by: Refusal = Refusal.ARENA_GREW,
) -> CatFusion:
    """Decide every cat of the graph and build the grouped problem.

    `relax_alignment` lets inputs sit at any offset that is a multiple of
    their element size (instead of the pass alignment); `partial` allows
    PARTIAL cats. Cats named in `blocked` are refused with `blocked_by`
    (ARENA_GREW or TRAFFIC_GREW) if they could otherwise go (see `memplan.planner.levers.cat.policy`).
    """
    facts = GraphFacts(graph_module, graph_signature, extraction, relax_alignment)
    held: dict[str, str] = {}
    while True:  # each round refuses at least one more cat, so this ends
        fusion, decider, cats = _decide(facts, partial, (frozenset(blocked), blocked_by), held)
        late = held_cats(facts, fusion, cats, decider.member_of, decider.copies)
        if not late:
            return fusion
        held.update(late)


_BLOCKED_DETAIL = {
    Refusal.ARENA_GREW: "removable, but fusing it made the arena larger",
    Refusal.TRAFFIC_GREW: "removable, but with it fused more bytes went through slower banks",
}


def _decide(
    facts: GraphFacts, partial: bool, blocked: tuple[frozenset[str], Refusal], held: Mapping[str, str]
) -> tuple[CatFusion, _Decider, list[CatFacts]]:
    """One round of decisions with the cats in `blocked` and `held` refused."""
    decider = _Decider(facts, partial, blocked, held)
    cats = [inspect_cat(facts, node) for node in facts.nodes if is_cat(node)]
    for cat in sorted(cats, key=lambda c: (-c.nbytes, c.index)):
        decider.try_fuse(cat)
    roots = roots_of(decider.member_of)
    intervals = intervals_of(facts, decider.member_of, decider.copies, roots)
    for cat in cats:
        if decider.status.get(cat.node.name) is None:
            decider.try_alias(cat, roots, intervals)
    for cat in cats:
        decider.status.setdefault(cat.node.name, CatStatus.REFUSED)
    parent_of = laminar_parents(intervals)
    slots = copy_slots(facts, cats, decider.status, decider.copies, roots, intervals, parent_of)
    shrink = copy_source_ends(facts, decider.status, decider.copies, slots)
    fusion = CatFusion(
        decisions=[decider.decision(cat) for cat in cats],
        problem=without_instructions(  # a fused or aliased cat emits no instruction
            grouped_problem(facts.problem, parent_of, shrink),
            facts.extraction.spec_of,
            [cat.node for cat in cats if decider.status[cat.node.name] in WHOLLY_PLACED],
        ),
        problem_without=facts.problem,
        parent_of={k: v for k, v in parent_of.items() if not k.startswith("copy:")},
        copies=slots,
        relax_alignment=facts.relax_alignment,
    )
    return fusion, decider, cats


class _Decider:
    """The decisions under construction: status per cat, placement and refusal per input, members."""

    def __init__(
        self,
        facts: GraphFacts,
        allow_partial: bool,
        blocked: tuple[frozenset[str], Refusal],
        held: Mapping[str, str],
    ) -> None:
        self.facts = facts
        self.allow_partial = allow_partial
        self.blocked, self.blocked_by = blocked
        self.held = held
        self.status: dict[str, CatStatus] = {}
        self.placement: dict[tuple[str, int], str] = {}  # (cat, input position) -> placement
        self.input_reason: dict[tuple[str, int], tuple[Refusal, str]] = {}
        self.member_of: MemberOf = {}
        self.copies: Copies = []

    # -- phase 1: fuse, biggest copies first ------------------------------------------------
    def try_fuse(self, cat: CatFacts) -> None:
        if cat.reasons:
            return
        ok: list[InputFacts] = []
        bad: list[tuple[int, InputFacts, tuple[Refusal, str]]] = []
        for pos, inp in enumerate(cat.inputs):
            if inp.detail == "empty":
                continue
            why = (inp.reason, inp.detail) if inp.reason else None
            if why is None and inp.bid in self.member_of:
                why = (
                    Refusal.INPUT_PINNED,
                    f"{inp.bid} already sits in the output of {self.member_of[inp.bid][0]}",
                )
            if why is None:
                ok.append(inp)
            else:
                bad.append((pos, inp, why))
        for pos, _, why in bad:
            self.input_reason[(cat.node.name, pos)] = why
        if not ok:
            return
        if bad and self.allow_partial:
            # A clone target is a tensor too: its slice must be aligned like a member's.
            out_align = self.facts.problem.buffer(cat.bid).alignment
            for n, (pos, inp, why) in enumerate(bad):
                need = elem_size(inp.spec) if self.facts.relax_alignment else out_align
                if why[0] in COPYABLE and inp.offset % need:
                    bad[n] = (
                        pos,
                        inp,
                        (Refusal.MISALIGNED, f"offset {inp.offset} is not a multiple of {need}"),
                    )
                    self.input_reason[(cat.node.name, pos)] = bad[n][2]
        if bad and not (self.allow_partial and all(why[0] in COPYABLE for _, _, why in bad)):
            return
        if self._blocked(cat):
            return
        self.status[cat.node.name] = CatStatus.PARTIAL if bad else CatStatus.FUSED
        placed = {id(inp) for inp in ok}
        for pos, inp in enumerate(cat.inputs):
            if id(inp) in placed:
                self.member_of[inp.bid] = (cat.bid, inp.offset)
                self.placement[(cat.node.name, pos)] = "member"
        for pos, inp, _ in bad:
            self.placement[(cat.node.name, pos)] = "copy"
            self.copies.append((cat, inp))

    def _blocked(self, cat: CatFacts) -> bool:
        """True (and the cat refused) if the cat could go but fusing it would overwrite a state's old
        value before its last read (STATE_READ_LATER) or the plan cost more with it (`blocked_by`)."""
        if cat.node.name in self.held:
            cat.reasons.append((Refusal.STATE_READ_LATER, self.held[cat.node.name]))
            return True
        if cat.node.name not in self.blocked:
            return False
        cat.reasons.append((self.blocked_by, _BLOCKED_DETAIL[self.blocked_by]))
        return True

    # -- phase 2: cats whose inputs already sit back to back ---------------------------------------
    def try_alias(self, cat: CatFacts, roots: Roots, intervals: dict[str, list[Interval]]) -> None:
        if cat.reasons or cat.bid in roots:
            return
        inputs = [inp for inp in cat.inputs if inp.detail != "empty"]
        if not inputs:
            return
        problem = self.facts.problem
        where = value_locations(roots, self.copies)
        first = inputs[0]
        crossing = False
        for root, lo in where.get(value_key(first), []):
            start = lo - first.offset
            if not all((root, start + inp.offset) in where.get(value_key(inp), []) for inp in inputs):
                continue
            out = problem.buffer(cat.bid)
            if out.pool != problem.buffer(root).pool:
                continue
            if start % out.alignment and not self.facts.relax_alignment:
                continue
            if not nests(intervals[root], start, cat.nbytes):
                crossing = True
                continue
            if self._blocked(cat):
                return
            intervals[root].append(Interval(start, cat.nbytes, 0, 0, cat.bid))
            roots[cat.bid] = (root, start)
            self.status[cat.node.name] = CatStatus.ALIASED
            for pos, inp in enumerate(cat.inputs):
                self.placement[(cat.node.name, pos)] = "empty" if inp.detail == "empty" else "placed"
            return
        if crossing:
            cat.reasons.append(
                (
                    Refusal.ALIAS_NOT_NESTED,
                    "its inputs sit back to back, but that range straddles a placed tensor",
                )
            )

    # -- results ---------------------------------------------------------------------
    def decision(self, cat: CatFacts) -> CatDecision:
        name = cat.node.name
        status = self.status[name]
        inputs = []
        for pos, inp in enumerate(cat.inputs):
            reason, detail = self.input_reason.get((name, pos), (inp.reason, inp.detail))
            placement = self.placement.get((name, pos), "empty" if inp.detail == "empty" else "")
            if status in WHOLLY_PLACED or placement == "member":
                reason, detail = None, ""
            inputs.append(CatInput(inp.node.name, inp.bid, inp.offset, inp.nbytes, placement, reason, detail))
        removed = status in WHOLLY_PLACED
        reasons = [] if removed else [r for r, _ in cat.reasons]
        reasons = list(dict.fromkeys(reasons + [i.reason for i in inputs if i.reason is not None]))
        details = [] if removed else [d for _, d in cat.reasons]
        details += [f"{i.node}: {i.detail}" for i in inputs if i.reason is not None]
        return CatDecision(
            name, cat.bid, cat.nbytes, cat.dim, status, tuple(reasons), "; ".join(details), tuple(inputs)
        )
