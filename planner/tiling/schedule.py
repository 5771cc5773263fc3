"""The tiled region as a list of pieces: what `rewrite` emits and `cost` measures, built once.

For each band of the end's rows, in order: the start's rows the band needs (a slice of the start,
unless the band needs all of it), then every region op on the rows it must compute, each fed a slice
of its input when it needs fewer rows than were computed, and an explicit pad where its window reaches
past the tensor's true border (so inside the image a band reads real neighbours, never zeros); a
dequantize the region lets reach past the border pads its integer input instead. Last,
one cat along H assembles the end from the bands.

Rows two bands share (a window's halo) are computed once when `cache_rows` is on, as Vela's cascading
and line-buffer accelerators do: a cached tensor computes only the rows no earlier band computed, the
band reads them joined (a cat along H) after the rows it kept from the band before (a slice carried
over), and keeps in turn the rows the next band needs. So tiling adds no MACs there, and what stays
live between bands is a few rows per cached tensor. Cached are the tensors a region may be cut at
(`cacheable`): in a quantized graph its integer ones, so no slice or cat ever splits the
dequantize -> op -> quantize pattern an int8 kernel is matched on; the float ops between them compute
exactly the rows the next integer tensor needs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch
from torch.fx import Node

from memplan.planner.tiling.region import Region, Rows, bands, reads
from memplan.planner.tiling.semantics import H, itemsize, shape

START = -1  # `Piece.inputs` value: the start tensor itself, whole


@dataclass(frozen=True)
class Piece:
    """One tensor the tiled region creates.

    kind "slice": rows `cut` (relative) of input piece; "pad": `pad` = (top, bottom, value) rows of
    padding around its input; "op": `origin` computed on `rows`, its spatial args by position in
    `args`; "join": rows kept from earlier bands and rows just computed, concatenated along H;
    "cat": the bands of the end, concatenated along H (the last piece).
    """

    kind: str
    origin: Node
    rows: Rows  # rows of `origin` this piece holds (for a pad: including the padding rows, unclipped)
    inputs: tuple[int, ...]  # piece indices read (START: the start tensor)
    args: dict[int, int] = field(default_factory=dict)  # "op": arg position -> piece index
    cut: Rows = (0, 0)  # "slice"
    pad: tuple[int, int, float] = (0, 0, 0.0)  # "pad"

    axis: int = H  # the dim `rows` and `cut` run along, and a slice or cat cuts (channels: 1)

    shape: tuple[int, ...] = ()  # set from `origin` and `rows` on creation
    bytes: int = 0

    def __post_init__(self) -> None:
        full = list(shape(self.origin) or ())
        full[self.axis] = self.rows[1] - self.rows[0]
        object.__setattr__(self, "shape", tuple(full))
        object.__setattr__(self, "bytes", math.prod(full) * itemsize(self.origin))


@dataclass(frozen=True)
class BandRows:
    """One band's rows: `need`, the rows of each tensor its readers in this band read (the start's
    included); `compute`, the rows each op computes in this band (fewer than `need` for a cached tensor
    whose first rows an earlier band computed; absent when it computes none)."""

    need: dict[Node, Rows]
    compute: dict[Node, Rows]


def cacheable(region: Region) -> set[Node]:
    """The region's tensors whose rows are kept from band to band: those a window reads (directly,
    or through ops computing exactly the rows their readers read), as only a window reads a row
    twice. Never the end (its bands are disjoint) or a border dequantize (it computes padding rows);
    in a quantized graph only the integer tensors, where a slice and a cat do not split an int8
    kernel's pattern."""
    inner = [n for n in region.nodes if n is not region.end and n not in region.borders]
    integer = [n for n in inner if _integer(n)]
    quantized = bool(integer) or _integer(region.start) or _integer(region.end)
    cut = set(integer if quantized else inner)
    windowed: dict[Node, bool] = {}
    for node in reversed(region.nodes):
        readers = [u for u in node.users if u in region.rules]
        windowed[node] = any(
            region.rules[u].window is not None or (u not in cut and windowed[u]) for u in readers
        )
    return {n for n in cut if windowed[n]}


def _integer(node: Node) -> bool:
    value = node.meta.get("val")
    return isinstance(value, torch.Tensor) and not value.dtype.is_floating_point


