"""Turn the graph that ExecuTorch hands to memory planning into a `Problem`.

The input is the graph module `MemoryPlanningPass.run(graph_module,
graph_signature)` receives inside `to_executorch`. Lifetimes, the set of
planned tensors and in-place aliasing come from ExecuTorch's own analysis
(`update_all_tensors_lifetime`, `collect_specs_from_nodes`, called with the
arguments `apply_algo` uses), so the problem means what the runtime will do.
ExecuTorch lifetimes are inclusive node-index ranges `[a, b]`; they become
half-open `[a, b + 1)` here and nowhere else. One correction is made: uses of
an in-place op's result extend the lifetime of the tensor it writes
(`_cover_inplace_results`), which ExecuTorch 1.5.1 misses.

Not planned, as in ExecuTorch: constants, dynamic-unbound tensors, inputs,
outputs or mutable buffers excluded by the alloc flags, and state a delegate
consumes (lowering removes it from the graph and the signature; the delegate
owns it). Dynamic-bound tensors are planned at their upper-bound size.

Buffer ids are node names: the first node (other than a `memory.alloc`) that
carries the tensor, with `[i]` appended when that node has several tensors.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import cast

import torch
from executorch.exir import memory
from executorch.exir.delegate import executorch_call_delegate
from executorch.exir.memory_planning import (
    collect_specs_from_nodes,
    get_cond_nodes,
    get_graph_input_tensors,
    get_graph_output_tensors,
    get_map_nodes,
    get_node_tensor_specs,
    get_scan_nodes,
    get_while_nodes,
    update_all_tensors_lifetime,
)
from executorch.exir.tensor import TensorSpec
from torch.export.exported_program import ExportGraphSignature
from torch.utils._pytree import tree_leaves

from memplan.errors import ExtractionError, ProblemError
from memplan.planner.compat import (
    contains_xnnpack_delegate,
    extend_storage_base_lifetimes,
    get_mutable_buffer_specs,
    is_inplace_node,
)
from memplan.problem import Buffer, BufferKind, ContiguousGroup, Problem

DEFAULT_POOL = 1  # ExecuTorch's mem_id for planned activations; 0 is reserved for constants
XNNPACK_PADDING = 64  # bytes apply_algo adds to every arena of a graph with an XNNPACK delegate


@dataclass
class StateRef:
    """A buffer placeholder (mutable here, or read-only here) found by FQN."""

    fqn: str
    node: str
    spec: TensorSpec
    mutable: bool


@dataclass
class Extraction:
    """A `Problem` plus what is needed to write a plan back into the graph.

    `spec_of` maps every planned buffer id to its TensorSpec (in-place results
    share their input's spec object, so one spec per id). `zero_size` lists
    tensors of 0 bytes: they need a mem_id and offset but occupy nothing, and
    `Buffer` requires a positive size. `specs` is the planned spec list in
    `apply_algo`'s order (for ExecuTorch's own greedy and `insert_calls_to_free`).
    """

    problem: Problem
    spec_of: dict[str, TensorSpec]
    zero_size: dict[str, TensorSpec]
    specs: list[TensorSpec]
    num_nodes: int
    extra_padding: int = 0
    reserved: dict[int, int] = field(default_factory=dict)  # pool -> bytes kept for submodules

    def pool_sizes(self, arena_sizes: dict[int, int]) -> list[int]:
        """`non_const_buffer_sizes` as apply_algo writes it: [0, pool 1, pool 2, ...].

        Index 0 is reserved for constants; pools holding any tensor get the
        XNNPACK padding added, like `_compute_total_sizes` does.
        """
        used = set(arena_sizes) | {_pool_of(s) for s in self.zero_size.values()}
        if not used:
            return [0, 0]
        sizes = [0] * (max(used) + 1)
        for pool in used:
            sizes[pool] = arena_sizes.get(pool, 0) + self.extra_padding
        return sizes


def extract(
    graph_module: torch.fx.GraphModule,
    graph_signature: ExportGraphSignature | None,
    *,
    alignment: int,
    alloc_graph_input: bool = True,
    alloc_graph_output: bool = True,
    alloc_mutable_buffers: bool = True,
    submodules: Callable[[], Sequence[int]] | Sequence[int] = (),
    name: str = "",
) -> Extraction:
    """The planning problem of one graph (not its control-flow submodules).

    `submodules` gives the bytes per mem_id that the control-flow submodules
    need (`_apply_algo_to_submodules`), or is a callback that plans them and
    returns those bytes; it is called after this graph's lifetimes are set,
    which is the order apply_algo uses. ExecuTorch reserves those bytes at the
    bottom of each arena for the whole method, so they become fixed buffers at
    offset 0 of kind SUBMODULE.
    """
    update_all_tensors_lifetime(graph_module, graph_signature)
    _cover_inplace_results(list(graph_module.graph.nodes))
    specs = list(
        collect_specs_from_nodes(
            graph_module.graph.nodes,
            graph_signature,
            do_assertion=False,
            ignore_graph_input=not alloc_graph_input,
            ignore_graph_output=not alloc_graph_output,
            ignore_mutable_buffers=not alloc_mutable_buffers,
        )
    )
    submodule_sizes = submodules() if callable(submodules) else submodules
    nodes = list(graph_module.graph.nodes)
    names = buffer_names(nodes, graph_signature)
    kinds = _buffer_kinds(nodes, graph_signature)

    planned = set(specs)
    spec_of, zero_size = _by_size(specs, names, alignment)
    buffers: list[Buffer] = []
    members: dict[str, list[tuple[str, int]]] = defaultdict(list)
    for bid, spec in spec_of.items():
        root, rel = _storage_root(spec, planned, names)
        if spec.storage_base is not None:
            members[names[spec.storage_base][0]].append((bid, spec.storage_base_offset))
        pool = _pool_of(root)
        start, end = spec.lifetime
        buffers.append(
            Buffer(
                id=bid,
                start=start,
                end=end + 1,
                size=spec.allocated_memory,
                alignment=alignment,
                pool=pool,
                kind=kinds.get(spec, BufferKind.ACTIVATION),
                label=names[spec][1],
            )
        )
    reserved = {pool: size for pool, size in enumerate(submodule_sizes) if pool >= DEFAULT_POOL and size > 0}
    buffers += _reservations(reserved, len(nodes), alignment)
    groups = [ContiguousGroup(parent, tuple(ms)) for parent, ms in members.items()]
    try:
        problem = Problem(tuple(buffers), tuple(groups), name=name)
    except ProblemError as e:
        raise ExtractionError(f"{name or 'graph'}: {e}") from None
    return Extraction(
        problem=problem,
        spec_of=spec_of,
        zero_size=zero_size,
        specs=specs,
        num_nodes=len(nodes),
        extra_padding=XNNPACK_PADDING if contains_xnnpack_delegate(graph_module) else 0,
        reserved=reserved,
    )


def _by_size(
    specs: list[TensorSpec], names: dict[TensorSpec, tuple[str, str]], alignment: int
) -> tuple[dict[str, TensorSpec], dict[str, TensorSpec]]:
    """The specs realigned, by buffer id: those with bytes, and those of zero bytes."""
    spec_of: dict[str, TensorSpec] = {}
    zero_size: dict[str, TensorSpec] = {}
    for spec in specs:
        spec.realign(alignment)
        bid, _ = names[spec]
        pool = _pool_of(spec)
        if pool < DEFAULT_POOL:
            raise ExtractionError(
                f"{bid}: mem_id {pool} is reserved for constants; planned tensors need mem_id >= 1"
            )
        (spec_of if spec.allocated_memory > 0 else zero_size)[bid] = spec
    return spec_of, zero_size


def _reservations(reserved: dict[int, int], end: int, alignment: int) -> list[Buffer]:
    """The bytes reserved for the control-flow submodules: fixed at offset 0 of each arena, all method long."""
    return [
        Buffer(
            id=f"submodules@mem_id{pool}",
            start=0,
            end=end,
            size=size,
            alignment=alignment,
            offset=0,
            pool=pool,
            kind=BufferKind.SUBMODULE,
            label="control-flow submodules",
        )
        for pool, size in reserved.items()
    ]


def forget_lifetimes(graph_module: torch.fx.GraphModule) -> None:
    """Clear the lifetimes `extract` wrote into the graph's specs: ExecuTorch's lifetime analysis only
    ever widens them, so a graph extracted again after its order changed needs them cleared."""
    for node in graph_module.graph.nodes:
        for spec in tree_leaves(node.meta.get("spec")):
            if isinstance(spec, TensorSpec):
                spec.lifetime = [None, None]


def control_flow_submodules(graph_module: torch.fx.GraphModule) -> list[tuple[torch.fx.Node, bool]]:
    """(get_attr node of the submodule, alloc_graph_input) in `_apply_algo_to_submodules`' order."""
    found = []
    for node in get_cond_nodes(graph_module):
        found += [(node.args[1], False), (node.args[2], False)]
    for node in get_while_nodes(graph_module):
        found += [(node.args[0], False), (node.args[1], False)]
    for node in get_map_nodes(graph_module):
        found.append((node.args[0], True))
    for node in get_scan_nodes(graph_module):
        found.append((node.args[0], True))
    return found


