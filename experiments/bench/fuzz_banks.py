"""Random problems with memory banks through every bank solver, judged by an exhaustive search.

Run by `python -m memplan.experiments.bench.fuzz` after its plain problems (`--bank-problems 150`;
`--problems 0` for the banks alone).

Each problem is small (at most 7 placement units), so the least traffic cost
that fits every bank is found here by brute force, sharing no code with the
solvers or the project's validator: bank choices in order of exact cost
(costs read as the decimals they print as), each bank's share checked by
first-fit in every order of its units. A plan is checked pair by pair with the
bank rules derived here (a root placed in a bank takes the bank's alignment and
is rounded up to it). A claimed optimum costing more than the search's, a
claimed proof that nothing fits when the search finds a placement, or an error
whose message claims a proof its `proven` flag denies (or the reverse) is a
false proof; any exception other than `InfeasibleError` or
`UnsupportedProblemError` is a crash.
"""

from __future__ import annotations

import itertools
import math
import random
import traceback
from collections import defaultdict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

import pandas as pd

from memplan.errors import InfeasibleError, ProblemError, UnsupportedProblemError
from memplan.experiments.bench.claims import Report, honest
from memplan.experiments.markdown import markdown
from memplan.plan import Plan
from memplan.problem import Bank, Buffer, ContiguousGroup, Problem, SameOffset

SOLVERS: tuple[tuple[str, str, dict[str, Any]], ...] = (
    ("banked_greedy", "banked_greedy", {}),
    ("banked_bestfit", "banked_bestfit", {}),
    ("cpsat", "cpsat", {}),
    ("cpsat-reproducible", "cpsat", {"reproducible": True}),
)
"""(label, registered solver, options): every solver that chooses banks (`solvers.available(banks=True)`)."""

COSTS = (None, 0.0, 0.0001, 0.0004, 1.0, 1.0004, 0.19, 0.16, 2.5, 7.0, 1e-30)
"""Bank costs drawn: None (the preference order), values a scale of 1000 rounds together, and one
too fine for exact integer weights (cpsat rounds and claims no optimum)."""


# -- problems ------------------------------------------------------------------------


def random_bank_case(seed: int) -> Problem:
    """A small problem over 1-3 banks with groups, fixed offsets, same-offset sets, costs,
    capacities and alignments drawn at random (capacities near what the buffers need).

    A draw the problem model refuses (a buffer fixed at an offset no bank it may go to keeps
    aligned) is drawn again from where the generator stands.
    """
    rng = random.Random(seed)
    while True:
        try:
            return _draw(rng, f"banks-{seed}")
        except ProblemError:
            continue


