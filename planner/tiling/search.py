"""Which region to tile and into how many bands: a search over every legal region and band count.

Every (start, end) pair whose region is legal (`region.GraphIndex.region`) and every band count from 2
to `max_patches` is scored by the live-bytes peak of the tiled graph and its MACs (`cost`), both from
the same pieces the rewrite emits. Without a budget the winner has the smallest peak among those
within the MAC limit; with a budget, the fewest bands that fit it. Pairs that cannot beat the untiled
peak are skipped before scoring: the start stays whole while its first band is cut from it, the
end's bands and the end are all live at the cat, and only ops inside the region shrink, so a region
holding none of the tensors live at the untiled peak cannot lower it. Where rows cannot go (a mean
over H and W) a region may run in groups of channels instead (`channels`), scored the same way.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import torch
from torch.fx import Graph, Node

from memplan.planner.tiling.channels import C, channel_region, channel_rule, channel_schedule
from memplan.planner.tiling.cost import (
    GraphSteps,
    Step,
    arena_tensors,
    buffer_lifetimes,
    graph_macs,
    live_bytes,
    node_bytes,
    tiled_macs,
)
from memplan.planner.tiling.options import TilingOptions
from memplan.planner.tiling.region import GraphIndex, Region
from memplan.planner.tiling.rewrite import BAND
from memplan.planner.tiling.schedule import Piece, schedule
from memplan.planner.tiling.semantics import Refusal, shape


@dataclass(frozen=True)
class Candidate:
    """One scored tiling."""

    region: Region
    patches: int
    peak: int
    macs: int
    cache_rows: bool = True
    inner_peak: int = 0  # the most bytes live while the region's pieces run
    at_peak: int = 0  # steps at which `peak` bytes are live

    @property
    def gain(self) -> tuple[int, int]:
        """What a tiling lowers, compared in order: the peak, then how many steps reach it (where
        two stages hold the same peak, a region can lower only one; the next region the other)."""
        return (self.peak, self.at_peak)

    def pieces(self) -> list[Piece]:
        """The pieces of this tiling (rebuilt: the search keeps only the scores)."""
        pieces = _pieces(self.region, self.patches, self.cache_rows)
        assert pieces is not None
        return pieces


def _pieces(region: Region, count: int, cache_rows: bool) -> list[Piece] | None:
    """The region's pieces in `count` row bands or groups of channels (its `axis`)."""
    if region.axis == C:
        return channel_schedule(region, count)
    return schedule(region, count, cache_rows)


@dataclass
class Search:
    """The outcome: the chosen candidate (None: refused, `refusal` says why) and what was seen."""

    base_peak: int
    base_macs: int
    chosen: Candidate | None
    refusal: Refusal | None
    base_at_peak: int = 1  # steps of the untiled graph at `base_peak`
    # The most bytes live while the pieces of regions tiled already run: no later region lowers it
    # (it neither starts in nor crosses them), so no tiling of the graph goes below it.
    pinned: int = 0
    scored: int = 0
    regions_refused: Counter = field(default_factory=Counter)  # Refusal -> pairs refused for it
    legal_regions: int = 0  # legal (start, end) pairs, scored or not
    best_over_limit: Candidate | None = None  # the smallest peak among candidates over the MAC limit


def extra(macs: int, base: int) -> float:
    """Extra MACs as a fraction of the untiled graph's (0 for a graph without any)."""
    return (macs - base) / base if base else 0.0


def _live_at_peak(steps: list[Step], peak: int) -> set:
    """Keys of the tensors live at the first step where the untiled graph reaches `peak` (lifetimes as
    `peak_bytes` counts them: a tensor written over another's bytes adds none of its own)."""
    end, written_over = buffer_lifetimes(steps)
    live: dict = {}
    total = 0
    for t, step in enumerate(steps):
        if step.key is not None and step.bytes:
            live[step.key] = 0 if step.key in written_over else step.bytes
            total += live[step.key]
        if total + step.transient >= peak:
            return set(live)
        for key in [k for k in live if end.get(k, -1) <= t]:
            total -= live.pop(key)
    return set(live)