def band_plan(region: Region, count: int, cache_rows: bool = True) -> list[BandRows] | None:
    """The rows of every band; None when a band would read no rows of some tensor (a band lying
    wholly in the padding). Rows kept (`cache_rows`): bands stream the start (`streamed`); else each
    band is a share of the end's rows, everything it needs computed again (`recomputed`)."""
    return streamed(region, count) if cache_rows else recomputed(region, count)


def recomputed(region: Region, count: int) -> list[BandRows] | None:
    """Each band a share of the end's rows; every op computes all the rows the band needs of it."""
    plan = []
    for band in bands(shape(region.end)[H], count):  # type: ignore[index]
        rows = _band(region, {region.end: band}, {region.end})
        if rows is None:
            return None
        plan.append(rows)
    return plan


def streamed(region: Region, count: int) -> list[BandRows] | None:
    """Each band a share of the start's rows: with it, every cached op computes the rows no earlier band
    computed that its readers can read now (the end: all it can compute), as a line-buffer pipeline
    does, so the first rows of the end need no band holding their whole receptive field; the ops
    between cached ones compute what their readers read."""
    progressive = cacheable(region) | {region.end}
    done: dict[Node, int] = {}
    plan = []
    for _, stop in bands(shape(region.start)[H], count):  # type: ignore[index]
        ready = {region.start: stop}
        for node in region.nodes:
            ready[node] = _computable(region, node, ready)
        reach = _reach(region, ready, progressive)
        given = {}
        for node in progressive:
            top = ready[node] if node is region.end else min(ready[node], reach.get(node, 0))
            if top > done.get(node, 0):
                given[node] = (done.get(node, 0), top)
        rows = _band(region, given, progressive)
        if rows is None:
            return None
        done.update((n, hi) for n, (_, hi) in given.items())
        plan.append(rows)
    return plan


