"""The CP-SAT model of a placement problem, in units of a common divisor of the sizes.

Model, per pool p, in bytes divided by g (`scale_of`: the common divisor of
sizes and fixed offsets, reduced until each alignment divides it or is a
multiple of it; a capacity C becomes floor(C / g)):

    minimise   sum_p A_p                        A_p >= the pool's (aligned) lower bound
    subject to NoOverlap2D over the pool's rectangles: x = the fixed lifetime
               (times replaced by their rank), y = [y_u, y_u + size)
               y_u = step_u * k_u  (step = alignment / g), or y_u fixed
               A_p >= y_u + size   for every rectangle of unit u in p

Placement units (solvers.units) carry groups and same-offset sets: a unit with
several rectangles has one offset variable shared by all of them.
"""

from __future__ import annotations

import copy
from collections import defaultdict
from collections.abc import Sequence

from ortools.sat.python import cp_model

from memplan.arith import ceil_div
from memplan.solvers.exact.arena_bounds import scale_of, step_of
from memplan.solvers.heuristics.orderings import in_order
from memplan.solvers.units import Unit, arena_of

SKYLINE_ORDERS = ("start", "lifetime", "start-area", "area", "size")
"""Tie-break orders the skyline search may use (keys in `orderings.SORT_KEYS`)."""


def with_skyline_order(
    model: PlacementModel, order_name: str, caps: dict[int, int] | None = None
) -> cp_model.CpModel:
    """A copy of the model (capped by `caps`, see `PlacementModel.capped`) that searches by skyline:
    lowest offset first, ties in the named order. One clone: on big models each costs seconds."""
    copy_ = model.capped(caps).model if caps is not None else model.model.clone()
    order = in_order((u for u in model.units if u.index in model.y_var), order_name)
    copy_.add_decision_strategy(
        [copy_.get_int_var_from_proto_index(model.y_var[u.index].index) for u in order],
        cp_model.CHOOSE_LOWEST_MIN,
        cp_model.SELECT_MIN_VALUE,
    )
    return copy_


def arena_limits(
    units: Sequence[Unit],
    bounds: dict[int, int],
    heuristic: Sequence[int],
    capacity: int | None,
    use_heuristic: bool,
) -> dict[int, int]:
    """Largest arena each pool may take, in bytes.

    The capacity if there is one; with the heuristic, also its total minus the
    other pools' lower bounds (an optimum is never worse). Otherwise stacking
    every free unit above every fixed one is always possible (counted over all
    pools, since a unit with rectangles in several pools shares one offset).
    """
    fixed_top = max((u.fixed + u.size for u in units if u.fixed is not None), default=0)
    stacked = fixed_top + sum(u.size + u.alignment - 1 for u in units if u.fixed is None)
    limits = {pool: stacked if capacity is None else capacity for pool in bounds}
    if use_heuristic:
        total, lb_total = sum(arena_of(units, heuristic).values()), sum(bounds.values())
        for pool, lb in bounds.items():
            limits[pool] = min(limits[pool], total - (lb_total - lb))
    return limits


