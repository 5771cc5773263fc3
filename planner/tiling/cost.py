"""What a graph costs, counted from the graph: live activation bytes at its worst step, and MACs.

The peak here is the live-bytes bound: at every step the bytes of every activation produced and not
yet read for the last time (graph inputs from the start, outputs to the end; constants are not in
the arena; an op that returns an alias of its input adds no bytes). No placement can beat it and
memplan's plans meet it on the CNNs tiled here, so the search ranks tilings by it; the planned
arena of the chosen program is measured by lowering it (the report and the benchmark show both).
What the arena holds depends on the lowering (`arena_tensors`): a graph input the caller passes in
(`TilingOptions.input_in_arena` False, `alloc_graph_input=False`) is not in it, and under int8
kernels (`TilingOptions.int8_kernels`: XNNPACK runs each dequantize -> op -> quantize as one kernel)
neither are a quantized graph's float tensors between its int8 ones nor its dequantized weights; with
`TilingOptions.elementwise_in_place` an elementwise kernel's output takes the bytes of an input of
its size that it reads last (planner.levers.elementwise_in_place does it to the lowered program). An
op `to_edge` decomposes (hardswish) also holds its intermediates during its step (`transients`).
With `TilingOptions.partitioned` (the partitioners known) both are read off the partitioned program
instead: a float tensor is held unless a delegate computes and alone reads it, and an op the
partitioner keeps whole has no intermediates.
MACs: every op with a `weight` of rank >= 2 (convolution, linear) does numel(output) * prod(weight
dims after the first) multiply-accumulates, which for a convolution is N*Cout*Hout*Wout*Cin/groups*kh*kw.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass

import torch
from torch.fx import Graph, Node

from memplan.arith import align_up
from memplan.planner.tiling.options import TilingOptions
from memplan.planner.tiling.partitioned import origin
from memplan.planner.tiling.pointwise import is_pointwise
from memplan.planner.tiling.region import Region
from memplan.planner.tiling.schedule import START, Piece
from memplan.planner.tiling.semantics import arguments, itemsize, shape
from memplan.planner.tiling.transients import transient_bytes


@dataclass(frozen=True)
class Step:
    """One op: the key of what it makes (None: nothing planned), its bytes, the keys it reads."""

    key: Hashable | None
    bytes: int
    reads: tuple[Hashable, ...]
    transient: int = 0  # bytes live during this step only (a decomposed op's intermediates)
    elementwise: bool = False  # may write over a read of its size that dies here (Held.in_place)


def node_bytes(node: Node) -> int:
    """Bytes of the node's tensor value (0 when it is not one tensor of static shape)."""
    s = shape(node)
    return 0 if s is None else math.prod(s) * itemsize(node)


def _aliases(node: Node) -> bool:
    """True when the op's output is its input's bytes in the lowered program (getitem of a tuple, a
    view of all of its input's elements in order): no bytes of its own. Other views (a slice, a
    permute) become copies in the edge dialect (`slice_copy`, `permute_copy`), so they count."""
    if node.op == "call_function" and getattr(node.target, "__name__", "") == "getitem":
        return True
    schema = getattr(node.target, "_schema", None)
    if not (schema and schema.returns and schema.returns[0].alias_info is not None):
        return False
    value = node.meta.get("val")
    source = next((a.meta.get("val") for a in node.all_input_nodes), None)
    if not isinstance(value, torch.Tensor) or not isinstance(source, torch.Tensor):
        return True
    return value.numel() == source.numel() and value.is_contiguous()


@dataclass(frozen=True)
class Held:
    """Whether the lowered program holds a node's tensor in the arena (`holds`), and whether it writes
    an elementwise kernel's output over an input the kernel reads last (`in_place`)."""

    holds: Callable[[Node], bool]
    in_place: bool = False
    kept_whole: frozenset = frozenset()  # ops the partitioner keeps from decomposition: no transients
    alignment: int = 1  # a held tensor's bytes are rounded up to it
    elementwise: dict[Node, bool] = dataclasses.field(default_factory=dict, compare=False, repr=False)
    """Each node's `_elementwise_kernel` verdict once found: a search scores thousands of tilings."""

    def __call__(self, node: Node) -> bool:
        return self.holds(node)


_everything = Held(lambda node: True)