def search(graph: Graph, options: TilingOptions, untiled_macs: int | None = None) -> Search:
    """Score legal regions and band counts, best-first by a lower bound on their peak; pick by `options`.
    `untiled_macs`: the MACs the MAC limit is a fraction of, when `graph` has regions tiled already
    (the graph's own by default)."""
    counted = GraphSteps(graph, arena_tensors(graph, options))
    live = live_bytes(counted.steps)
    base_peak = max(live, default=0)
    base_macs = graph_macs(graph) if untiled_macs is None else untiled_macs
    result = Search(base_peak, base_macs, None, None, _steps_at(live, base_peak), _pinned(counted, live))
    if options.budget_bytes is not None and base_peak <= options.budget_bytes:
        return result  # nothing to do: chosen None, refusal None
    regions = _regions(counted, base_peak, result)
    bounded = sorted(((_floor(counted, r), i) for i, r in enumerate(regions)))
    if options.budget_bytes is None and options.cache_rows:
        return _pick(result, _most_bands_first(graph, regions, bounded, options, result, counted), options)
    limit = options.budget_bytes if options.budget_bytes is not None else base_peak - 1
    candidates: list[Candidate] = []
    best: Candidate | None = None
    for bound, i in bounded:
        floor = bound.peak
        if floor > limit or (best is not None and options.budget_bytes is None and floor >= best.peak):
            break
        for candidate in _scored(graph, regions[i], floor, options, result, best, counted):
            candidates.append(candidate)
            if candidate.peak <= limit and extra(candidate.macs, base_macs) <= options.max_extra_macs:
                best = min(best or candidate, candidate, key=lambda c: _rank(c, options))
    return _pick(result, candidates, options)


def _most_bands_first(
    graph: Graph,
    regions: list[Region],
    bounded: list[tuple[Floor, int]],
    options: TilingOptions,
    result: Search,
    counted: GraphSteps,
) -> list[Candidate]:
    """With rows kept from band to band more bands add no MACs and only thin what is live, so each
    region is scored once, at the most bands its ladder allows (or the most that schedule), best-first
    by its floor; then the whole ladder of the region with the smallest peak, for the fewest bands
    reaching it (fewer copies, fewer kernel calls). Ten times fewer scorings than every region's
    whole ladder on MobileNetV2-1.0@224 (fp32)."""
    candidates: list[Candidate] = []
    best: Candidate | None = None
    base = (result.base_peak, result.base_at_peak)
    for floor, i in bounded:
        if floor.gain >= base or (best is not None and _beyond(floor.peak, best, result, options)):
            break
        if best is not None and best.peak <= result.pinned:
            break  # the peak sits in a region tiled already: no tie-break lowers what follows
        if best is not None and floor.peak == best.peak and floor.inner >= best.inner_peak:
            continue  # at best a tie it loses on what its own pieces hold
        for count in reversed(_ladder(regions[i], options)):
            candidate = _score(graph, regions[i], count, options, result, counted)
            if candidate is not None:
                candidates.append(candidate)
                if extra(candidate.macs, result.base_macs) <= options.max_extra_macs:
                    best = min(best or candidate, candidate, key=lambda c: _rank(c, options))
                break
    if best is not None:
        fewer = (c for c in _ladder(best.region, options) if c < best.patches)
        candidates += [
            c for c in (_score(graph, best.region, n, options, result, counted) for n in fewer) if c
        ]
    return candidates


def _beyond(floor: int, best: Candidate, result: Search, options: TilingOptions) -> bool:
    """True when no region of this `floor` peak (or above) can beat `best`. A region whose floor is
    the best's peak can still tie it, and tie-breaks with more regions to come (`_rank`: what its own
    pieces hold); so can any region below the base while the best only lowers how many steps reach
    the peak."""
    if best.peak == result.base_peak:
        return False
    return floor > best.peak if options.max_regions > 1 else floor >= best.peak


def _ladder(region: Region, options: TilingOptions) -> list[int]:
    """The band counts a region is scored at: the ladder up to `max_patches` and the size along the
    region's axis of the tensor the bands share out (the start when rows are kept or channels are
    grouped, else the end)."""
    streamed = region.start if options.cache_rows or region.axis == C else region.end
    return band_counts(min(options.max_patches, shape(streamed)[region.axis]))  # type: ignore[index]


