"""Best-fit of one-rectangle units, placed a wave at a time with numpy.

In best-fit a unit's offset depends only on the units placed before it that
live at the same time (its predecessors in the ordering). Units whose
predecessors are all placed form a wave: no two of them live together, so
numpy can place a whole wave at once with the rule of `holes.best_gap`, and
the offsets are the ones placing them one by one would give. On layered
networks an ordering by size or area needs a few dozen waves per stretch;
an ordering by start makes a chain, so small waves fall back to placing one
unit at a time from precomputed predecessor lists.

A unit that lives over its pool's whole horizon precedes everything after
it; such units split the ordering into stretches and are kept, as in
`bestfit._Placer`, as merged intervals (the floor) that every later unit of
the pool avoids; gaps in the floor too narrow for any unit are filled. Only for problems `WavePlacer.build` takes (one rectangle per
unit, no fixed offsets, no empty units, sizes and overlaps that keep int64
arithmetic and memory small); `bestfit` uses its general placer otherwise.
"""

from __future__ import annotations

from collections.abc import Sequence
from operator import attrgetter

import numpy as np

from memplan.solvers.heuristics.holes import best_gap, best_gap_np, merged
from memplan.solvers.units import Unit

_INT64_ROOM = 1 << 62  # keys built from addresses, times and wave positions stay below this
_EDGES_PER_UNIT = 64  # more overlapping pairs than this per unit: the general placer's LiveIndex is better
ONE_BY_ONE_BELOW = 16  # a wave smaller than this finishes its stretch one unit at a time


def _gather(ptr: np.ndarray, items: np.ndarray, which: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The CSR rows `which` concatenated, and for each item the position in `which` of its row."""
    counts = ptr[which + 1] - ptr[which]
    row = np.repeat(np.arange(len(which)), counts)
    at = (
        np.arange(int(counts.sum()))
        - np.repeat(np.cumsum(counts) - counts, counts)
        + np.repeat(ptr[which], counts)
    )
    return items[at], row


def _csr(keys: np.ndarray, values: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Row pointers and values grouped by key (0..n-1)."""
    ptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(keys, minlength=n), out=ptr[1:])
    return ptr, values[np.argsort(keys, kind="stable")]