def arena_tensors(graph: Graph, options: TilingOptions) -> Held:
    """Which of the graph's tensors the lowered program holds in its arena, per `options`."""
    nodes = list(graph.nodes)
    values = {n: n.meta.get("val") for n in nodes}
    integer = any(
        n.op == "call_function"
        and isinstance(v, torch.Tensor)
        and v.dim() == 4
        and not v.dtype.is_floating_point
        for n, v in values.items()
    )
    fused = options.int8_kernels and integer
    varying: set[Node] = {n for n in nodes if n.op == "placeholder"}
    for n in nodes:
        if any(a in varying for a in n.all_input_nodes):
            varying.add(n)
    returned = {a for n in nodes if n.op == "output" for a in n.all_input_nodes}
    read_off = options.partitioned

    def held(node: Node) -> bool:
        if node.op == "placeholder":
            return options.input_in_arena
        if node in returned:
            return True
        value = values.get(node)
        floating = isinstance(value, torch.Tensor) and value.dtype.is_floating_point
        if read_off is not None:  # what the partitioner does, not the int8-kernel assumption
            return node in varying and not (floating and origin(node) in read_off.inside)
        if not fused:
            return True
        return node in varying and not floating

    kept = read_off.kept_whole if read_off is not None else frozenset()
    return Held(held, options.elementwise_in_place, kept_whole=kept, alignment=options.alignment)


Roots = dict[Hashable, tuple[Hashable, ...]]  # a node or piece -> the arena tensors reading it reads


def node_step(node: Node, roots: Roots, held: Held = _everything) -> Step | None:
    """The step of an untiled node; `roots` maps each node to the arena tensors it stands for (updated
    here): itself, the tensor an alias views, or for a tensor the arena does not hold (a float inside
    an int8 kernel) what it was computed from, so those stay live until the kernel's int8 output."""
    if node.op == "placeholder":
        roots[node] = (node,)
        return Step(node, align_up(node_bytes(node), held.alignment) if held(node) else 0, ())
    if node.op not in ("call_function", "output"):
        return None
    reads = _reads(roots, node.all_input_nodes)
    if node.op == "output":  # what the graph returns stays live to the end
        return Step(None, 0, reads)
    step = _step(roots, node, node, node_bytes(node), reads, held, _aliases(node))
    if step.key is None:
        return step
    return dataclasses.replace(
        step, transient=_transient(node, held), elementwise=held.in_place and _elementwise_kernel(node, held)
    )


def _transient(node: Node, held: Held) -> int:
    return 0 if node.target in held.kept_whole else transient_bytes(node)


def _elementwise_kernel(node: Node, held: Held) -> bool:
    """True if the kernel computing `node` is elementwise: `node`'s op and every op between it and the
    arena tensors it reads (the dequantize -> op of an int8 kernel) are."""
    if node not in held.elementwise:
        held.elementwise[node] = _traced_elementwise(node, held)
    return held.elementwise[node]


def _traced_elementwise(node: Node, held: Held) -> bool:
    todo, seen = [node], {node}
    while todo:
        current = todo.pop()
        if not is_pointwise(current):
            return False
        inner = [a for a in current.all_input_nodes if a.op == "call_function" and not held(a)]
        todo += [a for a in inner if a not in seen]
        seen.update(inner)
    return True


def _reads(roots: Roots, keys: Sequence[Hashable]) -> tuple[Hashable, ...]:
    return tuple(dict.fromkeys(k for a in keys if a in roots for k in roots[a]))


def _step(
    roots: Roots, key: Hashable, origin: Node, size: int, reads: tuple, held: Held, alias: bool = False
) -> Step:
    if alias and reads:
        roots[key] = reads[:1]
        return Step(None, 0, reads)
    if not held(origin):
        roots[key] = reads
        return Step(None, 0, reads)
    roots[key] = (key,)
    return Step(key, align_up(size, held.alignment), reads)


class GraphSteps:
    """The graph's steps (`steps`), counted once, and any tiling's steps spliced from them: a node outside
    a region reads the same arena tensors tiled or not (the cat takes the end's key), so only the
    pieces are counted anew. A search scores hundreds of tilings of one graph."""

    def __init__(self, graph: Graph, held: Held = _everything) -> None:
        self.graph, self.held = graph, held
        self.roots: Roots = {}
        self.order: list[tuple[Node, Step | None]] = [
            (n, node_step(n, self.roots, held)) for n in graph.nodes
        ]
        self.position = {node: i for i, (node, _) in enumerate(self.order)}
        self.steps = [step for _, step in self.order if step is not None]

    def tiled(self, region: Region, pieces: Sequence[Piece]) -> tuple[list[Step], range]:
        """The steps with `region`'s ops replaced by `pieces` at the end's place, and the pieces' steps."""
        if not self.held(region.end):  # readers of the end read what it was computed from: count anew
            return steps_counted_anew(self.graph, region, pieces, self.held)
        inside = set(region.nodes)
        at = self.position[region.end]
        steps = [s for n, s in self.order[:at] if s is not None and n not in inside]
        first = len(steps)
        steps += _piece_steps(region, pieces, dict(self.roots), self.held)
        span = range(first, len(steps))
        steps += [s for n, s in self.order[at + 1 :] if s is not None and n not in inside]
        return steps, span


