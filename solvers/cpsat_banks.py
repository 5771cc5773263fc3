"""Joint bank choice and offsets with OR-Tools CP-SAT: the least traffic cost that fits every bank.

Model, per unit u (solvers.units) and bank b it may go to, in bytes divided
by g (the common divisor of every size, alignment and fixed offset):

    x_ub in {0, 1}, sum_b x_ub = 1               (pinned units: their one bank)
    y_ub = step_ub * k_ub, 0 <= y_ub <= C_b - s_ub   (s_ub: the size rounded up to the bank's alignment)
    per bank: NoOverlap2D of the optional rectangles (lifetime x [y_ub, y_ub + s_ub)) present iff x_ub
              Cumulative of the same (bytes live at once <= C_b): redundant, it tightens the bound
    minimise  sum_ub cost_b * traffic_u * x_ub     (traffic: bytes x accesses of the unit's buffers)

Capacity is a hard constraint, so a plan is returned only if it fits; an
optimal status proves no plan with less traffic cost fits. The `banked_bestfit`
plan is the hint (and the answer when CP-SAT finds nothing better in time);
a proven-infeasible model raises `BankCapacityError`.
"""

from __future__ import annotations

import math
import time

from ortools.sat.python import cp_model

from memplan.arith import align_up, common_divisor
from memplan.banks import bank_part, place_in_banks, traffic_cost
from memplan.bounds import lower_bound
from memplan.errors import BankCapacityError, InfeasibleError
from memplan.plan import Outcome, Plan, arena_sizes_of
from memplan.problem import Problem
from memplan.solvers.units import Unit, expand, units_of

DEFAULT_TIME_LIMIT_S = 10.0
COST_SCALE = 1000  # bank costs are floats; the objective is in integers


def solve_cpsat_banks(
    problem: Problem,
    *,
    time_limit_s: float | None = None,
    num_workers: int = 2,
    log: bool = False,
    reproducible: bool = False,
) -> Plan:
    """The least-traffic plan that fits every bank; `proven_optimal` when CP-SAT proves it.

    `reproducible`: the heuristic runs untimed and CP-SAT spends the limit as deterministic time
    on one worker, so the same problem gives the same plan whatever the machine's load.
    """
    began = time.perf_counter()
    limit = DEFAULT_TIME_LIMIT_S if time_limit_s is None else float(time_limit_s)
    hint, hint_error = _heuristic(problem, None if reproducible else limit / 4)
    units = units_of(problem)
    model = _BankModel(problem, units)
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
    if status in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        plan = model.plan(solver, "cpsat", time.perf_counter() - began, proven=status == cp_model.OPTIMAL)
        if hint is None or traffic_cost(problem, plan.pools) <= traffic_cost(problem, hint.pools):
            return plan
    if status == cp_model.INFEASIBLE:
        bank, missing = (hint_error.bank, hint_error.missing) if hint_error else (problem.banks[-1].name, 0)
        raise BankCapacityError(
            f"cpsat proved that no placement fits the banks {[b.name for b in problem.banks]}"
            f": the best heuristic attempt leaves bank {bank!r} {missing} bytes missing",
            bank,
            missing,
        )
    if hint is None:
        assert hint_error is not None
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


def _heuristic(problem: Problem, limit: float | None) -> tuple[Plan | None, BankCapacityError | None]:
    from memplan.solvers.banked_bestfit import solve_banked_bestfit

    try:
        return solve_banked_bestfit(problem, time_limit_s=limit), None
    except BankCapacityError as e:
        return None, e
    except InfeasibleError as e:
        return None, BankCapacityError(str(e), problem.banks[-1].name, 0)


def _reach(problem: Problem, units: list[Unit]) -> dict[int, int]:
    """Per pool: an address no optimal plan needs to go above.

    Every unit that may go to the pool, packed there by best-fit (pins at their offsets, the
    bank's alignment applied): whatever subset an optimal plan puts in the pool fits below that
    arena in the same layout, so offsets above it never help. Capping a roomy bank (a 16 MiB
    DRAM) there keeps the model small without losing an optimum.
    """
    from memplan.solvers.bestfit import solve_bestfit

    top: dict[int, int] = {}
    for pool in {p for u in units for p in problem.buffer(u.roots[0]).choices}:
        pools = {r: pool for u in units if pool in problem.buffer(u.roots[0]).choices for r in u.roots}
        keep = {b.id for b in problem.buffers if problem.root_of(b.id)[0] in pools}
        top[pool] = solve_bestfit(bank_part(place_in_banks(problem, pools), keep)).arena_size
    return top