def state_buffers(
    graph_module: torch.fx.GraphModule, graph_signature: ExportGraphSignature, *, unplaced: bool = True
) -> list[StateRef]:
    """Buffer placeholders by FQN, mutable or not (as `_insert_mutable_buffer_specs` sees them).

    A buffer only read here may be mutated by another method; if so it must
    share that method's storage. Buffers a delegate consumes are gone from the
    signature by now (the delegate owns them), so they are not listed.
    `unplaced` demands that none has a mem_id/offset yet (shared state is
    placed later, across methods).
    """
    refs = []
    for node in graph_module.graph.nodes:
        if node.op != "placeholder" or node.target not in graph_signature.inputs_to_buffers:
            continue
        fqn = graph_signature.inputs_to_buffers[node.target]
        spec = get_node_tensor_specs(node)[0]
        if unplaced and (spec.mem_id is not None or spec.mem_offset is not None):
            raise ExtractionError(
                f"{node.name} (buffer {fqn!r}): already has mem_id {spec.mem_id} / mem_offset"
                f" {spec.mem_offset}; shared state must be placed by the planner"
            )
        refs.append(StateRef(fqn, node.name, spec, fqn in graph_signature.buffers_to_mutate.values()))
    return refs


# -- helpers ---------------------------------------------------------------------


