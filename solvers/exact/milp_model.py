"""The MILP of `solvers.exact.milp` in PuLP: which unit pairs must be ordered, the model built within a
deadline, and the offsets a backend's solution settles to. Why the magnitude limits have their values:
their docstrings."""

from __future__ import annotations

import math
import tempfile
import time
from collections import defaultdict
from collections.abc import Sequence

import pulp

import memplan.timeline as timeline
from memplan.arith import align_up, ceil_div
from memplan.solvers.exact.arena_bounds import step_of
from memplan.solvers.exact.milp_backends import HiGHSSolver
from memplan.solvers.units import Unit, arena_of

# (i, j) with i < j -> (bytes of unit i that must clear unit j, bytes of j that must clear i)
PairSizes = dict[tuple[int, int], tuple[int, int]]


def overlapping_pairs(units: Sequence[Unit]) -> PairSizes:
    """Unit pairs with a rectangle each that live at the same time in one pool.

    A sweep over start/end events per pool: O(n log n + pairs). The sizes are
    the largest rectangle of each unit among the conflicting ones, which is
    what must clear the other unit when it is placed below it.
    """
    by_pool: dict[int, list[tuple[int, int, int, int]]] = defaultdict(list)
    for u in units:
        for r in u.rects:
            if r.size:  # a rectangle holding no bytes conflicts with nothing
                by_pool[r.pool].append((r.start, r.end, r.size, u.index))
    pairs: PairSizes = {}
    for rects in by_pool.values():
        live: set[int] = set()
        for _, is_start, k in timeline.events((start, end) for start, end, _, _ in rects):
            if not is_start:
                live.discard(k)
                continue
            _, _, size_k, unit_k = rects[k]
            for j in live:
                _, _, size_j, unit_j = rects[j]
                if unit_j == unit_k:
                    continue
                key, sizes = (
                    ((unit_j, unit_k), (size_j, size_k))
                    if unit_j < unit_k
                    else ((unit_k, unit_j), (size_k, size_j))
                )
                old = pairs.get(key, (0, 0))
                pairs[key] = (max(old[0], sizes[0]), max(old[1], sizes[1]))
            live.add(k)
    return pairs


TRUSTED_MAGNITUDE = 10**6
"""Largest scaled number (offset bound, big-M) at which a MILP proof is believed. CBC and HiGHS
accept a binary within 1e-6 of 0 or 1 as integral, which relaxes a big-M constraint by M * 1e-6
units: below this magnitude that is less than one unit, so a claimed optimum or infeasibility is
one of the integer model. Above it (byte coordinates near 2^40 that do not scale down) both were
measured claiming optima one byte above a reachable lower bound and infeasibility of problems
best-fit solves; the plan is still returned, marked not proven."""


ACCEPTED_MAGNITUDE = 10**15
"""Largest scaled number handed to a backend at all: HiGHS rejects matrix values above 1e15
(`large_matrix_value`) and drops those rows, after which PuLP cannot read its solution (measured with
sizes near 2^57); doubles also stop holding every integer soon after (2^53)."""


class OutOfTime(Exception):
    """Building the model used up its share of the time limit."""