def _rows(ptr: np.ndarray, items: np.ndarray, keep: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The CSR (`ptr`, `items`) with only the items where `keep` is true, rows kept."""
    kept = np.zeros(len(keep) + 1, dtype=np.int64)
    np.cumsum(keep, out=kept[1:])
    return kept[ptr], items[keep]


class WavePlacer:
    """Best-fit placement of one-rectangle units, reusable across orderings.

    Built once per problem: the pairs of units that live together (an edge
    list, shared by every ordering) and which units span their pool.
    """

    @classmethod
    def build(cls, units: Sequence[Unit]) -> WavePlacer | None:
        """A placer for `units`, or None if they do not suit it (see the module docstring)."""
        if not units:
            return None

        def column(items: Sequence[object], field: str) -> list:
            return list(map(attrgetter(field), items))

        if column(units, "fixed").count(None) != len(units):
            return None
        try:
            only = [r for (r,) in column(units, "rects")]
        except ValueError:  # a unit of several rectangles
            return None
        sizes, alignments = column(units, "size"), column(units, "alignment")
        if min(sizes) <= 0:
            return None
        if (sum(sizes) + sum(alignments) + 1) * len(units) >= _INT64_ROOM:
            return None
        if max(column(units, "area")) >= _INT64_ROOM:
            return None
        pools = column(only, "pool")
        try:
            pool, start, end = (
                np.array(c, dtype=np.int64) for c in (pools, column(only, "start"), column(only, "end"))
            )
        except OverflowError:
            return None
        if (int(end.max()) - int(start.min()) + 1) * len(set(pools)) >= _INT64_ROOM:
            return None
        placer = cls(pool, start, end, np.array(sizes, dtype=np.int64), np.array(alignments, dtype=np.int64))
        return None if placer.too_many_edges else placer

    def __init__(
        self, pool: np.ndarray, start: np.ndarray, end: np.ndarray, size: np.ndarray, alignment: np.ndarray
    ) -> None:
        """Per unit index: pool id, lifetime, size and alignment of its one rectangle (use `build`)."""
        n = len(pool)
        self.n = n
        self.pools, dense = np.unique(pool, return_inverse=True)
        self.pool = dense.astype(np.int64)  # a dense pool index per unit
        first_time = start.min()
        start, end = start - first_time, end - first_time
        self.start = start
        self.size, self.alignment = size, alignment
        self.size_list, self.alignment_list, self.pool_list = (
            size.tolist(),
            alignment.tolist(),
            self.pool.tolist(),
        )
        self.lifetime = end - start
        self.area = self.size * self.lifetime
        self.room = int(self.size.sum() + self.alignment.sum()) + 1  # above every address best-fit makes
        # Time keys per pool: pool * span + time, so one sorted array serves every pool.
        span = int(end.max()) + 1
        start_key, end_key = self.pool * span + start, self.pool * span + end
        first = np.full(len(self.pools), np.iinfo(np.int64).max)
        last = np.zeros(len(self.pools), dtype=np.int64)
        np.minimum.at(first, self.pool, start)
        np.maximum.at(last, self.pool, end)
        self.spanning = (start == first[self.pool]) & (end == last[self.pool])
        self.smallest = np.full(len(self.pools), np.iinfo(np.int64).max)  # per pool, the smallest unit
        np.minimum.at(self.smallest, self.pool, size)
        # Conflict degrees as bestfit._Placer counts them: rectangles of the pool live with each one.
        sorted_starts, sorted_ends = np.sort(start_key), np.sort(end_key)
        self.conflicts = (
            np.searchsorted(sorted_starts, end_key, side="left")
            - np.searchsorted(sorted_ends, start_key, side="right")
            - 1
        )
        # Edges: pairs of non-spanning units of one pool whose lifetimes meet; i before j by (pool, start).
        others = np.flatnonzero(~self.spanning)
        others = others[np.lexsort((others, start_key[others]))]
        keys = start_key[others]
        partners = np.searchsorted(keys, end_key[others], side="left") - np.arange(len(others)) - 1
        self.too_many_edges = int(partners.sum()) > _EDGES_PER_UNIT * n
        if self.too_many_edges:
            return
        src = np.repeat(np.arange(len(others)), partners)
        dst = np.arange(len(src)) - np.repeat(np.cumsum(partners) - partners, partners) + src + 1
        # Both directions, grouped by unit: who lives with whom (spanning units excepted).
        a, b = others[src], others[dst]
        self.neighbour_ptr, self.neighbour = _csr(np.concatenate((a, b)), np.concatenate((b, a)), n)
        self.owner = np.repeat(np.arange(n), np.diff(self.neighbour_ptr))  # the unit of each neighbour entry

    def stats(self) -> dict[str, np.ndarray]:
        """What `orderings.order_of` sorts by (`UnitStats` fields), per unit index."""
        return {
            "size": self.size,
            "lifetime": self.lifetime,
            "area": self.area,
            "start": self.start,
            "conflicts": self.conflicts,
            "unit_index": np.arange(self.n),
        }

    def run(
        self, order: np.ndarray, give_up_at: int | None = None
    ) -> tuple[list[int], dict[int, int]] | None:
        """Unit offsets placing units in `order` (every unit index once); None once the total arena
        reaches `give_up_at`."""
        return _Run(self, order, give_up_at).place()


class _GaveUp(Exception):
    """The total arena reached the caller's `give_up_at`."""


class _Run:
    """One ordering's placement: the DAG of predecessors, waves, stretches and the floor."""

    def __init__(self, placer: WavePlacer, order: np.ndarray, give_up_at: int | None) -> None:
        self.p = placer
        n = placer.n
        self.give_up_at = give_up_at
        rank = np.empty(n, dtype=np.int64)
        rank[order] = np.arange(n)
        neighbour, owner = placer.neighbour, placer.owner
        earlier = rank[neighbour] < rank[owner]
        self.pred_ptr, self.pred = _rows(placer.neighbour_ptr, neighbour, earlier)
        # Stretches: the spanning units in placement order cut the ordering; stretch k lies before the k-th.
        self.spanning = order[placer.spanning[order]]
        stretch = np.searchsorted(np.sort(rank[self.spanning]), rank, side="right")
        inside = stretch[neighbour] == stretch[owner]
        self.succ_ptr, self.succ = _rows(placer.neighbour_ptr, neighbour, inside & ~earlier)
        self.waiting = np.diff(
            _rows(placer.neighbour_ptr, neighbour, inside & earlier)[0]
        )  # unplaced predecessors
        members = order[~placer.spanning[order]]  # sorted by rank, hence grouped by stretch
        bounds = np.searchsorted(stretch[members], np.arange(len(self.spanning) + 2), side="left")
        self.stretches = [members[bounds[k] : bounds[k + 1]] for k in range(len(self.spanning) + 1)]
        self.offset = np.zeros(n, dtype=np.int64)
        self.offset_list = [0] * n  # the same offsets, for the one-at-a-time loop
        self.placed = np.zeros(n, dtype=bool)
        self.floor: list[list[tuple[int, int]]] = [[] for _ in placer.pools]
        self.arena = [0] * len(placer.pools)
        self.total = 0
        # Per pool the union of placed ranges, and the units placed since it was last brought up to date.
        empty = np.zeros(0, dtype=np.int64)
        self.union = [(empty, empty) for _ in placer.pools]
        self.fresh: list[np.ndarray] = [empty]
        self.pred_list: list[int] | None = None  # `pred` as Python lists, made when first needed
        self.pred_ptr_list: list[int] = []

    def place(self) -> tuple[list[int], dict[int, int]] | None:
        try:
            for k, members in enumerate(self.stretches):
                self._stretch(members)
                if k < len(self.spanning):
                    self._spanning(int(self.spanning[k]))
        except _GaveUp:
            return None
        return self.offset_list, dict(zip(self.p.pools.tolist(), self.arena))

    def _grow(self, pool: int, top: int) -> None:
        if top > self.arena[pool]:
            self.total += top - self.arena[pool]
            self.arena[pool] = top
            if self.give_up_at is not None and self.total >= self.give_up_at:
                raise _GaveUp

    def _stretch(self, members: np.ndarray) -> None:
        if not len(members):
            return
        wave = members[self.waiting[members] == 0]
        while len(wave) >= ONE_BY_ONE_BELOW:
            self._wave(wave)
            later, _ = _gather(self.succ_ptr, self.succ, wave)
            if not len(later):
                break
            later, counts = np.unique(later, return_counts=True)
            self.waiting[later] -= counts
            wave = later[self.waiting[later] == 0]
        rest = members[~self.placed[members]]
        if len(rest):
            self._one_by_one(rest)

    def _wave(self, wave: np.ndarray) -> None:
        """Place units no two of which live together, every predecessor placed: `best_gap` per unit."""
        p = self.p
        before, row = _gather(self.pred_ptr, self.pred, wave)
        rows, lows = [row], [self.offset[before]]
        highs = [lows[0] + p.size[before]]
        wave_pool = p.pool[wave]
        for pool, floor in enumerate(self.floor):
            if floor:
                mine = np.flatnonzero(wave_pool == pool)
                f = np.asarray(floor, dtype=np.int64)
                rows.append(np.repeat(mine, len(f)))
                lows.append(np.tile(f[:, 0], len(mine)))
                highs.append(np.tile(f[:, 1], len(mine)))
        row, low, high = np.concatenate(rows), np.concatenate(lows), np.concatenate(highs)
        offsets = np.zeros(len(wave), dtype=np.int64)  # a unit meeting nothing goes at 0
        if len(row):
            room = p.room
            by = np.argsort(
                row * room + low, kind="stable"
            )  # per unit by low (the order of equal lows is moot)
            row, low, high = row[by], low[by], high[by]
            size, alignment = p.size[wave][row], p.alignment[wave][row]
            # free: the first byte above the ranges before this one in the unit's list (0 at its start).
            reach = np.maximum.accumulate(high + row * room)
            free = np.zeros(len(row), dtype=np.int64)
            free[1:] = np.maximum(reach[:-1] - row[1:] * room, 0)
            x = -(-free // alignment) * alignment
            fits = x + size <= low
            slack = np.where(fits, low - size - free, np.iinfo(np.int64).max)
            heads = np.flatnonzero(np.concatenate(([True], row[1:] != row[:-1])))
            units_met = row[heads]
            top = np.maximum.reduceat(high, heads)
            a = alignment[heads]
            offsets[units_met] = -(-top // a) * a  # on top, unless a hole fits
            tightest = np.minimum.reduceat(slack, heads)
            hit = np.flatnonzero(fits & (slack == np.repeat(tightest, np.diff(np.append(heads, len(row))))))
            if len(hit):
                lowest = hit[np.concatenate(([True], row[hit[1:]] != row[hit[:-1]]))]
                offsets[row[lowest]] = x[lowest]
        self.offset[wave] = offsets
        self.placed[wave] = True
        self.fresh.append(wave)
        offset_list = self.offset_list
        for unit, at in zip(wave.tolist(), offsets.tolist()):
            offset_list[unit] = at
        tops = offsets + p.size[wave]
        if len(self.arena) == 1:
            self._grow(0, int(tops.max()))
        else:
            for pool in np.unique(wave_pool).tolist():
                self._grow(pool, int(tops[wave_pool == pool].max()))

    def _one_by_one(self, rest: np.ndarray) -> None:
        """Place `rest` (sorted by rank) in turn: a wave too small for numpy to pay."""
        p = self.p
        if self.pred_list is None:
            self.pred_list, self.pred_ptr_list = self.pred.tolist(), self.pred_ptr.tolist()
        pred, ptr = self.pred_list, self.pred_ptr_list
        offset, floor = self.offset_list, self.floor
        sizes, alignments, pools = p.size_list, p.alignment_list, p.pool_list
        units = rest.tolist()
        for unit in units:
            size, pool = sizes[unit], pools[unit]
            pairs = [(offset[i], offset[i] + sizes[i]) for i in pred[ptr[unit] : ptr[unit + 1]]]
            if floor[pool]:
                pairs += floor[pool]
            at = best_gap(pairs, size, alignments[unit]) if pairs else 0
            offset[unit] = at
            if at + size > self.arena[pool]:
                self._grow(pool, at + size)
        self.offset[rest] = [offset[u] for u in units]
        self.placed[rest] = True
        self.fresh.append(rest)

    def _spanning(self, unit: int) -> None:
        """A unit over its pool's whole horizon: it meets everything placed in the pool; then it is floor.

        Everything placed counts, whenever it lives, so only the union of the
        placed address ranges matters: `best_gap` gives the same offset on the
        merged ranges as on the ranges themselves (sizes are > 0).
        """
        p = self.p
        pool = int(p.pool[unit])
        fresh = np.concatenate(self.fresh)
        mine = fresh[p.pool[fresh] == pool]
        self.fresh = [fresh[p.pool[fresh] != pool]]
        lows, highs = self.union[pool]
        lows, highs = _union(
            np.concatenate((lows, self.offset[mine])),
            np.concatenate((highs, self.offset[mine] + p.size[mine])),
        )
        size = int(p.size[unit])
        at = best_gap_np(lows, highs, size, int(p.alignment[unit])) if len(lows) else 0
        self.union[pool] = _union(np.append(lows, at), np.append(highs, at + size))
        self.offset[unit] = self.offset_list[unit] = at
        self.placed[unit] = True
        self.floor[pool] = _bridged(merged(self.floor[pool], at, at + size), int(p.smallest[pool]))
        self._grow(pool, at + size)


def _bridged(intervals: list[tuple[int, int]], smallest: int) -> list[tuple[int, int]]:
    """Sorted disjoint intervals with every gap narrower than `smallest` filled.

    No unit fits such a gap, and nothing placed lies in it, so `best_gap`
    gives the same offset with the gap filled; the floor then stays a few
    intervals instead of one per spanning unit (alignment leaves slivers).
    """
    out = intervals[:1]
    for low, high in intervals[1:]:
        if low - out[-1][1] < smallest:
            out[-1] = (out[-1][0], high)
        else:
            out.append((low, high))
    return out


def _union(lows: np.ndarray, highs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The ranges [low, high) merged into sorted disjoint ones (touching ones joined)."""
    if not len(lows):
        return lows, highs
    by = np.argsort(lows, kind="stable")
    lows, highs = lows[by], highs[by]
    reach = np.maximum.accumulate(highs)
    starts = np.concatenate(([True], lows[1:] > reach[:-1]))
    ends = np.append(np.flatnonzero(starts)[1:] - 1, len(lows) - 1)
    return lows[starts], reach[ends]