def _cover_inplace_results(nodes: list[torch.fx.Node]) -> None:
    """Stretch the tensor an in-place op writes over every use of the op's result.

    `update_all_tensors_lifetime` aliases an in-place op's result spec onto
    the mutated input's spec, but `collect_specs_from_nodes` then skips the
    in-place node, so uses of the result never extend that lifetime. With
    `run_reinplace_pass=True`, ExecuTorch 1.5.1's own plan reuses the bytes
    while the result is still read, and the program computes wrong values.
    This is the one correction made to ExecuTorch's lifetimes.
    """
    index = {node: i for i, node in enumerate(nodes)}
    stretched = set()
    for node in nodes:
        if not is_inplace_node(node):
            continue
        for spec in get_node_tensor_specs(node):
            start, end = spec.lifetime
            if start is None or end is None:
                continue
            last = max((index[user] for user in node.users), default=end)
            if last > end:
                spec.lifetime = [start, last]
                stretched.add(spec)
    extend_storage_base_lifetimes(stretched)


def _pool_of(spec: TensorSpec) -> int:
    return DEFAULT_POOL if spec.mem_id is None else spec.mem_id


def _storage_root(
    spec: TensorSpec, planned: set[TensorSpec], names: dict[TensorSpec, tuple[str, str]]
) -> tuple[TensorSpec, int]:
    """The spec owning `spec`'s storage and the byte offset inside it."""
    rel, seen = 0, {spec}
    while spec.storage_base is not None:
        base = spec.storage_base
        who = names.get(spec, ("?",))[0]
        if base in seen:
            raise ExtractionError(f"{who}: storage_base chain is circular")
        if base not in planned:
            raise ExtractionError(
                f"{who}: its storage_base {names.get(base, ('an unnamed tensor',))[0]} is not memory planned"
                " (a graph input/output excluded by the alloc flags, a constant, or dynamic unbound)"
            )
        rel += spec.storage_base_offset
        seen.add(base)
        spec = base
    return spec, rel


def buffer_names(
    nodes: list[torch.fx.Node], graph_signature: ExportGraphSignature | None
) -> dict[TensorSpec, tuple[str, str]]:
    """Spec -> (buffer id, label) for every tensor of the nodes.

    The id is the name of the first node other than a `memory.alloc` that
    carries the spec (its producer, or its placeholder), with `[i]` when that
    node carries several; the label is that node's op name (a buffer FQN for
    placeholders). Call it after `extract`, which aliases in-place results.
    """
    found: dict[TensorSpec, tuple[str, str]] = {}
    fallback: dict[TensorSpec, tuple[str, str]] = {}
    for node in nodes:
        specs = get_node_tensor_specs(node)
        table = fallback if node.op == "call_function" and node.target is memory.alloc else found
        for i, spec in enumerate(specs):
            if spec not in table:
                bid = node.name if len(specs) == 1 else f"{node.name}[{i}]"
                table[spec] = (bid, _label(node, graph_signature))
    for spec, entry in fallback.items():
        found.setdefault(spec, entry)
    return found


def _label(node: torch.fx.Node, graph_signature: ExportGraphSignature | None) -> str:
    """The op name, or for placeholders the buffer FQN / "input"."""
    if node.op == "placeholder":
        buffers = graph_signature.inputs_to_buffers if graph_signature is not None else {}
        return buffers.get(str(node.target), "input")
    if node.op == "output":
        return "output"
    if node.target is executorch_call_delegate:
        module = getattr(node.graph.owning_module, str(cast(torch.fx.Node, node.args[0]).target), None)
        return f"delegate:{getattr(module, 'backend_id', '?')}"
    target = node.target
    return (
        str(target) if isinstance(target, torch._ops.OpOverload) else getattr(target, "__name__", str(target))
    )


def _buffer_kinds(
    nodes: list[torch.fx.Node], graph_signature: ExportGraphSignature | None
) -> dict[TensorSpec, BufferKind]:
    kinds: dict[TensorSpec, BufferKind] = {}
    for spec in get_graph_output_tensors(nodes):
        kinds[spec] = BufferKind.GRAPH_OUTPUT
    for spec in get_graph_input_tensors(nodes, graph_signature):
        kinds[spec] = BufferKind.GRAPH_INPUT
    for spec in get_mutable_buffer_specs(nodes, graph_signature):
        kinds[spec] = BufferKind.MUTABLE_STATE
    return kinds
