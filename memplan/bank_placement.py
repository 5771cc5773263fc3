"""Memory banks: making a problem's bank choices, the traffic each bank sees, and a per-bank report."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Collection, Mapping
from dataclasses import dataclass, replace

from memplan.arith import align_up
from memplan.errors import ProblemError
from memplan.peak_bound import lower_bounds
from memplan.plan import Plan
from memplan.problem import Problem

__all__ = ["BankUsage", "bank_part", "bank_report", "place_in_banks", "traffic", "traffic_cost"]


def place_in_banks(problem: Problem, pools: Mapping[str, int]) -> Problem:
    """The problem with every bank choice made: an ordinary multi-pool problem.

    `pools` gives the chosen pool of each group root or same-offset set member
    with a choice (members follow their root; a buffer absent from `pools`
    stays in its `pool`). Every root placed in a declared bank takes the bank's
    alignment and is rounded up to it. The banks stay declared (capacities,
    costs); no buffer has a choice left. Raises `ProblemError` naming the
    buffer if a choice is not one of its banks.
    """
    if not problem.banks:
        return problem
    bank_of = {b.pool: b for b in problem.banks}
    buffers = []
    for buf in problem.buffers:
        root, _ = problem.root_of(buf.id)
        pool = pools.get(root, problem.buffer(root).pool)
        if pool not in buf.choices:
            raise ProblemError(
                f"buffer {buf.id!r} is placed in pool {pool}, not one of its banks {list(buf.choices)}"
            )
        alignment, size = buf.alignment, buf.size
        bank = bank_of.get(pool)
        if bank is not None and root == buf.id:
            alignment = math.lcm(alignment, bank.alignment)
            size = align_up(size, alignment)
            if buf.offset is not None and buf.offset % alignment:
                raise ProblemError(
                    f"buffer {buf.id!r} is fixed at offset {buf.offset}, which bank {bank.name!r}"
                    f" (alignment {bank.alignment}) does not keep aligned; it cannot go there"
                )
        buffers.append(replace(buf, pool=pool, banks=(), alignment=alignment, size=size))
    return replace(problem, buffers=tuple(buffers))


def bank_part(placed: Problem, keep: Collection[str]) -> Problem:
    """The buffers `keep` of a problem whose bank choices are made (`place_in_banks`), with their
    groups and same-offset sets, as an ordinary problem: no banks, no capacity (one bank's packing)."""
    return replace(
        placed,
        buffers=tuple(b for b in placed.buffers if b.id in keep),
        groups=tuple(g for g in placed.groups if g.parent in keep),
        same_offsets=tuple(s for s in placed.same_offsets if s.buffers[0] in keep),
        banks=(),
        capacity=None,
    )


def traffic(
    problem: Problem, pools: Mapping[str, int] | None = None, moved: Mapping[str, int] | None = None
) -> dict[int, int]:
    """Bytes accessed per pool: every buffer's traffic, in the pool it is placed in.

    A buffer's traffic is `moved[id]` when given (what the caller measured, e.g. the emitted
    program's count at each tensor's exact bytes), else its size x accesses.
    """
    out: dict[int, int] = defaultdict(int)
    for buf in problem.buffers:
        root, _ = problem.root_of(buf.id)
        pool = buf.pool if pools is None else pools.get(root, problem.buffer(root).pool)
        out[pool] += buf.size * buf.accesses if moved is None else moved.get(buf.id, 0)
    return dict(out)


def traffic_cost(
    problem: Problem, pools: Mapping[str, int] | None = None, moved: Mapping[str, int] | None = None
) -> float:
    """The objective after fitting: traffic weighted by each bank's cost (pools that are not banks cost 0)."""
    cost = {b.pool: b.cost or 0.0 for b in problem.banks}
    return sum(bytes_ * cost.get(pool, 0.0) for pool, bytes_ in traffic(problem, pools, moved).items())


@dataclass(frozen=True)
class BankUsage:
    """What a plan puts in one bank (or undeclared pool): arena bytes, peak live bytes, traffic."""

    name: str
    pool: int
    capacity: int | None
    bytes: int
    peak: int
    traffic: int
    buffers: int

    @property
    def missing(self) -> int:
        """Bytes over capacity (0 when it fits)."""
        return 0 if self.capacity is None else max(0, self.bytes - self.capacity)


def bank_report(problem: Problem, plan: Plan) -> list[BankUsage]:
    """Per bank (preference order), then per other pool: bytes, peak live bytes and traffic."""
    placed = place_in_banks(problem, plan.pools)
    peaks = lower_bounds(placed)
    moved = traffic(placed)
    counts: dict[int, int] = defaultdict(int)
    for buf in placed.buffers:
        counts[buf.pool] += 1
    declared = [b.pool for b in problem.banks]
    others = sorted((set(plan.arena_sizes) | set(placed.pools)) - set(declared))
    rows = []
    for pool in declared + others:
        bank = problem.bank(pool)
        rows.append(
            BankUsage(
                name=bank.name if bank else problem.pool_label(pool),
                pool=pool,
                capacity=bank.capacity if bank else problem.capacity,
                bytes=plan.arena_sizes.get(pool, 0),
                peak=peaks.get(pool, 0),
                traffic=moved.get(pool, 0),
                buffers=counts.get(pool, 0),
            )
        )
    return rows
