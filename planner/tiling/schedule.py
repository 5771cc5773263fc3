"""The tiled region as a list of pieces: what `rewrite` emits and `cost` measures, built once.

For each band of the end's rows, in order: the start's rows the band needs (a slice of the start,
unless the band needs all of it), then every region op on the rows it must compute, each fed a slice
of its input when it needs fewer rows than were computed, and an explicit pad where its window reaches
past the tensor's true border (so inside the image a band reads real neighbours, never zeros); a
dequantize the region lets reach past the border pads its integer input instead. Last,
one cat along H assembles the end from the bands.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from torch.fx import Node

from memplan.planner.tiling.region import Region, Rows, band_rows, bands, reads
from memplan.planner.tiling.semantics import H, itemsize, shape

START = -1  # `Piece.inputs` value: the start tensor itself, whole


@dataclass(frozen=True)
class Piece:
    """One tensor the tiled region creates.

    kind "slice": rows `cut` (relative) of input piece; "pad": `pad` = (top, bottom, value) rows of
    padding around its input; "op": `origin` computed on `rows`, its spatial args by position in
    `args`; "cat": the bands of the end, concatenated along H.
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


def schedule(region: Region, count: int) -> list[Piece] | None:
    """The pieces computing `region` in `count` row bands; None when a band would need no rows of some op."""
    pieces: list[Piece] = []

    def add(piece: Piece) -> int:
        pieces.append(piece)
        return len(pieces) - 1

    start_rows = (0, shape(region.start)[H])  # type: ignore[index]
    outputs = []
    for band in bands(shape(region.end)[H], count):  # type: ignore[index]
        need = band_rows(region, band)
        if any(hi <= lo for lo, hi in need.values()):
            return None
        held: dict[Node, tuple[int, Rows]] = {region.start: (START, start_rows)}
        if need[region.start] != start_rows:
            lo, hi = need[region.start]
            held[region.start] = (
                add(Piece("slice", region.start, (lo, hi), (START,), cut=(lo, hi))),
                (lo, hi),
            )
        for node in region.nodes:
            args = {}
            for pos, (lo, hi) in reads(region, node, need[node]).items():
                arg = node.args[pos]
                assert isinstance(arg, Node)
                clo, chi = lo, hi  # a border op holds its padding rows itself
                if arg not in region.borders:
                    clo, chi = max(lo, 0), min(hi, shape(arg)[H])  # type: ignore[index]
                source, rows = held[arg]
                if (clo, chi) != rows:
                    cut = (clo - rows[0], chi - rows[0])
                    source = add(Piece("slice", arg, (clo, chi), (source,), cut=cut))
                if (lo, hi) != (clo, chi):
                    pad = (clo - lo, hi - chi, region.borders.get(node, region.rules[node].pad_value))
                    source = add(Piece("pad", arg, (lo, hi), (source,), pad=pad))
                args[pos] = source
            index = add(Piece("op", node, need[node], tuple(args.values()), args=args))
            held[node] = (index, need[node])
        outputs.append(held[region.end][0])
    add(Piece("cat", region.end, (0, shape(region.end)[H]), tuple(outputs)))  # type: ignore[index]
    return pieces
