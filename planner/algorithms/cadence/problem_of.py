"""A Cadence `MemoryConfig` plus its `MemConstraints` as a memplan `Problem`.

Cadence (backends/cadence/aot) plans into several memories, fastest first,
each with a size and an alignment, and constrains placement:

- memories are banks: memory i (ExecuTorch mem_id i, from 1) is bank pool i
  with the memory's size as capacity and its alignment (offsets and arena
  ends are multiples of it, as Cadence's `get_aligned_offset` makes them);
- a spec may not go to a blocked mem_id (`MemConstraints` blocklist), nor to
  a memory the algorithm marked invalid (`memory_id_is_valid`);
- an absolute constraint pins a spec to one memory, and maybe to one offset;
- a relative constraint (`GenerateMemConstraints`: a cat's input inside its
  output, a slice's or select's output inside its input, a `memory.view`
  inside its base) is a contiguous group: the dependent sits `offset` bytes
  into its source, for as long as either lives.

The seam for other callers (e.g. a `PlannerPass` given a Cadence algorithm):
`cadence_problem(specs, graph_module, memory_config, constraints)` returns the
problem and which spec each buffer id stands for; nothing here plans.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import torch
from executorch.backends.cadence.aot.memory_constraints import MemConstraints
from executorch.backends.cadence.aot.utils import MemoryConfig
from executorch.exir.tensor import TensorSpec

from memplan.errors import ExtractionError
from memplan.planner.memory.instruction_traffic import argument_counts
from memplan.problem import Bank, Buffer, ContiguousGroup, Problem


@dataclass(frozen=True)
class CadenceProblem:
    """The problem, the spec behind every buffer id, and the members placed by their source."""

    problem: Problem
    spec_of: dict[str, TensorSpec]
    roots: tuple[str, ...]  # buffers placed on their own (Cadence's non-skipped specs)


def memory_banks(memory_config: MemoryConfig) -> tuple[Bank, ...]:
    """One bank per Cadence memory, in Cadence's order (mem_id 1 first: its preferred memory)."""
    alignments = memory_config.memory_alignments or [1] * len(memory_config.memory_sizes)
    if len(alignments) != len(memory_config.memory_sizes):
        raise ExtractionError(
            f"MemoryConfig has {len(memory_config.memory_sizes)} memory sizes but"
            f" {len(alignments)} alignments; give one alignment per memory"
        )
    names = memory_config.memory_names or []
    return tuple(
        Bank(
            names[i] if i < len(names) else f"memory {i + 1}",
            i + 1,
            size,
            alignment=alignments[i],
        )
        for i, size in enumerate(memory_config.memory_sizes)
    )


def cadence_problem(
    specs: Iterable[TensorSpec],
    graph_module: torch.fx.GraphModule,
    memory_config: MemoryConfig,
    constraints: MemConstraints,
    valid_mem_ids: Sequence[bool] | None = None,
    name: str = "",
) -> CadenceProblem:
    """The memplan problem of planning `specs` the way Cadence's `plan_with_constraints` would.

    `valid_mem_ids[m]` False keeps every spec out of memory m (Cadence's
    `memory_id_is_valid`). A spec whose source is not planned here (Cadence
    leaves it unresolved) and a spec without a lifetime are left out.
    """
    banks = memory_banks(memory_config)
    node_of = _nodes_by_spec(graph_module)
    wanted: dict[int, TensorSpec] = {}
    for spec in specs:
        if isinstance(spec, TensorSpec) and spec.lifetime[0] is not None:
            wanted.setdefault(id(spec), spec)
    ids = {key: _buffer_id(node_of, spec) for key, spec in wanted.items()}

    parent = _relative_parents(wanted, ids, node_of, constraints)
    kept = {
        key: spec for key, spec in wanted.items() if not constraints.skipped_spec(spec) or ids[key] in parent
    }
    spec_of = {ids[key]: spec for key, spec in kept.items()}

    def root(buffer: str) -> str:
        while buffer in parent:
            buffer = parent[buffer][0]
        return buffer

    lifetimes = {bid: _half_open(spec) for bid, spec in spec_of.items()}
    for member in sorted(parent, key=lambda b: -_depth(parent, b)):  # deepest first: parents cover members
        up = parent[member][0]
        lifetimes[up] = (
            min(lifetimes[up][0], lifetimes[member][0]),
            max(lifetimes[up][1], lifetimes[member][1]),
        )

    allowed = {
        bid: _allowed_memories(spec, banks, constraints, valid_mem_ids) for bid, spec in spec_of.items()
    }
    group_choices = _group_choices(allowed, root)

    counts = argument_counts(spec_of, graph_module.graph.nodes)
    buffers = []
    for bid, spec in spec_of.items():
        choices = group_choices[root(bid)]
        pinned = constraints.get_absolute_placement_constraint(spec)
        start, end = lifetimes[bid]
        buffers.append(
            Buffer(
                bid,
                start,
                end,
                spec.nbytes() if bid in parent else spec.allocated_memory,
                offset=pinned.offset if pinned is not None and bid not in parent else None,
                pool=choices[0],
                banks=choices,
                accesses=counts.get(bid, 0),
                label=bid,
            )
        )
    groups: dict[str, list[tuple[str, int]]] = {}
    for member, (up, offset) in parent.items():
        groups.setdefault(up, []).append((member, offset))
    problem = Problem(
        tuple(buffers),
        tuple(ContiguousGroup(up, tuple(members)) for up, members in groups.items()),
        banks=banks,
        name=name,
    )
    return CadenceProblem(problem, spec_of, tuple(b for b in spec_of if b not in parent))