def _computable(region: Region, node: Node, ready: dict[Node, int]) -> int:
    """How many of `node`'s first rows can be computed from the first `ready` rows of its inputs (all
    of them once every input is complete; a window's padding rows are always there)."""
    rule = region.rules[node]
    rows = shape(node)[H]  # type: ignore[index]
    for pos in rule.spatial_args:
        arg = node.args[pos]
        if not isinstance(arg, Node) or arg not in ready or ready[arg] >= shape(arg)[H]:  # type: ignore[index]
            continue
        have = ready[arg]
        w = rule.window
        rows = min(rows, have if w is None else max((have + w.padding - w.span) // w.stride + 1, 0))
    return rows


def _reach(region: Region, ready: dict[Node, int], progressive: set[Node]) -> dict[Node, int]:
    """Per tensor, the row below which its readers will read this band: a cached reader (or the end)
    computes all the rows it can, any other reader the rows its own readers will read."""
    reach: dict[Node, int] = {}
    for node in reversed(region.nodes):
        top = ready[node] if node in progressive else min(ready[node], reach.get(node, 0))
        if top > 0:
            for pos, (_, hi) in reads(region, node, (0, top)).items():
                arg = node.args[pos]
                assert isinstance(arg, Node)
                reach[arg] = max(reach.get(arg, 0), hi)
    return reach


def _band(region: Region, given: dict[Node, Rows], progressive: set[Node]) -> BandRows | None:
    """One band's rows, walking the region backwards: the `progressive` ops compute their `given`
    rows (none when absent), every other op the hull of what its readers read (clipped to the tensor
    but for a border op); None when some read lies wholly outside its tensor."""
    need: dict[Node, Rows] = {}
    compute: dict[Node, Rows] = {}
    for node in reversed(region.nodes):
        rows = given.get(node) if node in progressive else need.get(node)
        if rows is None:
            continue
        compute[node] = rows
        for pos, (lo, hi) in reads(region, node, rows).items():
            arg = node.args[pos]
            assert isinstance(arg, Node)
            if arg not in region.borders:
                lo, hi = max(lo, 0), min(hi, shape(arg)[H])  # type: ignore[index]
                if hi <= lo:
                    return None
            if arg in need:
                lo, hi = min(lo, need[arg][0]), max(hi, need[arg][1])
            need[arg] = (lo, hi)
    if region.end in compute:
        need[region.end] = compute[region.end]
    return BandRows(need, compute)


Held = tuple[int, Rows]  # a piece index and the rows of its tensor it holds


def schedule(region: Region, count: int, cache_rows: bool = True) -> list[Piece] | None:
    """The pieces computing `region` in `count` bands (shared rows computed once with `cache_rows`);
    None when a band would read no rows of some tensor."""
    plan = band_plan(region, count, cache_rows)
    if plan is None:
        return None
    emit = _Emitter(region)
    cached = cacheable(region) if cache_rows else set()
    kept: dict[Node, Held] = {}  # cached tensor -> the rows kept for later bands
    later_lows = _later_lows(plan)
    outputs = []
    for k, band in enumerate(plan):
        held: dict[Node, Held] = {}
        if region.start in band.need:
            held[region.start] = emit.cut((START, emit.start_rows), region.start, band.need[region.start])
        for node in region.nodes:
            parts = [kept.pop(node)] if node in kept else []
            if node in band.compute:
                parts.append(emit.op(node, band.compute[node], held))
            if not parts:
                continue
            if node in band.need:
                held[node] = emit.assemble(parts, node, band.need[node])
            later = later_lows[k].get(node)
            top = parts[-1][1][1]
            if node in cached and later is not None and later < top:
                whole = held.get(node)
                covers = whole is not None and whole[1][0] <= later and whole[1][1] == top
                kept[node] = emit.assemble([whole] if covers else parts, node, (later, top))  # type: ignore[list-item]
        if region.end in band.compute:
            outputs.append(held[region.end][0])
    emit.add(Piece("cat", region.end, (0, shape(region.end)[H]), tuple(outputs)))  # type: ignore[index]
    return emit.pieces


def _later_lows(plan: list[BandRows]) -> list[dict[Node, int]]:
    """Per band, for each tensor a later band needs, the lowest row any later band needs of it (not
    only the next band: a residual's reads lag a window's, so a later band may need rows below the
    next one's)."""
    lows: list[dict[Node, int]] = [{} for _ in plan]
    for k in range(len(plan) - 2, -1, -1):
        lows[k] = dict(lows[k + 1])
        for node, (lo, _) in plan[k + 1].need.items():
            lows[k][node] = min(lo, lows[k].get(node, lo))
    return lows


class _Emitter:
    """Appends the pieces of a schedule: ops on rows, slices, border pads and joins."""

    def __init__(self, region: Region) -> None:
        self.region = region
        self.pieces: list[Piece] = []
        self.start_rows = (0, shape(region.start)[H])  # type: ignore[index]

    def add(self, piece: Piece) -> int:
        self.pieces.append(piece)
        return len(self.pieces) - 1

    def cut(self, source: Held, node: Node, rows: Rows) -> Held:
        """`rows` of `node`, sliced from `source` unless it holds exactly those."""
        index, have = source
        assert have[0] <= rows[0] and rows[1] <= have[1], f"{node.name}: rows {rows} not in {have}"
        if rows == have:
            return source
        return self.add(
            Piece("slice", node, rows, (index,), cut=(rows[0] - have[0], rows[1] - have[0]))
        ), rows

    def assemble(self, parts: list[Held], node: Node, rows: Rows) -> Held:
        """`rows` of `node` from consecutive `parts`: the one holding them (sliced), or a join."""
        lo, hi = rows
        pieces = [
            self.cut(p, node, (max(lo, p[1][0]), min(hi, p[1][1])))
            for p in parts
            if p[1][0] < hi and lo < p[1][1]
        ]
        assert pieces and pieces[0][1][0] == lo and pieces[-1][1][1] == hi, (
            f"{node.name}: rows {rows} not kept"
        )
        if len(pieces) == 1:
            return pieces[0]
        return self.add(Piece("join", node, rows, tuple(i for i, _ in pieces))), rows

    def op(self, node: Node, rows: Rows, held: dict[Node, Held]) -> Held:
        """`node` computed on `rows`, each spatial input cut from what the band holds and padded where
        its window reaches past the tensor's border."""
        region = self.region
        args = {}
        for pos, (lo, hi) in reads(region, node, rows).items():
            arg = node.args[pos]
            assert isinstance(arg, Node)
            clo, chi = lo, hi  # a border op holds its padding rows itself
            if arg not in region.borders:
                clo, chi = max(lo, 0), min(hi, shape(arg)[H])  # type: ignore[index]
            source = self.cut(held[arg], arg, (clo, chi))[0]
            if (lo, hi) != (clo, chi):
                pad = (clo - lo, hi - chi, region.borders.get(node, region.rules[node].pad_value))
                source = self.add(Piece("pad", arg, (lo, hi), (source,), pad=pad))
            args[pos] = source
        return self.add(Piece("op", node, rows, tuple(args.values()), args=args)), rows
