"""When a state's bytes start being overwritten, and which reads of its old value come too late.

A state updated where it lives holds its old value until the first write
into its bytes. Without other levers that write is the new value's
producer (`state_in_place.analysis` checks that nothing reads the old value after it
starts). A lever that places a tensor inside another one moves writes
earlier: with cat fusion the producer of every (nested) piece of a cat
whose output is the state writes that piece into the state's bytes as it
runs, long before the cat. The write window of a state therefore starts at
the first write by any node into any byte of the state, and every read of
the old value from that node on would see new bytes.

`late_reads` finds those reads on a planning graph, given where each
tensor's bytes sit (`Placement`). It looks only at what the graph does: the
tensors each node writes (its schema's written arguments, `out=`
included; the outputs of delegates and control flow), the nodes reading
the state or a view of it, and the instructions a lever removes. A lever
refuses (or undoes) the placements behind every `LateRead`.
"""

from __future__ import annotations

import operator
from collections import defaultdict
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass

import torch
from executorch.exir import memory
from executorch.exir.operator.convert import unwrap_op_overload
from executorch.exir.tensor import TensorSpec, num_bytes_from_shape_and_dtype
from torch.utils._pytree import tree_flatten

from memplan.planner.levers.graph_facts import view_base

# Where a tensor's bytes sit: (the TensorSpec owning the region, byte offset inside it). A tensor
# no lever places sits at offset 0 of its own spec.
Placement = Callable[[TensorSpec], tuple[TensorSpec, int]]
# A write into a region: (first byte, end, position in the graph, spec written or None for an
# extra write, node).
_Write = tuple[int, int, int, TensorSpec | None, torch.fx.Node]


@dataclass(frozen=True)
class ExtraWrite:
    """Bytes a lever writes just before `before` runs (a clone into a cat slot), reading `source`."""

    before: torch.fx.Node
    region: TensorSpec
    offset: int
    nbytes: int
    source: torch.fx.Node | None = None


@dataclass(frozen=True)
class LateRead:
    """`writer` writes `written` into `state`'s bytes; `readers` read the old value at or after it."""

    state: str  # node name of the state's placeholder
    writer: str  # the node (or the node an extra write precedes)
    written: TensorSpec  # the spec written there (the region's, for an extra write)
    readers: tuple[str, ...]

    def detail(self) -> str:
        return f"{self.writer} writes into {self.state}'s bytes before {', '.join(self.readers[:5])} read(s) its old value"


def late_reads(
    nodes: Sequence[torch.fx.Node],
    where: Placement,
    *,
    skipped: Collection[torch.fx.Node] = (),
    extra_writes: Iterable[ExtraWrite] = (),
    same_bytes: Mapping[torch.fx.Node, torch.fx.Node] | None = None,
) -> list[LateRead]:
    """Every write into a state's bytes that some read of the state's old value follows.

    `nodes` is the graph in execution order; `skipped` the instructions a
    lever removes (they neither read nor write); `same_bytes` maps nodes a
    lever turns into no-ops over another node's bytes (an output placed
    inside its input) to that node, so reading them reads it.

    The old value of state `s` is read by every node that reads `s` (or a
    view of it) before the first node writing all of `s`'s own spec (the
    in-place producer or the write-back copy; reads after it read the new
    value). A write into `s`'s bytes of any other spec starts the window
    early, and every such read at or after it is late. A write of the full
    spec is `state_in_place.analysis`'s to judge, except for no-op aliases: one taken of the
    old value must see no write into the state's bytes up to its last reader
    (the output node included), one taken later no write after it.
    """
    index = {n: i for i, n in enumerate(nodes)}
    skip = set(skipped)
    aliases = dict(same_bytes or {})
    # Every write, filed under the region holding its bytes.
    by_region: dict[int, list[_Write]] = defaultdict(list)
    for node in nodes:
        if node in skip:
            continue
        for spec in written_specs(node):
            region, at = where(spec)
            by_region[id(region)].append((at, at + _nbytes(spec), index[node], spec, node))
    extras = list(extra_writes)
    for extra in extras:
        at = extra.offset
        by_region[id(extra.region)].append((at, at + extra.nbytes, index[extra.before], None, extra.before))
    found = []
    for state in nodes:
        spec = state.meta.get("spec") if state.op == "placeholder" else None
        if not isinstance(spec, TensorSpec):
            continue
        region, lo = where(spec)
        hi = lo + _nbytes(spec)
        inside = sorted(
            (w for w in by_region.get(id(region), ()) if w[0] < hi and lo < w[1]), key=lambda w: w[2]
        )
        if not inside:
            continue
        full = min((w[2] for w in inside if w[3] is spec), default=len(nodes))
        early = [w for w in inside if w[3] is not spec]
        late: dict[int, list[torch.fx.Node]] = defaultdict(list)  # position in `inside` -> readers
        direct, through_alias = _old_value_readers(state, skip, aliases)
        direct += [e.before for e in extras if e.source is not None and _reads(e.source, state, aliases)]
        if early:
            for reader in direct:
                if early[0][2] <= index[reader] < full:
                    late[inside.index(early[0])].append(reader)
        for alias, reader in through_alias:
            after = -1 if index[alias] < full else index[alias]
            for n, w in enumerate(inside):
                if after < w[2] <= index[reader]:
                    late[n].append(reader)
                    break
        for n, readers in sorted(late.items()):
            _, _, _, piece, writer = inside[n]
            names = tuple(r.name for r in sorted(set(readers), key=index.__getitem__))
            found.append(LateRead(state.name, writer.name, region if piece is None else piece, names))
    return found