def _relative_parents(
    wanted: dict[int, TensorSpec],
    ids: dict[int, str],
    node_of: dict[int, torch.fx.Node],
    constraints: MemConstraints,
) -> dict[str, tuple[str, int]]:
    """Buffer id -> (the buffer it sits inside, offset), for every spec Cadence places relative to a
    planned source."""
    parent: dict[str, tuple[str, int]] = {}
    for key, spec in wanted.items():
        if not constraints.skipped_spec(spec):
            continue
        node = node_of.get(key)
        source = constraints.get_relative_placement_source(node) if node is not None else None
        source_spec = source.source.meta.get("spec") if source is not None else None
        if source is None or id(source_spec) not in wanted:
            continue
        parent[ids[key]] = (ids[id(source_spec)], source.offset)
    return parent


def _group_choices(
    allowed: dict[str, tuple[int, ...]], root: Callable[[str], str]
) -> dict[str, tuple[int, ...]]:
    """Per group root: the memories every member may go to (in the root's order); none left is an error."""
    group_choices: dict[str, tuple[int, ...]] = {}
    for bid in allowed:
        top = root(bid)
        group_choices[top] = tuple(m for m in group_choices.get(top, allowed[top]) if m in allowed[bid])
    for top, choices in group_choices.items():
        if not choices:
            members = sorted(b for b in allowed if root(b) == top)
            raise ExtractionError(
                f"{top!r} (with {', '.join(members)} placed inside it) has no memory left: every mem_id is"
                " blocked, invalid or pinned elsewhere for one of them"
            )
    return group_choices


def _allowed_memories(
    spec: TensorSpec,
    banks: Sequence[Bank],
    constraints: MemConstraints,
    valid_mem_ids: Sequence[bool] | None,
) -> tuple[int, ...]:
    pinned = constraints.get_absolute_placement_constraint(spec)
    candidates = [pinned.pinned_memory_id] if pinned is not None else [b.pool for b in banks]
    return tuple(
        m
        for m in candidates
        if (valid_mem_ids is None or (m < len(valid_mem_ids) and valid_mem_ids[m]))
        and not constraints.is_mem_id_in_blocklist(spec, m)
        and any(b.pool == m for b in banks)
    )


def _nodes_by_spec(graph_module: torch.fx.GraphModule) -> dict[int, torch.fx.Node]:
    """The first node carrying each spec (a `memory.alloc` and its op share one: the alloc comes first)."""
    found: dict[int, torch.fx.Node] = {}
    for node in graph_module.graph.nodes:
        spec = node.meta.get("spec")
        if isinstance(spec, TensorSpec):
            found.setdefault(id(spec), node)
    return found


def _buffer_id(node_of: dict[int, torch.fx.Node], spec: TensorSpec) -> str:
    node = node_of.get(id(spec))
    return node.name if node is not None else f"spec_{id(spec):x}"


def _half_open(spec: TensorSpec) -> tuple[int, int]:
    start, last = spec.lifetime
    return int(start), int(last) + 1


def _depth(parent: dict[str, tuple[str, int]], buffer: str) -> int:
    depth = 0
    while buffer in parent:
        buffer = parent[buffer][0]
        depth += 1
    return depth
