"""Joint bank choice and offsets with OR-Tools CP-SAT: the least traffic cost that fits every bank.

Model, per unit u (solvers.units) and pool b it may go to, in bytes divided
by g (the common divisor of every size, alignment and fixed offset as placed):

    x_ub in {0, 1}, sum_b x_ub = 1               (pinned units: their one pool)
    y_ub = step_ub * k_ub, 0 <= y_ub <= C_b - s_ub   (or y_ub = the unit's fixed offset)
    per pool: NoOverlap2D of the optional rectangles (lifetime x [y_ub, y_ub + s_r)) present iff x_ub
              Cumulative of the same (bytes live at once <= C_b): redundant, it tightens the bound
    minimise  sum_ub w_b * traffic_u * x_ub     (traffic: bytes x accesses of the unit's buffers)

A unit placed in a bank is what `place_in_banks` makes of it: each root takes
the bank's alignment and is rounded up to it (its rectangles s_r), the unit's
offset a multiple of every member's alignment too; a unit fixed at an offset
the bank's alignment does not divide cannot go there. The weights w_b are the
costs scaled without loss (`solvers.banked.bank_costs`).

Capacity is a hard constraint, so a plan is returned only if it fits. A proof
(optimal: no plan with less traffic cost fits; infeasible: nothing fits) is
claimed only when it is exact: the weights are the costs scaled without
rounding, and the units hold exactly the problem's bytes (`planned_exactly`).
The `banked_bestfit` plan is the hint (and the answer when CP-SAT finds nothing
better in time).
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction

from ortools.sat.python import cp_model

from memplan.arith import align_up, common_divisor
from memplan.bank_placement import bank_part, place_in_banks
from memplan.errors import BankCapacityError, InfeasibleError, ProblemError, SolverFailure
from memplan.peak_bound import lower_bound
from memplan.plan import Outcome, Plan, arena_sizes_of
from memplan.problem import Bank, Buffer, Problem
from memplan.solvers.banked.bank_costs import exact_cost, weights
from memplan.solvers.defaults import CPSAT_BUDGET_S
from memplan.solvers.units import Rect, Unit, expand, planned_exactly, units_of


def solve_cpsat_banks(
    problem: Problem,
    *,
    time_limit_s: float | None = None,
    num_workers: int = 2,
    log: bool = False,
    reproducible: bool = False,
) -> Plan:
    """The least-traffic plan that fits every bank; `proven_optimal` when CP-SAT proves it exactly.

    `reproducible`: the heuristic runs untimed and CP-SAT spends the limit as deterministic time
    on one worker, so the same problem gives the same plan whatever the machine's load.
    """
    began = time.perf_counter()
    limit = CPSAT_BUDGET_S if time_limit_s is None else float(time_limit_s)
    hint, hint_error = _heuristic(problem, None if reproducible else limit / 4)
    model = _BankModel(problem, units_of(problem))
    if hint is not None:
        model.hint(hint)
    solver = cp_model.CpSolver()
    if reproducible:
        solver.parameters.max_deterministic_time = limit
        solver.parameters.num_workers = 1
    else:
        solver.parameters.max_time_in_seconds = max(0.1, limit - (time.perf_counter() - began))
        solver.parameters.num_workers = num_workers
    solver.parameters.log_search_progress = log
    status = solver.Solve(model.model)
    exact = planned_exactly(problem)
    if status in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        proven = status == cp_model.OPTIMAL and exact and model.exact_costs
        plan = model.plan(solver, time.perf_counter() - began, proven, _why_not(status, exact, model))
        if proven or hint is None or model.cost(plan.pools) <= model.cost(hint.pools):
            return plan
    if status == cp_model.INFEASIBLE and exact:
        if hint is not None:
            raise SolverFailure("cpsat: the bank model is infeasible, yet banked_bestfit found a plan; a bug")
        bank, missing = (hint_error.bank, hint_error.missing) if hint_error else (problem.banks[-1].name, 0)
        raise BankCapacityError(
            f"cpsat: proven that no placement fits the banks {[b.name for b in problem.banks]}"
            f"; the best heuristic attempt leaves bank {bank!r} {missing} bytes missing",
            bank,
            missing,
            proven=True,
        )
    if hint is None:
        assert hint_error is not None
        hint_error.add_note(
            f"cpsat: CP-SAT {solver.StatusName(status).lower()} in time; not proven infeasible"
        )
        raise hint_error
    return Plan(
        offsets=hint.offsets,
        arena_sizes=hint.arena_sizes,
        solver="cpsat",
        seconds=time.perf_counter() - began,
        lower_bound=hint.lower_bound,
        status=f"feasible (banked_bestfit plan; CP-SAT {solver.StatusName(status).lower()} in time)",
        pools=hint.pools,
        outcome=Outcome.TIME_LIMIT,
    )


def _why_not(status: int, exact: bool, model: _BankModel) -> str:
    """Why an answer is not a proof ("" when it is one)."""
    if status != cp_model.OPTIMAL:
        return "time limit"
    if not exact:
        return "gap windows above the offset were planned from the offset"
    if not model.exact_costs:
        return "bank costs too fine to scale to integers exactly; rounded"
    return ""


def _heuristic(problem: Problem, limit: float | None) -> tuple[Plan | None, BankCapacityError | None]:
    from memplan.solvers.banked.banked_bestfit import solve_banked_bestfit

    try:
        return solve_banked_bestfit(problem, time_limit_s=limit), None
    except BankCapacityError as e:
        return None, e
    except InfeasibleError as e:
        return None, BankCapacityError(f"banked_bestfit found no plan: {e}", problem.banks[-1].name, 0)


@dataclass(frozen=True)
class _Placed:
    """A unit as placed in one pool: its rectangles (roots rounded up to the bank), the alignment of
    its offset, and whether it may go there at all (its fixed offset fits the bank's alignment)."""

    rects: tuple[Rect, ...]
    alignment: int
    allowed: bool

    @property
    def height(self) -> int:
        return max(r.size for r in self.rects)


def placed_unit(problem: Problem, unit: Unit, pool: int, bank: Bank | None) -> _Placed:
    """What `place_in_banks` makes of `unit` in `pool`, rectangle by rectangle."""
    alignment = unit.alignment
    rects: list[Rect] = []
    for root_id in unit.roots:
        root = problem.buffer(root_id)
        own = root.alignment if bank is None else math.lcm(root.alignment, bank.alignment)
        alignment = math.lcm(alignment, own)
        rects += _rects(root, pool, root.size if bank is None else align_up(root.size, own))
    allowed = unit.fixed is None or unit.fixed % alignment == 0
    return _Placed(
        tuple(rects) or (Rect(pool, unit.rects[0].start, unit.rects[0].end, 0),), alignment, allowed
    )


def _rects(root: Buffer, pool: int, size: int) -> list[Rect]:
    """The root's rectangles when it holds `size` bytes outside its gaps (gap windows as they are)."""
    out, at = [], root.start
    for gap in root.gaps:
        if at < gap.start and size:
            out.append(Rect(pool, at, gap.start, size))
        if gap.window is not None and gap.window[0] < gap.window[1]:
            out.append(Rect(pool, gap.start, gap.end, gap.window[1]))
        at = gap.end
    if at < root.end and size:
        out.append(Rect(pool, at, root.end, size))
    return out


def _reach(problem: Problem, units: list[Unit], placed: dict[tuple[int, int], _Placed]) -> dict[int, int]:
    """Per pool: an address no optimal plan needs to go above.

    Every unit that may go to the pool, packed there by best-fit (pins at their offsets, the
    bank's alignment applied): whatever subset an optimal plan puts in the pool fits below that
    arena in the same layout, so offsets above it never help. Capping a roomy bank (a 16 MiB
    DRAM) there keeps the model small without losing an optimum. When best-fit cannot pack them
    all (fixed units that may share a pool collide), every free unit stacked above every fixed one.
    """
    from memplan.solvers.heuristics.bestfit import solve_bestfit

    top: dict[int, int] = {}
    for pool in {pool for _, pool in placed}:
        here = [u for u in units if (u.index, pool) in placed and placed[u.index, pool].allowed]
        pools = {r: pool for u in here for r in u.roots}
        keep = {b.id for b in problem.buffers if problem.root_of(b.id)[0] in pools}
        try:
            top[pool] = solve_bestfit(bank_part(place_in_banks(problem, pools), keep)).arena_size
        except ProblemError:
            fixed = [u for u in here if u.fixed is not None]
            at = max(
                (u.fixed + placed[u.index, pool].height for u in fixed if u.fixed is not None), default=0
            )
            for u in here:
                if u.fixed is None:
                    at = align_up(at, placed[u.index, pool].alignment) + placed[u.index, pool].height
            top[pool] = at
    return top


class _BankModel:
    """The CP-SAT model of one problem with banks; keeps the variables to read a plan back."""

    def __init__(self, problem: Problem, units: list[Unit]) -> None:
        self.problem = problem
        self.units = units
        self.model = cp_model.CpModel()
        banks = {b.pool: b for b in problem.banks}
        placed = {
            (u.index, pool): placed_unit(problem, u, pool, banks.get(pool))
            for u in units
            for pool in problem.buffer(u.roots[0]).choices
        }
        numbers = [r.size for p in placed.values() for r in p.rects] + [p.alignment for p in placed.values()]
        self.g = g = common_divisor(numbers + [u.fixed for u in units if u.fixed])
        moved: dict[str, int] = {}
        for b in problem.buffers:
            root_id = problem.root_of(b.id)[0]
            moved[root_id] = moved.get(root_id, 0) + b.size * b.accesses
        traffic = {u.index: sum(moved.get(r, 0) for r in u.roots) for u in units}
        self.weights = weights({b.pool: b.cost for b in problem.banks}, list(traffic.values()))
        self.exact_costs = self.weights.exact
        reach = _reach(problem, units, placed)
        self.choice: dict[tuple[int, int], cp_model.IntVar] = {}
        self.offset: dict[tuple[int, int], cp_model.IntVar] = {}
        boxes: dict[int, list[tuple]] = {}
        objective = []
        for u in units:
            choices = problem.buffer(u.roots[0]).choices
            lits = []
            for pool in choices:
                where = placed[u.index, pool]
                limits = [
                    c
                    for c in (problem.capacity, banks[pool].capacity if pool in banks else None)
                    if c is not None
                ]
                cap = min([reach[pool], *limits]) // g
                step = where.alignment // g
                top = cap - where.height // g
                lit = (
                    self.model.new_bool_var(f"x{u.index}_{pool}")
                    if len(choices) > 1
                    else self.model.new_constant(1)
                )
                if top < 0 or not where.allowed or (u.fixed is not None and u.fixed // g > top):
                    self.model.add(lit == 0)
                    top = 0
                if u.fixed is not None:
                    y = self.model.new_constant(u.fixed // g)
                else:
                    k = self.model.new_int_var(0, top // step, f"k{u.index}_{pool}")
                    y = k if step == 1 else self.model.new_int_var(0, top, f"y{u.index}_{pool}")
                    if step != 1:
                        self.model.add(y == step * k)
                self.choice[u.index, pool] = lit
                self.offset[u.index, pool] = y
                lits.append(lit)
                for r in where.rects:
                    if (
                        not r.size
                    ):  # holds no bytes: overlaps nothing (CP-SAT would keep it off others' inside)
                        continue
                    t = self.model.new_optional_fixed_size_interval_var(r.start, r.end - r.start, lit, "t")
                    s = self.model.new_optional_fixed_size_interval_var(y, r.size // g, lit, "s")
                    boxes.setdefault(pool, []).append((t, s, r.size // g))
                if self.weights.of(pool) and traffic[u.index]:
                    objective.append(self.weights.of(pool) * traffic[u.index] * lit)
            self.model.add_exactly_one(lits)
        for pool, items in boxes.items():
            self.model.add_no_overlap_2d([t for t, _, _ in items], [s for _, s, _ in items])
            if pool in banks:
                self.model.add_cumulative(
                    [t for t, _, _ in items], [d for _, _, d in items], banks[pool].capacity // g
                )
        self.model.minimize(sum(objective))

    def cost(self, pools: Mapping[str, int]) -> Fraction:
        """The exact traffic cost of these bank choices (costs as the decimals they print as)."""
        cost = {b.pool: exact_cost(b.cost) for b in self.problem.banks}
        total = Fraction(0)
        for b in self.problem.buffers:
            root = self.problem.root_of(b.id)[0]
            total += (
                cost.get(pools.get(root, self.problem.buffer(root).pool), Fraction(0)) * b.size * b.accesses
            )
        return total

    def hint(self, plan: Plan) -> None:
        for u in self.units:
            pool = plan.pools.get(u.roots[0], self.problem.buffer(u.roots[0]).pool)
            choices = self.problem.buffer(u.roots[0]).choices
            if len(choices) > 1:
                for p in choices:
                    self.model.add_hint(self.choice[u.index, p], int(p == pool))
            y = self.offset.get((u.index, pool))
            if y is not None and u.fixed is None and u.roots[0] in plan.offsets:
                self.model.add_hint(y, plan.offsets[u.roots[0]] // self.g)

    def plan(self, solver: cp_model.CpSolver, seconds: float, proven: bool, why_not: str) -> Plan:
        pools: dict[str, int] = {}
        unit_offsets = [0] * len(self.units)
        for u in self.units:
            pool = next(p for (i, p), lit in self.choice.items() if i == u.index and solver.Value(lit))
            unit_offsets[u.index] = solver.Value(self.offset[u.index, pool]) * self.g
            for root in u.roots:
                pools[root] = pool
        chosen = {b.id: pools[self.problem.root_of(b.id)[0]] for b in self.problem.buffers if b.banks}
        placed = place_in_banks(self.problem, chosen)
        offsets = expand(placed, self.units, unit_offsets)
        arena_sizes = {b.pool: 0 for b in self.problem.banks} | arena_sizes_of(placed, offsets)
        cost = float(self.cost(chosen))
        return Plan(
            offsets=offsets,
            arena_sizes=arena_sizes,
            solver="cpsat",
            seconds=seconds,
            lower_bound=lower_bound(placed),
            status=("optimal" if proven else f"feasible, not proven optimal ({why_not})")
            + f" (traffic cost {cost:g})",
            pools=chosen,
            outcome=Outcome.OPTIMAL
            if proven
            else Outcome.TIME_LIMIT
            if why_not == "time limit"
            else Outcome.NOT_PROVEN,
        )