class _BankModel:
    """The CP-SAT model of one problem with banks; keeps the variables to read a plan back."""

    def __init__(self, problem: Problem, units: list[Unit]) -> None:
        self.problem = problem
        self.units = units
        self.model = cp_model.CpModel()
        banks = {b.pool: b for b in problem.banks}
        sizes = [r.size for u in units for r in u.rects] + [b.alignment for b in problem.banks]
        sizes += [u.alignment for u in units] + [u.fixed for u in units if u.fixed]
        self.g = g = common_divisor(sizes)
        self.choice: dict[tuple[int, int], cp_model.IntVar] = {}
        self.offset: dict[tuple[int, int], cp_model.IntVar] = {}
        boxes: dict[int, list[tuple]] = {}
        objective = []
        moved: dict[str, int] = {}
        for b in problem.buffers:
            root_id = problem.root_of(b.id)[0]
            moved[root_id] = moved.get(root_id, 0) + b.size * b.accesses
        reach = _reach(problem, units)
        for u in units:
            root = problem.buffer(u.roots[0])
            traffic = sum(moved.get(r, 0) for r in u.roots)
            lits = []
            for pool in root.choices:
                bank = banks.get(pool)
                alignment = u.alignment if bank is None else math.lcm(u.alignment, bank.alignment)
                size = max(align_up(r.size, alignment) for r in u.rects) if bank else u.size
                cap = min(bank.capacity, reach[pool]) // g if bank else reach[pool] // g + 1
                step = max(1, alignment // g)
                top = cap - size // g
                lit = (
                    self.model.new_bool_var(f"x{u.index}_{pool}")
                    if len(root.choices) > 1
                    else self.model.new_constant(1)
                )
                if top < 0 or (u.fixed is not None and u.fixed // g > top):
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
                for r in u.rects:
                    rsize = align_up(r.size, alignment) // g if bank else r.size // g
                    t = self.model.new_optional_fixed_size_interval_var(r.start, r.end - r.start, lit, "t")
                    s = self.model.new_optional_fixed_size_interval_var(y, rsize, lit, "s")
                    boxes.setdefault(pool, []).append((t, s, rsize))
                if bank is not None and bank.cost:
                    objective.append(int(round(bank.cost * COST_SCALE)) * traffic * lit)
            self.model.add_exactly_one(lits)
        for pool, items in boxes.items():
            self.model.add_no_overlap_2d([t for t, _, _ in items], [s for _, s, _ in items])
            if pool in banks:
                self.model.add_cumulative(
                    [t for t, _, _ in items], [d for _, _, d in items], banks[pool].capacity // g
                )
        self.model.minimize(sum(objective))

    def hint(self, plan: Plan) -> None:
        for u in self.units:
            pool = plan.pools.get(u.roots[0], self.problem.buffer(u.roots[0]).pool)
            choices = self.problem.buffer(u.roots[0]).choices
            if len(choices) > 1:
                for p in choices:
                    self.model.add_hint(self.choice[u.index, p], int(p == pool))
            y = self.offset.get((u.index, pool))
            if y is not None:
                self.model.add_hint(y, plan.offsets[u.roots[0]] // self.g)

    def plan(self, solver: cp_model.CpSolver, name: str, seconds: float, proven: bool) -> Plan:
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
        cost = solver.ObjectiveValue() / COST_SCALE
        return Plan(
            offsets=offsets,
            arena_sizes=arena_sizes,
            solver=name,
            seconds=seconds,
            proven_optimal=proven,
            lower_bound=lower_bound(placed),
            status=("optimal" if proven else "feasible, not proven optimal") + f" (traffic cost {cost:g})",
            pools=chosen,
            outcome=Outcome.OPTIMAL if proven else Outcome.TIME_LIMIT,
        )
