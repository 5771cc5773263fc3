"""Packing placement units into shared objects, and laying the objects out side by side.

The shared-objects form (`Problem.shared_objects`) has no time axis left once
units are grouped: a unit sits at offset 0 of its object, the units of one
object never live at the same time, an object is as big as its largest unit,
and objects of a pool never share a byte. So the arena is the objects' sizes
side by side (plus alignment padding and pinned objects), and what matters is
which units share an object — the max-colouring of an interval graph, which
ExecuTorch's `pick_shared_obj` answers first-fit, largest first.

`Packer` assigns items one at a time by a rule ("first": the earliest object
that grows least, ExecuTorch's choice on a size-descending order; "tightest":
the object that grows least and leaves least room), across banks in
preference order when an item may choose (ExecuTorch's `BankedGreedy`: the
first bank where it fits), then `dissolve` empties small objects into others
and `promote` moves items to faster banks where there is room.
"""

from __future__ import annotations

import math
from bisect import bisect_right
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from memplan.arith import align_up
from memplan.errors import InfeasibleError


@dataclass(frozen=True)
class Item:
    """One placement unit as the packer sees it: its times, and its bytes and alignment per pool."""

    index: int  # the unit's index
    choices: tuple[int, ...]  # pools it may go to, preferred first (one unless it chooses a bank)
    size_in: dict[int, int]  # bytes in each pool it may go to
    align_in: dict[int, int]  # offset alignment in each pool
    spans: tuple[tuple[int, int], ...]  # [start, end) of each rectangle
    fixed: int | None
    traffic: int  # bytes accessed over the program (size x accesses of every buffer in it)


@dataclass
class SharedObject:
    """Items that never live at the same time, all at offset 0: `size` is the largest, `alignment` their lcm."""

    pool: int
    fixed: int | None = None
    size: int = 0
    alignment: int = 1
    items: list[Item] = field(default_factory=list)
    starts: list[int] = field(default_factory=list)  # busy times, sorted and disjoint
    ends: list[int] = field(default_factory=list)

    def free(self, spans: Iterable[tuple[int, int]]) -> bool:
        """True if no item of the object lives during any of `spans`."""
        for start, end in spans:
            i = bisect_right(self.starts, start)
            if (i and self.ends[i - 1] > start) or (i < len(self.starts) and self.starts[i] < end):
                return False
        return True

    def take(self, item: Item) -> None:
        for start, end in item.spans:
            i = bisect_right(self.starts, start)
            self.starts.insert(i, start)
            self.ends.insert(i, end)
        self.items.append(item)
        self.size = max(self.size, item.size_in[self.pool])
        self.alignment = math.lcm(self.alignment, item.align_in[self.pool])

    def drop(self, item: Item) -> None:
        for start, end in item.spans:
            i = bisect_right(self.starts, start) - 1
            while self.ends[i] != end or self.starts[i] != start:
                i -= 1
            del self.starts[i], self.ends[i]
        self.items.remove(item)
        self.size = max((i.size_in[self.pool] for i in self.items), default=0)
        self.alignment = math.lcm(1, *(i.align_in[self.pool] for i in self.items))

    def growth(self, item: Item) -> int | None:
        """Bytes the object grows by taking `item`, or None if it cannot (a pinned object never grows)."""
        size, alignment = item.size_in[self.pool], item.align_in[self.pool]
        if self.fixed is not None and (self.fixed % alignment or size > self.size):
            return None
        if not self.free(item.spans):
            return None
        return max(0, size - self.size)