def _rank(c: Candidate, options: TilingOptions) -> tuple[int, ...]:
    """Smaller is better: the smallest peak, or under a budget the fewest bands. When more regions may
    follow, of equal peaks the one whose own pieces hold least: the peak then sits outside it, where
    the next region goes, and this one does not become the floor (MobileNetV2-1.0@224 int8: its first
    region at 24 bands reaches the 14x14 stage's peak, but holds 227,360 B itself; more bands hold less)."""
    if options.budget_bytes is None:
        inner = (c.inner_peak,) if options.max_regions > 1 else ()
        return (c.peak, *inner, c.at_peak, c.macs, c.patches)
    return (c.patches, c.macs, c.peak)


def _regions(counted: GraphSteps, base_peak: int, result: Search) -> list[Region]:
    """Legal regions that could lower the peak (refused ones counted in `result` by reason). A start
    the arena holds whole at or above the peak cannot be cut below it (a caller's input can)."""
    index = GraphIndex(counted.graph)
    at_peak = _live_at_peak(counted.steps, base_peak)
    cut = cut_points(index.nodes)
    bands = sum(1 << i for i, n in enumerate(index.nodes) if n.meta.get(BAND))
    regions = []
    for start in index.nodes:
        s = shape(start)
        if start.op not in ("placeholder", "call_function") or s is None or len(s) != 4:
            continue
        if node_bytes(start) * counted.held(start) >= base_peak or start not in cut or start.meta.get(BAND):
            continue
        below = index.descendants(start)
        by_channels = any(channel_rule(u) is not None for u in start.users)
        for end in index.nodes[index.index[start] + 1 :]:
            if not below >> index.index[end] & 1 or end.op != "call_function" or end not in cut:
                continue
            if 2 * node_bytes(end) >= base_peak:
                continue
            if below & index.ancestors[index.index[end]] & bands:  # it would cross a tiled region
                continue
            region = _region(index, start, end, below, by_channels, result)
            if region is None:
                continue
            result.legal_regions += 1
            if at_peak & (set(region.nodes) - {end}):
                regions.append(region)
    return regions


def _region(
    index: GraphIndex, start: Node, end: Node, below: int, by_channels: bool, result: Search
) -> Region | None:
    """The row region from `start` to `end`, else (where a user of `start` is channel-local) the one in
    groups of channels; None, the row region's refusal counted, when neither is legal."""
    rows = index.region(start, end, below)
    if not isinstance(rows, Refusal):
        return rows
    channels = channel_region(index, start, end, below) if by_channels else None
    if channels is None:
        result.regions_refused[rows] += 1
    return channels


def cut_points(nodes: list[Node]) -> set[Node]:
    """Tensors a region may start or end at. In a quantized graph (integer activations) only the
    integer ones, graph inputs and what the graph returns: a slice or cat on a float between a
    dequantize and a quantize would split the dq -> op -> q pattern an int8 kernel is matched on."""
    values = {n: n.meta.get("val") for n in nodes}
    floats = {n for n, v in values.items() if isinstance(v, torch.Tensor) and v.dtype.is_floating_point}
    activations = [n for n in nodes if n.op == "call_function" and len(shape(n) or ()) == 4]
    if all(n in floats for n in activations):
        return set(nodes)
    returned = {a for n in nodes if n.op == "output" for a in n.all_input_nodes}
    return {n for n in nodes if n not in floats or n.op == "placeholder" or n in returned}


@dataclass(frozen=True, order=True)
class Floor:
    """Lower bounds for any tiling of one region, in the order candidates are compared: its peak, the
    steps at that peak, and what its own pieces hold (`Candidate.inner_peak`)."""

    peak: int
    at_peak: int
    inner: int

    @property
    def gain(self) -> tuple[int, int]:
        return (self.peak, self.at_peak)


def _floor(counted: GraphSteps, region: Region) -> Floor:
    """The graph with the region's ops gone, the end made from nothing, and at the cat the end's bands
    (as many bytes as the end) next to it: every step outside the region holds at least as much
    tiled, and the cat at least what is live beside it then."""
    whole = (0, shape(region.end)[region.axis])  # type: ignore[index]
    end = Piece("cat", region.end, whole, (), axis=region.axis)
    steps, span = counted.tiled(region, [end])
    live = live_bytes(steps)
    at_cat = 2 * end.bytes * counted.held(region.end)
    inner = max(at_cat, max((live[t] for t in span), default=0))
    floor = max(live, default=0)
    if at_cat > floor:
        return Floor(at_cat, 1, inner)
    return Floor(floor, _steps_at(live, floor) + (at_cat == floor), inner)


