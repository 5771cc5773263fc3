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

    shape: tuple[int, ...] = ()  # set from `origin` and `rows` on creation
    bytes: int = 0

    def __post_init__(self) -> None:
        full = list(shape(self.origin) or ())
        full[H] = self.rows[1] - self.rows[0]
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
    """The region's tensors whose rows may be kept from band to band: every op but the end (its bands
    are disjoint) and the border dequantizes (they compute padding rows); in a quantized graph only the
    integer tensors, where a slice and a cat do not split an int8 kernel's pattern."""
    inner = [n for n in region.nodes if n is not region.end and n not in region.borders]
    integer = [n for n in inner if _integer(n)]
    quantized = bool(integer) or _integer(region.start) or _integer(region.end)
    return set(integer if quantized else inner)


def _integer(node: Node) -> bool:
    value = node.meta.get("val")
    return isinstance(value, torch.Tensor) and not value.dtype.is_floating_point


def band_plan(region: Region, count: int, cache_rows: bool = True) -> list[BandRows] | None:
    """The rows of every band, walking the region backwards from the end's band; None when a band
    would read no rows of some tensor (a band lying wholly in the padding)."""
    cached = cacheable(region) if cache_rows else set()
    done: dict[Node, int] = {}  # cached tensor -> rows below this were computed by earlier bands
    plan = []
    for band in bands(shape(region.end)[H], count):  # type: ignore[index]
        need: dict[Node, Rows] = {region.end: band}
        compute: dict[Node, Rows] = {}
        for node in reversed(region.nodes):
            if node not in need:
                continue  # its readers compute nothing this band
            lo, hi = need[node]
            if node in done:
                lo = max(lo, done[node])
            if lo >= hi:
                continue
            compute[node] = (lo, hi)
            for pos, (a, b) in reads(region, node, (lo, hi)).items():
                arg = node.args[pos]
                assert isinstance(arg, Node)
                if arg not in region.borders:
                    a, b = max(a, 0), min(b, shape(arg)[H])  # type: ignore[index]
                    if b <= a:
                        return None
                if arg in need:
                    a, b = min(a, need[arg][0]), max(b, need[arg][1])
                need[arg] = (a, b)
        for node in cached & compute.keys():
            done[node] = compute[node][1]
        plan.append(BandRows(need, compute))
    return plan


def schedule(region: Region, count: int, cache_rows: bool = True) -> list[Piece] | None:
    """The pieces computing `region` in `count` row bands (shared rows computed once with
    `cache_rows`); None when a band would read no rows of some tensor."""
    plan = band_plan(region, count, cache_rows)
    if plan is None:
        return None
    pieces: list[Piece] = []

    def add(piece: Piece) -> int:
        pieces.append(piece)
        return len(pieces) - 1

    def rows_of(source: tuple[int, Rows], node: Node, rows: Rows) -> int:
        """Piece index holding `rows` of `node`, sliced from `source` (index, rows held) if need be."""
        index, held = source
        if rows == held:
            return index
        return add(Piece("slice", node, rows, (index,), cut=(rows[0] - held[0], rows[1] - held[0])))

    cached = cacheable(region) if cache_rows else set()
    start_rows = (0, shape(region.start)[H])  # type: ignore[index]
    kept: dict[Node, tuple[int, Rows]] = {}  # cached tensor -> the piece of rows kept for later bands
    outputs = []
    for k, band in enumerate(plan):
        held: dict[Node, tuple[int, Rows]] = {}
        if region.start in band.need:
            held[region.start] = (
                rows_of((START, start_rows), region.start, band.need[region.start]),
                band.need[region.start],
            )
        for node in region.nodes:
            fresh = None
            if node in band.compute:
                args = {}
                for pos, (lo, hi) in reads(region, node, band.compute[node]).items():
                    arg = node.args[pos]
                    assert isinstance(arg, Node)
                    clo, chi = lo, hi  # a border op holds its padding rows itself
                    if arg not in region.borders:
                        clo, chi = max(lo, 0), min(hi, shape(arg)[H])  # type: ignore[index]
                    source = rows_of(held[arg], arg, (clo, chi))
                    if (lo, hi) != (clo, chi):
                        pad = (clo - lo, hi - chi, region.borders.get(node, region.rules[node].pad_value))
                        source = add(Piece("pad", arg, (lo, hi), (source,), pad=pad))
                    args[pos] = source
                fresh = add(Piece("op", node, band.compute[node], tuple(args.values()), args=args))
            if node not in band.need:
                continue
            held[node] = _joined(node, band, kept.pop(node, None), fresh, rows_of, add)
            later = next((b.need[node] for b in plan[k + 1 :] if node in b.need), None)
            computed = held[node][1][1]
            if node in cached and later is not None and later[0] < computed:
                kept[node] = (rows_of(held[node], node, (later[0], computed)), (later[0], computed))
        outputs.append(held[region.end][0])
    add(Piece("cat", region.end, (0, shape(region.end)[H]), tuple(outputs)))  # type: ignore[index]
    return pieces


def _joined(node, band: BandRows, kept, fresh, rows_of, add) -> tuple[int, Rows]:
    """The piece holding the rows of `node` this band's readers need: the rows kept from earlier bands
    (sliced to what is still needed) joined with the ones computed now (`fresh`, a piece index)."""
    lo, hi = band.need[node]
    if kept is None:
        assert fresh is not None and band.compute[node] == (lo, hi), (
            f"{node.name}: rows {lo}:{hi} not computed"
        )
        return fresh, (lo, hi)
    kept_hi = kept[1][1]
    old = rows_of(kept, node, (lo, min(hi, kept_hi)))
    if fresh is None:
        return old, (lo, min(hi, kept_hi))
    assert band.compute[node][0] == kept_hi, (
        f"{node.name}: kept rows end at {kept_hi}, computed from {band.compute[node][0]}"
    )
    return add(Piece("join", node, (lo, hi), (old, fresh))), (lo, hi)
