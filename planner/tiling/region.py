"""Regions a graph can compute one row band at a time, and the rows each op needs per band.

A region runs from a start tensor X (any NCHW activation, typically the image) to an end node O: the
ops on every path from X to O along which rows flow (a branch that reaches O only through a tensor of
one row, a squeeze-and-excitation's scale, is computed whole before the bands). It is legal when every op in it has row semantics (`semantics.rule`),
every activation it reads is X, an op of the region, or broadcast along H (a per-channel constant),
and nothing but O is read outside it. Given O's row bands, the rows every op must compute for a band
follow by walking the region backwards (`band_rows`): the hull of what its consumers read, clipped to
the tensor; what a consumer reads beyond the tensor is the zero (or -inf) padding of its window. A
dequantize read only by windows of one pad value is not clipped (`Region.borders`): it computes the
border rows too, from its integer input padded with the integer that maps to the pad value
(`semantics.integer_border`), so the pad sits on the int8 side of the dequantize -> conv pair.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

from torch.fx import Graph, Node

from memplan.planner.tiling.semantics import H, Refusal, Rule, integer_border, rule, shape

Rows = tuple[int, int]


@dataclass(frozen=True)
class Region:
    """Ops computed per band, in graph order; `start` is read (sliced) per band, `end` is assembled."""

    start: Node
    end: Node
    nodes: tuple[Node, ...]  # graph order, `end` last
    rules: dict[Node, Rule] = field(compare=False, hash=False)
    # Region ops whose rows may reach past the tensor -> the integer their input is padded with.
    borders: dict[Node, int] = field(default_factory=dict, compare=False, hash=False)
    axis: int = H  # what the pieces cut: row bands (H) or groups of channels (`channels.C`)

    @cached_property
    def row_args(self) -> dict[Node, tuple[int, ...]]:
        """Per op, the positions of its args it reads rows of: the start's or another op's (`reads`
        asks once per op and band, thousands of times per schedule)."""
        return {
            node: tuple(
                pos
                for pos in rule.spatial_args
                if pos < len(node.args)
                and ((arg := node.args[pos]) is self.start or (isinstance(arg, Node) and arg in self.rules))
            )
            for node, rule in self.rules.items()
        }


class GraphIndex:
    """The graph's nodes in order with ancestor/descendant bitmasks, so a region is two ANDs away."""

    def __init__(self, graph: Graph) -> None:
        self.nodes = list(graph.nodes)
        self.index = {n: i for i, n in enumerate(self.nodes)}
        self.ancestors = [0] * len(self.nodes)
        for i, n in enumerate(self.nodes):
            mask = 0
            for a in n.all_input_nodes:
                j = self.index[a]
                mask |= self.ancestors[j] | (1 << j)
            self.ancestors[i] = mask
        self.rules: dict[Node, Rule | Refusal] = {n: rule(n) for n in self.nodes if n.op == "call_function"}

    def descendants(self, start: Node) -> int:
        bit = 1 << self.index[start]
        mask = 0
        for i in range(self.index[start] + 1, len(self.nodes)):
            if self.ancestors[i] & bit:
                mask |= 1 << i
        return mask

    def members(self, start: Node, end: Node, below: int) -> list[Node] | None:
        """The ops on every path from `start` to `end`, in graph order (None: `end` is not below it)."""
        e = self.index[end]
        mask = below & (self.ancestors[e] | (1 << e))
        if not mask >> e & 1:
            return None
        return [self.nodes[i] for i in range(self.index[start] + 1, e + 1) if mask >> i & 1]

    def region(self, start: Node, end: Node, below: int) -> Region | Refusal:
        """The region from `start` to `end` (`below` = `descendants(start)`), or why it is illegal."""
        members = self.members(start, end, below)
        if members is None:
            return Refusal.NO_REGION
        members = _through_rows(members, end)
        inside = set(members)
        rules: dict[Node, Rule] = {}
        for n in members:
            r = self.rules.get(n, Refusal.UNKNOWN_SPATIAL_OP)
            if isinstance(r, Refusal):
                return r
            for pos, a in enumerate(n.args):
                if isinstance(a, Node) and a not in inside and a is not start and shape(a) is not None:
                    if pos in r.spatial_args and has_rows(a):
                        return Refusal.SPATIAL_INPUT_FROM_OUTSIDE
            if n is not end and any(u not in inside for u in n.users):
                return Refusal.ESCAPING_INTERMEDIATE
            rules[n] = r
        return Region(start, end, tuple(members), rules, _borders(members, rules, end))


def _through_rows(members: list[Node], end: Node) -> list[Node]:
    """The members whose rows reach `end`: a member reaching it only through a tensor of one row (a
    squeeze-and-excitation's mean and the 1x1 convolutions after it) is no band's work. It is left
    outside, computed once from the whole start before the bands, and read by them as a constant
    broadcast along H; were it to read a row-band member, that member would escape the region."""
    if not has_rows(end):
        return members  # no rows reach it: the region's refusal says which op stops them
    if all(has_rows(n) for n in members):
        return members  # each is on a path to the end through tensors of rows
    kept = {end}
    for n in reversed(members):
        if n is not end and has_rows(n) and any(u in kept for u in n.users):
            kept.add(n)
    return [n for n in members if n in kept]


def _borders(members: list[Node], rules: dict[Node, Rule], end: Node) -> dict[Node, int]:
    """The region's integer -> float pointwise ops read only by windows padding with one value, and
    the integer their input is padded with in its place."""
    borders = {}
    for n in members:
        if n is end or rules[n].window is not None:
            continue
        windows = {rules[u].window is not None for u in n.users}
        values = {rules[u].pad_value for u in n.users}
        if windows == {True} and len(values) == 1:
            value = integer_border(n, values.pop())
            if value is not None:
                borders[n] = value
    return borders


def has_rows(node: Node) -> bool:
    """True for a tensor with more than one row (broadcast along H it would not be)."""
    s = shape(node)
    return s is not None and len(s) >= 2 and s[-2] != 1


def bands(height: int, count: int) -> list[Rows]:
    """`count` contiguous row ranges covering [0, height), sizes differing by at most one row."""
    base, extra = divmod(height, count)
    out, row = [], 0
    for i in range(count):
        size = base + (i < extra)
        out.append((row, row + size))
        row += size
    return out


def reads(region: Region, node: Node, rows: Rows) -> dict[int, Rows]:
    """Unclipped rows of each spatial arg (by position) that `node` reads to compute its `rows`."""
    window = region.rules[node].window
    need = rows if window is None else window.input_rows(*rows)
    return {pos: need for pos in region.row_args[node]}


def band_rows(region: Region, out_rows: Rows) -> dict[Node, Rows]:
    """Rows of every region op (and of the start) needed to compute `out_rows` of the end."""
    need: dict[Node, Rows] = {region.end: out_rows}
    for node in reversed(region.nodes):
        rows = need.get(node)
        if rows is None:  # only reached through ops that need none of it: cannot happen in a region
            raise AssertionError(f"{node.name} is in the region but no op reads it")
        for pos, (lo, hi) in reads(region, node, rows).items():
            arg = node.args[pos]
            assert isinstance(arg, Node)
            if arg not in region.borders:
                height = shape(arg)[H]  # type: ignore[index]
                lo, hi = max(lo, 0), min(hi, height)
            if arg in need:
                old = need[arg]
                lo, hi = min(lo, old[0]), max(hi, old[1])
            need[arg] = (lo, hi)
    return need