def steps_counted_anew(
    graph: Graph, region: Region, pieces: Sequence[Piece], held: Held
) -> tuple[list[Step], range]:
    """`GraphSteps.tiled` counted node by node over the tiled graph (what the splice must equal)."""
    roots: Roots = {}
    inside = set(region.nodes)
    steps: list[Step] = []
    span = range(0)
    for node in graph.nodes:
        if node is region.end:
            first = len(steps)
            steps += _piece_steps(region, pieces, roots, held)
            span = range(first, len(steps))
        elif node not in inside:
            step = node_step(node, roots, held)
            if step is not None:
                steps.append(step)
    return steps, span


def _piece_steps(region: Region, pieces: Sequence[Piece], roots: Roots, held: Held) -> list[Step]:
    """The pieces' steps; the cat makes the end (its key is the end node)."""
    copies = dataclasses.replace(_everything, alignment=held.alignment)  # a copy is held, even a float
    steps = []
    for i, piece in enumerate(pieces):
        keys: list[Hashable] = [region.start if j == START else ("piece", j) for j in piece.inputs]
        if piece.kind == "op":  # its other activation args (broadcast along H) are read too
            keys += [
                a for pos, a in enumerate(piece.origin.args) if pos not in piece.args and isinstance(a, Node)
            ]
        key = region.end if piece.kind == "cat" else ("piece", i)
        copy = piece.kind != "op"  # a slice, pad or cat is a new tensor of its own
        step = _step(roots, key, piece.origin, piece.bytes, _reads(roots, keys), copies if copy else held)
        if piece.kind == "op" and step.key is not None:  # intermediates scale with the rows computed
            share = _transient(piece.origin, held) * piece.bytes // max(node_bytes(piece.origin), 1)
            elementwise = held.in_place and _elementwise_kernel(piece.origin, held)
            step = dataclasses.replace(step, transient=share, elementwise=elementwise)
        steps.append(step)
    return steps


def peak_bytes(steps: Sequence[Step]) -> int:
    """Most bytes live at once: each tensor from its step through its last read (an elementwise step's
    tensor written over a read of its size that dies there adds nothing and extends that read's)."""
    return max(live_bytes(steps), default=0)


def live_bytes(steps: Sequence[Step]) -> list[int]:
    """Bytes live at each step, as `peak_bytes` counts them."""
    end, written_over = buffer_lifetimes(steps)
    delta = [0] * (len(steps) + 2)
    for t, step in enumerate(steps):
        delta[t] += step.transient
        delta[t + 1] -= step.transient
        if step.key is not None and step.bytes and step.key not in written_over:
            delta[t] += step.bytes
            delta[max(end.get(step.key, t), t) + 1] -= step.bytes
    live, profile = 0, []
    for d in delta[: len(steps)]:
        live += d
        profile.append(live)
    return profile


def buffer_lifetimes(steps: Sequence[Step]) -> tuple[dict[Hashable, int], set[Hashable]]:
    """The last step each tensor's bytes are read (through every tensor written over them), and the
    tensors written over another's bytes (an elementwise step over a read of its size dying there)."""
    last: dict[Hashable, int] = {}
    for t, step in enumerate(steps):
        for key in step.reads:
            last[key] = t
    end = dict(last)
    size = {s.key: s.bytes for s in steps if s.key is not None and s.reads}  # made by an op, not given
    owner: dict[Hashable, Hashable] = {}
    for t, step in enumerate(steps):
        if not step.elementwise or step.key is None:
            continue
        for key in step.reads:
            root = key
            while root in owner:
                root = owner[root]
            if size.get(key) == step.bytes and root in size and end.get(root) == t:
                owner[step.key] = root
                end[root] = max(t, last.get(step.key, t))
                break
    return end, set(owner)


def macs_of(out_shape: Sequence[int], weight_shape: Sequence[int]) -> int:
    """Multiply-accumulates of an op with this output and weight: numel(out) * prod(weight[1:])."""
    return math.prod(out_shape) * math.prod(weight_shape[1:])


def node_macs(node: Node, out_shape: Sequence[int] | None = None) -> int:
    """MACs of one node (0 unless it has a weight of rank >= 2); `out_shape` overrides its output's."""
    if node.op != "call_function":
        return 0
    weight = arguments(node).get("weight")
    w = shape(weight)
    out = out_shape if out_shape is not None else shape(node)
    if w is None or len(w) < 2 or out is None:
        return 0
    return macs_of(out, w)


def graph_macs(graph: Graph) -> int:
    """MACs of every convolution and linear op in the graph."""
    return sum(node_macs(n) for n in graph.nodes)


def tiled_macs(graph: Graph, region: Region, pieces: Sequence[Piece]) -> int:
    """MACs of the graph with `region` computed as `pieces`."""
    inside = set(region.nodes)
    outside = sum(node_macs(n) for n in graph.nodes if n not in inside)
    return outside + sum(node_macs(p.origin, p.shape) for p in pieces if p.kind == "op")