def _draw(rng: random.Random, name: str) -> Problem:
    n_banks = rng.choice((1, 2, 2, 3))
    # Some problems without fixed offsets or same-offset sets: banked_greedy takes those.
    fixing = rng.random() < 0.5
    sharing = rng.random() < 0.5
    pools = list(range(1, n_banks + 1))
    roots: list[Buffer] = []
    members: list[Buffer] = []
    groups: list[ContiguousGroup] = []
    for i in range(rng.randint(2, 7)):
        start = rng.randrange(6)
        end = start + rng.randint(1, 4)
        size = rng.choice((0, 1, 3, 4, 8, 12, 16, 20, 24, 32, 40))
        alignment = rng.choice((1, 1, 2, 4, 8, 16))
        banks = tuple(sorted(rng.sample(pools, rng.randint(1, n_banks)))) if rng.random() < 0.85 else ()
        pool = banks[0] if banks else rng.choice(pools + [0])
        offset = None
        if fixing and rng.random() < 0.3:
            offset = alignment * rng.randint(0, 2)
        root = Buffer(
            f"b{i}", start, end, size, alignment, offset, pool, banks=banks, accesses=rng.randint(0, 9)
        )
        if size >= 8 and offset is None and rng.random() < 0.3:  # a member that may need more alignment
            m_align = rng.choice((1, 4, 16))
            rel = 0 if rng.random() < 0.6 else m_align * rng.randint(0, (size - 4) // m_align)
            if rel + 4 <= size:
                member = Buffer(
                    f"m{i}", start, end, min(size - rel, rng.choice((4, 8))), m_align, pool=pool, banks=banks
                )
                members.append(member)
                groups.append(ContiguousGroup(root.id, ((member.id, rel),)))
        roots.append(root)
    same: list[SameOffset] = []
    free = [b for b in roots if b.offset is None]
    for a, b in itertools.combinations(free, 2):
        if (
            a.banks == b.banks
            and a.pool == b.pool
            and (a.end <= b.start or b.end <= a.start)
            and sharing
            and rng.random() < 0.3
        ):
            same.append(SameOffset((a.id, b.id)))
            break
    need = sum(b.size + b.alignment for b in roots)
    banks_ = tuple(
        Bank(
            f"bank{p}",
            p,
            rng.randint(max(1, need // (2 * n_banks)), need),
            cost=rng.choice(COSTS),
            alignment=rng.choice((1, 1, 4, 8)),
        )
        for p in pools
    )
    capacity = need if rng.random() < 0.15 else None
    return Problem(tuple(roots + members), tuple(groups), tuple(same), capacity, name, banks_)


# -- the bank rules, derived here ------------------------------------------------------


@dataclass(frozen=True)
class Piece:
    """One root of a unit as placed in one pool: its bytes over its lifetime and what its offset needs."""

    start: int
    end: int
    size: int  # rounded up to the bank's alignment


@dataclass(frozen=True)
class Placement:
    """A unit (roots sharing one offset) in one pool: its pieces, and the offsets allowed."""

    pieces: tuple[Piece, ...]
    modulus: int  # the offset is a multiple of this
    fixed: int | None

    @property
    def height(self) -> int:
        return max((p.size for p in self.pieces), default=0)


class Rules:
    """A problem's units and what each needs in each of its pools, read from the fields alone."""

    def __init__(self, problem: Problem) -> None:
        self.problem = problem
        self.bank = {b.pool: b for b in problem.banks}
        self.by_id = {b.id: b for b in problem.buffers}
        self.parent = {m: (g.parent, rel) for g in problem.groups for m, rel in g.members}
        owner: dict[str, int] = {}
        units: list[list[str]] = []
        for sset in problem.same_offsets:
            known = {owner[b] for b in sset.buffers if b in owner}
            merged = [b for k in sorted(known) for b in units[k]] + [b for b in sset.buffers]
            for k in known:
                units[k] = []
            units.append(list(dict.fromkeys(merged)))
            for b in units[-1]:
                owner[b] = len(units) - 1
        units = [u for u in units if u]
        in_set = {b for u in units for b in u}
        units += [[b.id] for b in problem.buffers if b.id not in self.parent and b.id not in in_set]
        self.units = units

    def root(self, buffer_id: str) -> tuple[str, int]:
        rel = 0
        while buffer_id in self.parent:
            buffer_id, step = self.parent[buffer_id]
            rel += step
        return buffer_id, rel

    def choices(self, unit: list[str]) -> tuple[int, ...]:
        first = self.by_id[unit[0]]
        return first.banks or (first.pool,)

    def placement(self, unit: list[str], pool: int) -> Placement | None:
        """How the unit sits in `pool`, or None if no offset can satisfy its fixed offset."""
        bank = self.bank.get(pool)
        modulus, fixed, pieces = 1, set(), []
        for root_id in unit:
            root = self.by_id[root_id]
            own = root.alignment if bank is None else math.lcm(root.alignment, bank.alignment)
            modulus = math.lcm(modulus, own)
            size = root.size if bank is None else -(-root.size // own) * own
            pieces.append(Piece(root.start, root.end, size))
        for buf in self.problem.buffers:
            root_id, rel = self.root(buf.id)
            if root_id in unit:
                if rel % buf.alignment:
                    return None
                modulus = math.lcm(modulus, buf.alignment)
                if buf.offset is not None:
                    fixed.add(buf.offset - rel)
        if len(fixed) > 1 or any(f < 0 or f % modulus for f in fixed):
            return None
        return Placement(tuple(pieces), modulus, fixed.pop() if fixed else None)

    def limit(self, pool: int) -> int | None:
        caps = [
            c
            for c in (self.problem.capacity, self.bank[pool].capacity if pool in self.bank else None)
            if c is not None
        ]
        return min(caps) if caps else None

    def traffic(self, unit: list[str]) -> int:
        return sum(b.size * b.accesses for b in self.problem.buffers if self.root(b.id)[0] in unit)

    def cost(self, pool: int) -> Fraction:
        bank = self.bank.get(pool)
        return Fraction(repr(bank.cost)) if bank is not None and bank.cost else Fraction(0)


def _collide(a: Placement, ya: int, b: Placement, yb: int) -> bool:
    return any(
        p.start < q.end and q.start < p.end and ya < yb + q.size and yb < ya + p.size and p.size and q.size
        for p in a.pieces
        for q in b.pieces
    )


def fits(placements: Sequence[Placement], limit: int | None) -> bool:
    """True if the placements can share one pool within `limit` bytes: fixed ones where they are, the
    others by first-fit (each at the lowest allowed offset) in some order.

    Complete: sort any valid packing's free units by offset; first-fit in that order puts each at
    or below its offset there (what lies under it was only lowered), so it stays within the limit.
    """
    top = math.inf if limit is None else limit
    fixed = [(p, p.fixed) for p in placements if p.fixed is not None]
    if any(y + p.height > top for p, y in fixed) or any(
        _collide(a, ya, b, yb) for (a, ya), (b, yb) in itertools.combinations(fixed, 2)
    ):
        return False
    free = [p for p in placements if p.fixed is None]
    seen: set[tuple] = set()

    def lowest(p: Placement, placed: list[tuple[Placement, int]]) -> int:
        for c in sorted({0} | {y + q.height for q, y in placed}):
            y = -(-c // p.modulus) * p.modulus
            if not any(_collide(p, y, q, yq) for q, yq in placed):
                return y
        raise AssertionError("above everything placed is always free")

    def search(left: tuple[int, ...], placed: list[tuple[Placement, int]]) -> bool:
        if not left:
            return True
        key = (left, tuple(sorted(y for _, y in placed[len(fixed) :])))
        if key in seen:
            return False
        seen.add(key)
        for i in left:
            y = lowest(free[i], placed)
            if y + free[i].height <= top and search(
                tuple(j for j in left if j != i), placed + [(free[i], y)]
            ):
                return True
        return False

    return search(tuple(range(len(free))), list(fixed))


def least_cost(problem: Problem) -> Fraction | None:
    """The least traffic cost of any placement that fits every bank (None: nothing fits)."""
    rules = Rules(problem)
    options = []
    for unit in rules.units:
        placed = [(pool, rules.placement(unit, pool)) for pool in rules.choices(unit)]
        options.append([(pool, p) for pool, p in placed if p is not None])
    traffic = [rules.traffic(u) for u in rules.units]
    memo: dict[tuple[int, frozenset[int]], bool] = {}
    assignments = sorted(
        itertools.product(*options),
        key=lambda a: sum(rules.cost(pool) * t for (pool, _), t in zip(a, traffic)),
    )
    for assignment in assignments:
        by_pool: dict[int, list[int]] = defaultdict(list)
        for index, (pool, _) in enumerate(assignment):
            by_pool[pool].append(index)
        ok = True
        for pool, indices in by_pool.items():
            key = (pool, frozenset(indices))
            if key not in memo:
                memo[key] = fits([assignment[i][1] for i in indices], rules.limit(pool))
            if not memo[key]:
                ok = False
                break
        if ok:
            return sum((rules.cost(pool) * t for (pool, _), t in zip(assignment, traffic)), Fraction(0))
    return None


def plan_cost(problem: Problem, plan: Plan) -> Fraction:
    """The exact traffic cost of `plan`'s bank choices."""
    rules = Rules(problem)
    total = Fraction(0)
    for unit in rules.units:
        pool = plan.pools.get(unit[0], rules.by_id[unit[0]].pool)
        total += rules.cost(pool) * rules.traffic(unit)
    return total


def check(problem: Problem, plan: Plan) -> list[str]:
    """Every fault of `plan` under the bank rules derived here, pair by pair."""
    rules = Rules(problem)
    faults: list[str] = []
    where: dict[str, tuple[int, int]] = {}  # root -> (pool, offset)
    for unit in rules.units:
        pool = plan.pools.get(unit[0], rules.by_id[unit[0]].pool)
        if any(plan.pools.get(r, rules.by_id[r].pool) != pool for r in unit):
            faults.append(f"same-offset set {unit} split over pools")
        if pool not in rules.choices(unit):
            faults.append(f"{unit} placed in pool {pool}, not one of {rules.choices(unit)}")
            continue
        placement = rules.placement(unit, pool)
        offsets = {plan.offsets.get(r) for r in unit}
        if placement is None or len(offsets) != 1 or None in offsets:
            faults.append(f"{unit}: offsets {offsets} in pool {pool} cannot satisfy the unit")
            continue
        (y,) = offsets
        assert y is not None
        if not isinstance(y, int) or y < 0 or y % placement.modulus or placement.fixed not in (None, y):
            faults.append(f"{unit} at {y}: misaligned ({placement.modulus}) or not at {placement.fixed}")
        for r in unit:
            where[r] = (pool, y)
        limit = rules.limit(pool)
        if limit is not None and y + placement.height > limit:
            faults.append(f"{unit} ends at {y + placement.height}, over pool {pool}'s {limit} bytes")
        if plan.arena_sizes.get(pool, -1) < y + placement.height:
            faults.append(f"pool {pool} declares {plan.arena_sizes.get(pool)} bytes, {unit} ends higher")
    faults += [f"a bank is chosen for {b!r}, no buffer" for b in plan.pools if b not in rules.by_id]
    for buf in problem.buffers:
        root_id, rel = rules.root(buf.id)
        if root_id in where and plan.offsets.get(buf.id) != where[root_id][1] + rel:
            faults.append(f"{buf.id!r} is not {rel} bytes into its root {root_id!r}")
        if root_id in where and plan.pools.get(buf.id, where[root_id][0]) != where[root_id][0]:
            faults.append(f"{buf.id!r} is given pool {plan.pools[buf.id]}, its root {root_id!r} is elsewhere")
    if faults:
        return faults
    placed = [(u, rules.placement(u, where[u[0]][0]), where[u[0]]) for u in rules.units]
    for (u, a, (pa, ya)), (v, b, (pb, yb)) in itertools.combinations(placed, 2):
        if pa == pb and a is not None and b is not None and _collide(a, ya, b, yb):
            faults.append(f"{u} and {v} share bytes in pool {pa}")
    return faults


# -- the run -----------------------------------------------------------------------------


def judge(
    report: Report,
    problem: Problem,
    label: str,
    solver: str,
    options: dict[str, Any],
    limit: float,
    best: Fraction | None,
) -> None:
    """Run one solver on one problem (through the registry, not `solve`, which validates) and count."""
    from memplan import solvers

    spec = solvers.entry(solver)
    counts = report.counts[label]
    counts["tried"] += 1
    try:
        spec.check(problem, solvers.alternatives(problem))
        plan = spec.load()(problem, spec.make_params(options), time_limit_s=limit)
    except UnsupportedProblemError:
        counts["unsupported"] += 1
        return
    except InfeasibleError as exc:
        counts["no plan"] += 1
        if not honest(str(exc), exc.proven):
            report.fail(problem, label, "false proof", f"proven={exc.proven} but the message says: {exc}")
        elif exc.proven and best is not None:
            report.fail(problem, label, "false proof", f"proven infeasible, but cost {best} fits: {exc}")
        else:
            counts["proven none"] += exc.proven
        return
    except Exception as exc:  # noqa: BLE001 - a crash is what the fuzz counts
        frame = traceback.extract_tb(exc.__traceback__)[-1]
        report.fail(
            problem,
            label,
            "crash",
            f"{type(exc).__name__}: {exc} [{Path(frame.filename).name}:{frame.lineno}]",
        )
        return
    faults = check(problem, plan)
    if faults:
        report.fail(problem, label, "invalid", "; ".join(faults[:3]))
        return
    counts["plans"] += 1
    counts["proven"] += plan.proven_optimal
    cost = plan_cost(problem, plan)
    if best is None:
        report.fail(problem, label, "checker", f"a valid plan of cost {cost}, but the search found none")
    elif plan.proven_optimal and cost > best:
        report.fail(problem, label, "false proof", f"proven optimal at cost {cost}, but {best} fits")


def cases(problems: int, seed: int) -> Iterator[Problem]:
    for number in range(seed, seed + problems):
        yield random_bank_case(number)


def fuzz(
    problems: int, seed: int = 0, time_limit_s: float = 1.0, solvers: Sequence[tuple] = SOLVERS
) -> Report:
    """Run `problems` random bank problems through every bank solver and judge every plan and claim."""
    report = Report()
    for problem in cases(problems, seed):
        best = least_cost(problem)
        report.counts["search"]["tried"] += 1
        report.counts["search"]["plans" if best is not None else "no plan"] += 1
        for label, name, options in solvers:
            judge(report, problem, label, name, options, time_limit_s, best)
    return report


COLUMNS = (
    "tried",
    "plans",
    "proven",  # plans proven optimal (least traffic cost)
    "no plan",
    "proven none",  # of those, proofs that nothing fits
    "unsupported",
    "invalid",
    "false proof",
    "crash",
    "checker",  # a valid plan where the exhaustive search found none: the checker is wrong
)


def table(report: Report) -> str:
    """The counts as a Markdown table, one row per solver (and the exhaustive search's own row)."""
    rows = [[label, *(counts[c] for c in COLUMNS)] for label, counts in report.counts.items()]
    return markdown(pd.DataFrame(rows, columns=["solver", *COLUMNS]))