class Packer:
    """Objects per pool, filled item by item; `capacity` bounds what each bank's objects add up to."""

    def __init__(self, capacity: dict[int, int], fixed_items: Sequence[Item]) -> None:
        self.capacity = capacity
        self.objects: dict[int, list[SharedObject]] = {}
        self.used: dict[int, int] = {}
        self.home: dict[int, SharedObject] = {}  # item index -> its object
        for item in fixed_items:
            self._pin(item)

    def _pin(self, item: Item) -> None:
        pool = item.choices[0]
        objects = self.objects.setdefault(pool, [])
        obj = next((o for o in objects if o.fixed == item.fixed), None)
        if obj is None:
            obj = SharedObject(pool, fixed=item.fixed)
            objects.append(obj)
        elif not obj.free(item.spans):
            raise InfeasibleError(
                f"shared objects: pinned unit {item.index} and another pinned at offset {item.fixed} in"
                f" pool {pool} live at the same time",
                proven=True,
            )
        self._add(obj, item)

    def _add(self, obj: SharedObject, item: Item) -> None:
        before = align_up(obj.size, obj.alignment)
        obj.take(item)
        after = align_up(obj.size, obj.alignment)
        self.used[obj.pool] = self.used.get(obj.pool, 0) + after - before
        self.home[item.index] = obj

    def _remove(self, item: Item) -> None:
        obj = self.home.pop(item.index)
        before = align_up(obj.size, obj.alignment)
        obj.drop(item)
        after = align_up(obj.size, obj.alignment)
        self.used[obj.pool] -= before - after
        if not obj.items and obj.fixed is None:
            self.objects[obj.pool].remove(obj)

    def _room(self, pool: int, extra: int) -> bool:
        cap = self.capacity.get(pool)
        return cap is None or self.used.get(pool, 0) + extra <= cap

    def _best(self, item: Item, pool: int, rule: str) -> SharedObject | None:
        """The existing object of `pool` that takes `item` by `rule`, or None (a new one is better)."""
        best, best_key = None, None
        for n, obj in enumerate(self.objects.get(pool, [])):
            grows = obj.growth(item)
            if grows is None or grows >= item.size_in[pool]:
                continue
            key = (grows, n) if rule == "first" else (grows, obj.size, n)
            if best_key is None or key < best_key:
                best, best_key = obj, key
        return best

    def place(self, item: Item, rule: str) -> bool:
        """Put `item` into the first pool of its choices with room; False if none has."""
        for pool in item.choices:
            if self._fits(item, pool, rule):
                return True
        return False

    def _fits(self, item: Item, pool: int, rule: str) -> bool:
        """Put `item` into `pool` (the object `rule` picks, or a new one) if the pool has room for it."""
        obj = self._best(item, pool, rule)
        grows = item.size_in[pool] if obj is None else obj.growth(item) or 0
        if not self._room(pool, align_up(grows, item.align_in[pool])):
            return False
        if item.index in self.home:
            self._remove(item)
        if obj is None:
            obj = SharedObject(pool)
            self.objects.setdefault(pool, []).append(obj)
        self._add(obj, item)
        return True

    def dissolve(self) -> None:
        """Empty objects, smallest first, into other objects of their pool that need not grow."""
        for objects in self.objects.values():
            for obj in sorted((o for o in objects if o.fixed is None), key=lambda o: o.size):
                moved: list[Item] = []
                for item in list(obj.items):
                    target = next(
                        (o for o in objects if o is not obj and o.items and o.growth(item) == 0), None
                    )
                    if target is None:
                        break
                    self._remove(item)
                    self._add(target, item)
                    moved.append(item)
                else:
                    continue
                for item in reversed(moved):  # undo: the object stays
                    self._remove(item)
                    self._add(obj, item)

    def promote(self, items: Sequence[Item], rule: str) -> None:
        """Move items (most accessed per byte first) to a faster bank with room for them."""
        for item in sorted(items, key=lambda i: -i.traffic / max(1, i.size_in[i.choices[0]])):
            if item.index not in self.home:
                continue
            here = self.home[item.index].pool
            for pool in item.choices[: item.choices.index(here)]:
                if self._fits(item, pool, rule):
                    break

    def lay_out(self) -> tuple[dict[int, int], dict[int, int]]:
        """(item index -> offset, item index -> pool): pinned objects where pinned, the others in the
        lowest aligned hole that holds them, most aligned and largest first."""
        offsets: dict[int, int] = {}
        pools: dict[int, int] = {}
        for pool, objects in self.objects.items():
            pinned = sorted((o for o in objects if o.fixed is not None), key=lambda o: o.fixed or 0)
            holes: list[tuple[int, int | None]] = []
            at = 0
            for obj in pinned:
                fixed = obj.fixed or 0
                if fixed > at:
                    holes.append((at, fixed))
                at = max(at, fixed + obj.size)
            holes.append((at, None))
            free = sorted((o for o in objects if o.fixed is None), key=lambda o: (-o.alignment, -o.size))
            base = {id(o): o.fixed or 0 for o in pinned}
            for obj in free:
                for h, (lo, hi) in enumerate(holes):
                    at = align_up(lo, obj.alignment)
                    if hi is None or at + obj.size <= hi:
                        base[id(obj)] = at
                        holes[h : h + 1] = [(lo, at), (at + obj.size, hi)]
                        break
            for obj in objects:
                for item in obj.items:
                    offsets[item.index] = base[id(obj)]
                    pools[item.index] = pool
        return offsets, pools