def written_specs(node: torch.fx.Node) -> list[TensorSpec]:
    """The TensorSpecs whose bytes a node writes when it runs (views resolved to their base).

    An op with a schema writes its arguments marked as written (out= and
    in-place ones); a delegate or control-flow call writes its outputs;
    `memory.alloc`, `memory.view` and `getitem` write nothing.
    """
    if node.op != "call_function" or node.target in (memory.alloc, memory.view, operator.getitem):
        return []
    try:
        schema = unwrap_op_overload(node.target)._schema
    except (TypeError, AttributeError):
        return [s for s in tree_flatten(node.meta.get("spec"))[0] if isinstance(s, TensorSpec)]
    found = []
    for i, arg in enumerate(schema.arguments):
        if arg.alias_info is None or not arg.alias_info.is_write:
            continue
        given = node.args[i] if i < len(node.args) and not arg.kwarg_only else node.kwargs.get(arg.name)
        for value in tree_flatten(given)[0]:
            if isinstance(value, torch.fx.Node):
                spec = view_base(value).meta.get("spec")
                if isinstance(spec, TensorSpec):
                    found.append(spec)
    return found


def _old_value_readers(
    state: torch.fx.Node, skip: set[torch.fx.Node], aliases: Mapping[torch.fx.Node, torch.fx.Node]
) -> tuple[list[torch.fx.Node], list[tuple[torch.fx.Node, torch.fx.Node]]]:
    """Nodes reading `state` or a view of it (the output node excluded), and (no-op alias, reader)
    for nodes reading it through an alias a lever made (the output node included)."""
    direct: list[torch.fx.Node] = []
    through_alias: list[tuple[torch.fx.Node, torch.fx.Node]] = []
    todo: list[tuple[torch.fx.Node, torch.fx.Node | None]] = [(state, None)]
    seen = {state}
    while todo:
        current, alias = todo.pop()
        for user in current.users:
            is_view = user.op == "call_function" and user.target is memory.view and user.args[0] is current
            if is_view or aliases.get(user) is current:
                if user not in seen:
                    seen.add(user)
                    # A chain denotes the state's value when its first no-op alias was taken.
                    todo.append((user, alias if alias is not None or is_view else user))
            elif user in skip:
                continue
            elif alias is not None:
                through_alias.append((alias, user))
            elif user.op != "output":
                direct.append(user)
    return direct, through_alias


def _reads(
    source: torch.fx.Node, state: torch.fx.Node, aliases: Mapping[torch.fx.Node, torch.fx.Node]
) -> bool:
    """True if `source` is `state` or a view / no-op alias chain of it."""
    node: torch.fx.Node | None = source
    while node is not None and node is not state:
        if node.op == "call_function" and node.target is memory.view:
            node = node.args[0] if isinstance(node.args[0], torch.fx.Node) else None
        else:
            node = aliases.get(node)
    return node is state


def _overlaps(placed: tuple[TensorSpec, int], nbytes: int, region: TensorSpec, lo: int, hi: int) -> bool:
    where, at = placed
    return where is region and at < hi and lo < at + nbytes


def _nbytes(spec: TensorSpec) -> int:
    return num_bytes_from_shape_and_dtype(torch.Size(spec.shape), spec.dtype)