class PlacementModel:
    """The CP-SAT model of one problem, in units of `divisor` bytes."""

    def __init__(
        self,
        units: Sequence[Unit],
        bounds: dict[int, int],
        limits: dict[int, int],
        *,
        cumulative: bool,
        symmetry: bool,
        minimise: bool,
    ) -> None:
        self.units = units
        self.limits = dict(limits)  # largest arena per pool, in bytes (probes lower it)
        self.divisor = g = scale_of(units)
        m = self.model = cp_model.CpModel()
        self.arena = {
            pool: m.new_int_var(ceil_div(bounds[pool], g), limits[pool] // g, f"A{pool}")
            for pool in sorted(bounds)
        }
        rank = {
            t: i for i, t in enumerate(sorted({t for u in units for r in u.rects for t in (r.start, r.end)}))
        }

        self.k: dict[int, cp_model.IntVar] = {}
        self.y_var: dict[int, cp_model.IntVar] = {}  # scaled offset of each free unit
        self.y: list[cp_model.LinearExprT] = []
        for u in units:
            if u.fixed is not None:
                self.y.append(u.fixed // g)
                continue
            step = step_of(u, g)
            top = min(limits[r.pool] // g - r.size // g for r in u.rects) // step
            self.k[u.index] = k = m.new_int_var(0, top, f"k{u.index}")  # top >= 0: limits >= bounds
            if step > 1:
                y = m.new_int_var(0, top * step, f"y{u.index}")
                m.add(y == step * k)
                k = y
            self.y_var[u.index] = k
            self.y.append(k)

        xs: dict[int, list] = defaultdict(list)
        ys: dict[int, list] = defaultdict(list)
        demands: dict[int, list[int]] = defaultdict(list)
        for u in units:
            for r in u.rects:
                if not r.size:  # holds no bytes: CP-SAT would still keep it off the inside of others
                    m.add(self.arena[r.pool] >= self.y[u.index])
                    continue
                size = r.size // g
                xs[r.pool].append(
                    m.new_fixed_size_interval_var(rank[r.start], rank[r.end] - rank[r.start], "")
                )
                ys[r.pool].append(m.new_fixed_size_interval_var(self.y[u.index], size, ""))
                demands[r.pool].append(size)
                m.add(self.arena[r.pool] >= self.y[u.index] + size)
        for pool in xs:
            if len(xs[pool]) > 1:
                m.add_no_overlap_2d(xs[pool], ys[pool])
                if cumulative:
                    m.add_cumulative(xs[pool], demands[pool], self.arena[pool])
        if symmetry:
            self._order_identical_units()
        if minimise:
            m.minimize(sum(self.arena.values()))

    def _order_identical_units(self) -> None:
        """Free units with the same rectangles and alignment are interchangeable: order them."""
        same: dict[tuple, list[Unit]] = defaultdict(list)
        for u in self.units:
            if u.fixed is None:
                same[(tuple((r.pool, r.start, r.end, r.size) for r in u.rects), u.alignment)].append(u)
        for group in same.values():
            gap = max(r.size for r in group[0].rects) // self.divisor
            for a, b in zip(group, group[1:]):
                self.model.add(self.y[a.index] + gap <= self.y[b.index])

    def capped(self, caps: dict[int, int]) -> PlacementModel:
        """A copy without objective whose pools' arenas are at most `caps` bytes: a decision probe."""
        probe = copy.copy(self)
        probe.model = self.model.clone()
        probe.model.clear_objective()
        probe.limits = {pool: min(cap, caps.get(pool, cap)) for pool, cap in self.limits.items()}
        for pool, cap in caps.items():
            probe.model.add(
                probe.model.get_int_var_from_proto_index(self.arena[pool].index) <= cap // self.divisor
            )
        return probe

    def bound(self, pool: int, low: int | None, high: int) -> None:
        """Narrow a pool's arena to [low, high] bytes (what probes proved and found)."""
        if low is not None:
            self.model.add(self.arena[pool] >= ceil_div(low, self.divisor))
        self.model.add(self.arena[pool] <= high // self.divisor)

    def hint(self, unit_offsets: Sequence[int]) -> None:
        g = self.divisor
        for index, k in self.k.items():
            self.model.add_hint(k, unit_offsets[index] // (g * step_of(self.units[index], g)))
        for pool, size in arena_of(self.units, unit_offsets).items():
            self.model.add_hint(self.arena[pool], ceil_div(size, g))

    def offsets(self, solver: cp_model.CpSolver) -> list[int]:
        """Unit offsets in bytes from the solver's best solution."""
        return [
            u.fixed
            if u.fixed is not None
            else solver.Value(self.k[u.index]) * step_of(u, self.divisor) * self.divisor
            for u in self.units
        ]