class MilpModel:
    """The PuLP problem in units of `divisor` bytes.

    Constraints are written as coefficient lists rather than PuLP expression
    arithmetic, which is several times faster on models with many pairs; the
    build checks `deadline` so a huge model cannot overrun the time limit.
    """

    def __init__(
        self,
        units: Sequence[Unit],
        pairs: PairSizes,
        bounds: dict[int, int],
        divisor: int,
        limits: dict[int, int],
        deadline: float,
    ) -> None:
        self.units, self.divisor = units, divisor
        g = divisor
        self.magnitude = max([0] + [limit // g for limit in limits.values()])
        self.lp = pulp.LpProblem("memplan", pulp.LpMinimize)
        self.arena = {
            pool: self.lp.add_variable(
                f"A{n}", lowBound=ceil_div(bounds[pool], g), upBound=limits[pool] // g, cat=pulp.LpInteger
            )
            for n, pool in enumerate(sorted(bounds))
        }
        self.lp += pulp.lpSum(self.arena.values())

        # x_u = step_u * k_u for a free unit, the constant fixed_u for a fixed one
        self.steps: dict[int, pulp.LpVariable] = {}
        terms: list[list[tuple[pulp.LpVariable, int]]] = []
        const: list[int] = []
        self.upper: list[int] = []  # highest scaled offset of each unit
        for u in units:
            if u.fixed is not None:
                terms.append([])
                const.append(u.fixed // g)
                self.upper.append(u.fixed // g)
                continue
            step = step_of(u, g)
            top = min(limits[r.pool] // g - r.size // g for r in u.rects) // step
            k = self.lp.add_variable(f"k{u.index}", lowBound=0, upBound=top, cat=pulp.LpInteger)
            self.steps[u.index] = k
            terms.append([(k, step)])
            const.append(0)
            self.upper.append(top * step)
        for u in units:
            for r in u.rects:  # A_p - x_u >= size
                arena_minus_offset = [(self.arena[r.pool], 1)] + _negated(terms[u.index])
                self._add(arena_minus_offset, pulp.LpConstraintGE, r.size // g + const[u.index])

        self.order: dict[tuple[int, int], pulp.LpVariable] = {}
        for n, ((i, j), (size_i, size_j)) in enumerate(pairs.items()):
            if n % 1000 == 0 and time.perf_counter() > deadline:
                raise OutOfTime(f"{n} of {len(pairs)} order pairs built")
            if units[i].fixed is not None and units[j].fixed is not None:
                continue  # checked disjoint beforehand
            z = self.lp.add_variable(f"z{i}_{j}", cat=pulp.LpBinary)  # 1: i below j
            self.order[(i, j)] = z
            low_i = const[i] if units[i].fixed is not None else 0
            low_j = const[j] if units[j].fixed is not None else 0
            # x_i - x_j is a multiple of d, so a unit below the other takes its size rounded up to d
            d = math.gcd(step_of(units[i], g), step_of(units[j], g))
            si, sj = align_up(ceil_div(size_i, g), d), align_up(ceil_div(size_j, g), d)
            big_i, big_j = self.upper[i] + si - low_j, self.upper[j] + sj - low_i
            self.magnitude = max(self.magnitude, big_i, big_j)
            difference = terms[i] + _negated(terms[j])  # x_i - x_j without constants
            shift = const[i] - const[j]
            # x_i + s_i <= x_j + big_i (1 - z)
            self._add(difference + [(z, big_i)], pulp.LpConstraintLE, big_i - si - shift)
            # x_j + s_j <= x_i + big_j z
            self._add(_negated(difference) + [(z, -big_j)], pulp.LpConstraintLE, shift - sj)

    def _add(self, terms: list[tuple[pulp.LpVariable, int]], sense: int, rhs: int) -> None:
        self.lp.addConstraint(pulp.LpConstraint(pulp.LpAffineExpression(terms), sense, rhs=rhs))

    def set_start(self, unit_offsets: Sequence[int]) -> None:
        """Give every variable its value in a known valid plan."""
        g = self.divisor
        for index, k in self.steps.items():
            k.setInitialValue(unit_offsets[index] // g // step_of(self.units[index], g))
        for (i, j), z in self.order.items():
            z.setInitialValue(1 if unit_offsets[i] < unit_offsets[j] else 0)
        arenas = arena_of(self.units, unit_offsets)
        for pool, a in self.arena.items():
            a.setInitialValue(arenas.get(pool, 0) // g)

    def solve(self, solver: pulp.LpSolver, seconds: float) -> tuple[int, bool, int]:
        """(PuLP status, proven optimal, objective in bytes / divisor)."""
        warm = any(v.varValue is not None for v in self.lp.variables())
        solver.timeLimit = seconds
        if isinstance(solver, HiGHSSolver):
            solver.warm_start = warm
            status = self.lp.solve(solver)
        else:
            solver.optionsDict["warmStart"] = warm
            with tempfile.TemporaryDirectory(prefix="memplan-milp-") as scratch:
                solver.tmpDir = scratch  # CBC's model and solution files live and die here
                status = self.lp.solve(solver)
        proven = status == pulp.LpStatusOptimal and self.lp.sol_status == pulp.LpSolutionOptimal
        value = pulp.value(self.lp.objective)
        return status, proven, round(value) if value is not None else 0

    def doubt(self) -> str | None:
        """Why the solver's proofs cannot be believed for this model, or None."""
        if self.magnitude > TRUSTED_MAGNITUDE:
            return (
                f"the model's numbers reach {self.magnitude} units of {self.divisor} bytes, beyond the"
                f" {TRUSTED_MAGNITUDE} up to which the solver's tolerances cannot change the answer"
            )
        return None

    def integral_fault(self) -> str | None:
        """Whether the solver's values, rounded to integers, break the model (checked exactly), or None."""
        if any(v.varValue is None for v in self.lp.variables()):
            return "its solution is incomplete"
        value = {v.name: round(v.varValue) for v in self.lp.variables()}
        for v in self.lp.variables():
            if (v.lowBound is not None and value[v.name] < v.lowBound) or (
                v.upBound is not None and value[v.name] > v.upBound
            ):
                return f"its value {value[v.name]} of {v.name} is outside the variable's bounds"
        for c in self.lp.constraints():
            lhs = sum(int(coef) * value[v.name] for v, coef in c.items()) + round(c.constant)
            if (c.sense == pulp.LpConstraintLE and lhs > 0) or (c.sense == pulp.LpConstraintGE and lhs < 0):
                return f"its solution, rounded to integers, breaks constraint {c.name} (exact check)"
        objective = sum(int(coef) * value[v.name] for v, coef in self.lp.objective.items())
        if objective != round(pulp.value(self.lp.objective)):
            return f"its objective {pulp.value(self.lp.objective)} is not that of its rounded solution ({objective})"
        return None

    def has_solution(self) -> bool:
        return self.lp.sol_status in (pulp.LpSolutionOptimal, pulp.LpSolutionIntegerFeasible) and all(
            k.varValue is not None for k in self.steps.values()
        )

    def raw_offsets(self) -> list[float]:
        """Solver offsets in bytes, possibly off by solver tolerance."""
        return [
            u.fixed
            if u.fixed is not None
            else self.steps[u.index].varValue * step_of(u, self.divisor) * self.divisor
            for u in self.units
        ]


def _negated(terms: list[tuple[pulp.LpVariable, int]]) -> list[tuple[pulp.LpVariable, int]]:
    return [(var, -coef) for var, coef in terms]


def settle(units: Sequence[Unit], pairs: PairSizes, raw: Sequence[float], divisor: int) -> list[int]:
    """Valid offsets that keep the vertical order of `raw` and are never higher.

    Units are placed bottom-up in the order of their raw offsets, each at the
    lowest aligned position above the units already placed below it that it
    lives with, and clear of fixed units. When `raw` is valid, every unit ends
    at or below its raw offset; when it is slightly off (solver tolerance), the
    result is still valid.
    """
    below: dict[int, list[tuple[int, int, int]]] = defaultdict(
        list
    )  # unit -> (other, own size, other's size)
    for (i, j), (size_i, size_j) in pairs.items():
        below[i].append((j, size_i, size_j))
        below[j].append((i, size_j, size_i))
    placed: dict[int, int] = {u.index: u.fixed for u in units if u.fixed is not None}
    free = sorted(
        (u for u in units if u.fixed is None), key=lambda u: (round(raw[u.index] / divisor), u.index)
    )
    for u in free:
        floor = 0
        fixed_blocks = []  # (bottom, top, bytes of u that must clear it)
        for other, own_size, other_size in below[u.index]:
            if other not in placed:
                continue
            if units[other].fixed is None:
                floor = max(floor, placed[other] + other_size)
            else:
                fixed_blocks.append((placed[other], placed[other] + other_size, own_size))
        x = align_up(floor, u.alignment)
        moved = True
        while moved:
            moved = False
            for lo, hi, own_size in fixed_blocks:
                if x < hi and lo < x + own_size:
                    x = align_up(hi, u.alignment)
                    moved = True
        placed[u.index] = x
    return [placed[u.index] for u in units]
