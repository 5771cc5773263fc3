"""Decide, for every elementwise instruction, whether its output takes the bytes of a dying input.

An instruction `I` computing `y` elementwise from `x` (`elementwise.elementwise_inputs`) may write `y`
over `x` when, in the order the method runs:

* `I` is the last instruction reading `x`'s bytes (no later reader of `x`, of anything sharing its
  TensorSpec, or of a view of it), and `x` is not returned, a view, or written in place by anyone;
* `x` is made by an instruction of this method into planned memory: not a graph input, a constant, a
  state buffer (the caller or the next call still needs those bytes);
* `x` and `y` have one layout (shape, dtype, dim order, both static), so one TensorSpec serves both;
* `y`'s TensorSpec is its own (not a state's, not viewed, not returned to the caller).

Decisions are made in graph order against the specs as they will be, so `relu(add(a, b))` can put
all three results in `a`'s bytes. Nothing here changes the graph (`rewrite` does).
"""

from __future__ import annotations

import operator
from collections import defaultdict
from dataclasses import dataclass

import torch
from executorch.exir import memory
from executorch.exir.delegate import executorch_call_delegate
from executorch.exir.schema import TensorShapeDynamism
from executorch.exir.tensor import TensorSpec, num_bytes_from_shape_and_dtype
from torch.export.exported_program import ExportGraphSignature

from memplan.planner.levers.elementwise_in_place.elementwise import elementwise_inputs
from memplan.planner.levers.graph_facts import producer_refusal, written_in_place
from memplan.planner.levers.refusals import Refusal


@dataclass(frozen=True)
class InPlace:
    """One elementwise instruction and whether its output shares an input's bytes.

    Only instructions with an input of their output's layout are decided. `input` is the input it
    overwrites (shared) or the first one it could have; `reasons` say why not, `detail` names the
    nodes behind them.
    """

    instruction: str
    output: str
    input: str
    nbytes: int  # bytes of the output: saved at the instruction's step when shared
    shared: bool
    reasons: tuple[Refusal, ...] = ()
    detail: str = ""


def analyze(
    graph_module: torch.fx.GraphModule,
    signature: ExportGraphSignature | None,
    *,
    outputs_planned: bool = True,
) -> list[InPlace]:
    """Every elementwise instruction of the graph decided, in graph order (see the module docstring)."""
    return _Analyzer(graph_module, signature, outputs_planned).run()