def band_counts(limit: int) -> list[int]:
    """The band counts scored up to `limit`: 2, 3, 4, 6, 8, 12, 16, 24, ... and `limit` itself. The
    peak falls slowly with more bands, so a ladder finds the smallest nearly as well as every count,
    at a few times fewer scorings (under a budget the counts below a fitting one are scored too)."""
    counts, step = {limit}, 2
    while step < limit:
        counts.update(c for c in (step, step * 3 // 2) if c < limit)
        step *= 2
    return sorted(c for c in counts if c >= 2)


def _scored(
    graph: Graph,
    region: Region,
    floor: int,
    options: TilingOptions,
    result: Search,
    best: Candidate | None,
    counted: GraphSteps,
) -> list[Candidate]:
    """The region's candidates up its band-count ladder; stopped once one reaches the region's `floor`
    (no count goes below it; the fewest bands reaching it has the fewest copies), or under a budget at
    the fewest bands that fit."""
    out: list[Candidate] = []
    tried = 1
    for count in _ladder(region, options):
        if options.budget_bytes is not None and best is not None and count > best.patches:
            break  # under a budget more bands than the best fitting tiling never win
        candidate = _score(graph, region, count, options, result, counted)
        if candidate is None:
            continue
        if options.budget_bytes is None or not _fits(candidate, options, result):
            out.append(candidate)
            tried = count
            if options.budget_bytes is None and candidate.peak <= floor:
                break
            continue
        fewer = (_score(graph, region, c, options, result, counted) for c in range(tried + 1, count))
        fitting = [c for c in fewer if c is not None and _fits(c, options, result)]
        out.append(fitting[0] if fitting else candidate)  # the fewest bands of this region that fit
        break
    return out


def _score(
    graph: Graph, region: Region, count: int, options: TilingOptions, result: Search, counted: GraphSteps
) -> Candidate | None:
    pieces = _pieces(region, count, options.cache_rows)
    if pieces is None:
        return None
    result.scored += 1
    steps, span = counted.tiled(region, pieces)
    live = live_bytes(steps)
    inner = max((live[t] for t in span), default=0)
    peak = max(live, default=0)
    macs = tiled_macs(graph, region, pieces)
    return Candidate(region, count, peak, macs, options.cache_rows, inner, _steps_at(live, peak))


def _pinned(counted: GraphSteps, live: list[int]) -> int:
    """The most bytes live at the steps of pieces of regions tiled already (`Search.pinned`)."""
    banded = (bool(node.meta.get(BAND)) for node, step in counted.order if step is not None)
    return max((bytes_ for bytes_, band in zip(live, banded, strict=True) if band), default=0)


def _steps_at(live: list[int], peak: int) -> int:
    return sum(1 for bytes_ in live if bytes_ == peak)


def _fits(candidate: Candidate, options: TilingOptions, result: Search) -> bool:
    """Within the budget and the MAC limit."""
    assert options.budget_bytes is not None
    within = extra(candidate.macs, result.base_macs) <= options.max_extra_macs
    return candidate.peak <= options.budget_bytes and within


def _pick(result: Search, candidates: list[Candidate], options: TilingOptions) -> Search:
    gaining = [c for c in candidates if c.gain < (result.base_peak, result.base_at_peak)]
    within = [c for c in gaining if extra(c.macs, result.base_macs) <= options.max_extra_macs]
    over = [c for c in gaining if c not in within]
    result.best_over_limit = min(over, key=lambda c: c.peak, default=None)
    if options.budget_bytes is not None:
        fitting = [c for c in within if c.peak <= options.budget_bytes]
        result.chosen = min(fitting, key=lambda c: (c.patches, c.macs, c.peak), default=None)
        if result.chosen is None:
            result.refusal = Refusal.BUDGET_UNREACHABLE
        return result
    result.chosen = min(within, key=lambda c: _rank(c, options), default=None)
    if result.chosen is None:
        if over:
            result.refusal = Refusal.MAC_LIMIT
        elif candidates or result.legal_regions:  # scored, or none holding what is live at the peak
            result.refusal = Refusal.NO_GAIN
        elif result.regions_refused:
            result.refusal = result.regions_refused.most_common(1)[0][0]
        else:
            result.refusal = Refusal.NO_REGION
    return result