class _Analyzer:
    def __init__(
        self, gm: torch.fx.GraphModule, signature: ExportGraphSignature | None, outputs_planned: bool
    ) -> None:
        self.gm = gm
        self.signature = signature
        self.outputs_planned = outputs_planned
        self.nodes = list(gm.graph.nodes)
        self.index = {n: i for i, n in enumerate(self.nodes)}
        self.written = written_in_place(self.nodes)
        self.returned = {a for n in self.nodes if n.op == "output" for a in n.all_input_nodes}
        # The nodes carrying each TensorSpec (by id). A chain needs no update as it is decided: the
        # input of `relu(y)`, `y`, is dead wherever `y`'s spec will be once it carries its own input's.
        self.carriers: dict[int, list[torch.fx.Node]] = defaultdict(list)
        for node in self.nodes:
            for spec in _specs(node) if node.op != "output" else ():
                self.carriers[id(spec)].append(node)

    def run(self) -> list[InPlace]:
        decisions = []
        for node in self.nodes:
            output = _single_output(node)
            if output is None:
                continue
            same = [a for a in elementwise_inputs(node, self.gm) if _same_layout(a, output)]
            if same:  # a candidate: it could write over one of `same`
                decisions.append(self._decide(node, output, same))
        return decisions

    def _decide(self, node: torch.fx.Node, output: torch.fx.Node, same: list[torch.fx.Node]) -> InPlace:
        """Shared over the first of `same` (the inputs with the output's layout) nothing refuses."""
        out_spec = output.meta["spec"]
        nbytes = num_bytes_from_shape_and_dtype(torch.Size(out_spec.shape), out_spec.dtype)
        reasons = self._output_refusals(node, output)
        best: list[tuple[Refusal, str]] = []
        for candidate in same:
            found = reasons + self._input_refusals(node, candidate)
            if not found:
                return InPlace(node.name, output.name, candidate.name, nbytes, True)
            if not best or len(found) < len(best):
                best = found
        return _decision(node, output, same[0], nbytes, best)

    # -- the output --------------------------------------------------------------------------------
    def _output_refusals(self, node: torch.fx.Node, output: torch.fx.Node) -> list[tuple[Refusal, str]]:
        found = []
        spec = output.meta["spec"]
        if output in self.returned:
            refusal = Refusal.GRAPH_OUTPUT if self.outputs_planned else Refusal.OUTPUT_NOT_PLANNED
            found.append((refusal, f"{output.name} is returned to the caller"))
        others = [c for c in self.carriers[id(spec)] if c not in (node, output, alloc_of(node))]
        if others:
            found.append((Refusal.OUTPUT_PINNED, f"{output.name}'s storage is shared with {others[0].name}"))
        if any(u.target is memory.view for u in output.users):
            found.append((Refusal.NEW_VALUE_IS_VIEW, f"{output.name} is viewed"))
        if id(spec) in self.written:
            found.append((Refusal.OUTPUT_WRITTEN_IN_PLACE, f"{self.written[id(spec)]} writes {output.name}"))
        return found

    # -- an input ---------------------------------------------------------------------------------
    def _input_refusals(self, node: torch.fx.Node, source: torch.fx.Node) -> list[tuple[Refusal, str]]:
        spec = source.meta["spec"]
        carriers = self.carriers[id(spec)]
        found = []
        for carrier in carriers:
            why = producer_refusal(carrier, self.signature) if carrier.op != "call_function" else None
            if why is not None:
                found.append(why)
            if carrier.target is memory.view or any(u.target is memory.view for u in carrier.users):
                found.append((Refusal.INPUT_PINNED, f"{carrier.name} is a view or is viewed"))
            if carrier in self.returned:
                found.append((Refusal.GRAPH_OUTPUT, f"{carrier.name} is returned to the caller"))
        if id(spec) in self.written:
            found.append((Refusal.INPUT_WRITTEN_IN_PLACE, f"{self.written[id(spec)]} writes {source.name}"))
        later = [
            reader
            for carrier in carriers
            for reader in carrier.users
            if reader not in carriers and self.index[reader] > self.index[node]
        ]
        if later:
            found.append((Refusal.OLD_VALUE_READ_LATER, f"{later[0].name} reads {source.name} later"))
        return found


# -- helpers ----------------------------------------------------------------------------------------


def _decision(
    node: torch.fx.Node,
    output: torch.fx.Node,
    source: torch.fx.Node,
    nbytes: int,
    reasons: list[tuple[Refusal, str]],
) -> InPlace:
    codes = tuple(dict.fromkeys(r for r, _ in reasons))
    detail = "; ".join(dict.fromkeys(d for _, d in reasons))
    return InPlace(node.name, output.name, source.name, nbytes, False, codes, detail)


def _specs(node: torch.fx.Node) -> list[TensorSpec]:
    spec = node.meta.get("spec")
    if isinstance(spec, TensorSpec):
        return [spec]
    if isinstance(spec, (list, tuple)):
        return [s for s in spec if isinstance(s, TensorSpec)]
    return []


def _single_output(node: torch.fx.Node) -> torch.fx.Node | None:
    """The node carrying the instruction's one tensor result (a delegate's getitem, an op itself)."""
    if node.target is executorch_call_delegate:
        specs = node.meta.get("spec")
        items = [u for u in node.users if u.target is operator.getitem]
        if not isinstance(specs, (list, tuple)) or len(specs) != 1 or len(items) != 1:
            return None
        return items[0] if items[0].meta.get("spec") is specs[0] else None
    return node if isinstance(node.meta.get("spec"), TensorSpec) else None


def alloc_of(node: torch.fx.Node) -> torch.fx.Node | None:
    """The `memory.alloc` node an out-variant op writes into (None for a delegate)."""
    out = node.kwargs.get("out")
    return out if isinstance(out, torch.fx.Node) and out.target is memory.alloc else None


def _same_layout(source: torch.fx.Node, output: torch.fx.Node) -> bool:
    a, b = source.meta.get("spec"), output.meta["spec"]
    if not isinstance(a, TensorSpec):
        return False
    static = TensorShapeDynamism.STATIC
    return (
        a.dtype == b.dtype
        and tuple(a.shape) == tuple(b.shape)
        and tuple(a.dim_order) == tuple(b.dim_order)
        and a.shape_dynamism == static == b.shape_dynamism
        and getattr(a, "device", None) == getattr(b, "device", None)
    )
