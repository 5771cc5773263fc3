"""Random problems through every solver, checked by an independent O(n^2) checker.

    python -m memplan.experiments.bench.fuzz [--problems 200] [--bank-problems 150] [--seed 0] [--time-limit 1] [--save DIR]

Each problem goes through every registered solver (milp with both backends).
A plan is checked here, pair by pair, without the project's validator; a
claimed proof is checked against the other solvers' plans: a plan marked
optimal must be the smallest any solver found, and a claim that no plan fits
the capacity is false when another solver's plan fits. Prints a Markdown table
per solver: problems tried, plans (and how many claimed optimal), invalid
plans, false proofs (also an error whose message claims a proof its `proven`
flag denies, or the reverse), crashes (any exception that is not an
`InfeasibleError` or an `UnsupportedProblemError`), and the first few
failures; then the same for problems with banks through every bank solver
(`fuzz_banks`, judged by an exhaustive search). `--save` writes each failing
problem as JSON. Solvers are called directly, not through
`solvers.solve` (which validates), so an invalid plan reaches the checker.
"""

from __future__ import annotations

import argparse
import dataclasses
import random
import traceback
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from memplan.errors import InfeasibleError, UnsupportedProblemError
from memplan.experiments import flags
from memplan.experiments.bench.claims import Report, honest
from memplan.experiments.markdown import markdown
from memplan.generate import random_problem
from memplan.peak_bound import lower_bound
from memplan.plan import Plan
from memplan.problem import Buffer, Gap, Problem

SOLVERS: tuple[tuple[str, str, dict[str, Any]], ...] = (
    ("greedy", "greedy", {}),
    ("bestfit", "bestfit", {}),
    ("skyline", "skyline", {}),
    ("cpsat", "cpsat", {}),
    ("milp-cbc", "milp", {"backend": "cbc"}),
    ("milp-highs", "milp", {"backend": "highs"}),
)
"""(label, registered solver, options) of every run on each problem."""

# Seeds 0-53 (6 problems of each kind): 1 s and 5 s per solve give the same counts (215 of 324 runs
# proven), in 12 s and 18 s; a second per solve buys more problems per minute, not better verdicts.
TIME_LIMIT_S = 1.0
TIME_LIMIT_WHY = "1 s: on seeds 0-53, 5 s proves nothing more and takes 1.5x as long"

KINDS = ("plain", "aligned", "constrained", "pools", "huge", "capacity", "zero-size", "gaps", "gaps-capacity")


# -- problems ------------------------------------------------------------------------


def random_case(seed: int) -> Problem:
    """One problem of a kind drawn from `KINDS` (small: exact solvers decide most of them in 1 s)."""
    rng = random.Random(seed)
    kind = KINDS[seed % len(KINDS)]
    n = rng.randint(2, 12)
    if kind == "plain":
        problem = random_problem(n, seed)
    elif kind == "aligned":
        problem = random_problem(n, seed, alignment=(1, 2, 4, 16, 64))
    elif kind == "constrained":
        problem = random_problem(
            n, seed, alignment=(1, 4, 16), with_groups=True, with_fixed=True, with_same_offset=True
        )
    elif kind == "pools":
        problem = random_problem(
            n, seed, alignment=(1, 8), with_groups=True, with_same_offset=True, n_pools=2
        )
    elif kind == "huge":
        problem = _huge(rng, n)
    elif kind == "capacity":
        base = random_problem(n, seed, alignment=(1, 4, 16), with_fixed=rng.random() < 0.5)
        bound = lower_bound(base)
        problem = dataclasses.replace(base, capacity=bound + rng.randint(0, max(bound // 8, 1)))
    elif kind == "zero-size":
        problem = _with_zero_sizes(rng, random_problem(n, seed, alignment=(1, 4)))
    elif kind == "gaps":
        problem = _with_gaps(rng, random_problem(n, seed, alignment=(1, 2, 16), with_same_offset=True))
    else:
        base = _with_gaps(rng, random_problem(n, seed, alignment=(1, 4)))
        bound = lower_bound(base)
        problem = dataclasses.replace(base, capacity=bound + rng.randint(0, max(bound // 8, 1)))
    return dataclasses.replace(problem, name=f"fuzz-{seed}-{kind}")


def _huge(rng: random.Random, n: int) -> Problem:
    """Sizes near 2^40 (or 2^56) next to small ones: coordinates that do not scale down."""
    big = 1 << rng.choice((40, 40, 56))
    buffers = []
    for i in range(n):
        start = rng.randrange(6)
        size = big + rng.randrange(1 << 20) if rng.random() < 0.5 else rng.randint(1, 1 << 20)
        buffers.append(
            Buffer(f"h{i}", start, start + rng.randint(1, 4), size, alignment=rng.choice((1, 2, 16)))
        )
    return Problem(tuple(buffers))


def _with_zero_sizes(rng: random.Random, problem: Problem) -> Problem:
    """Zero-byte buffers added, some fixed (inside other buffers' bytes, where they overlap nothing)."""
    extra = []
    for i in range(rng.randint(1, 3)):
        start, alignment = rng.randrange(8), rng.choice((1, 16))
        offset = alignment * rng.randrange(64) if rng.random() < 0.4 else None
        extra.append(Buffer(f"z{i}", start, start + rng.randint(1, 3), 0, alignment=alignment, offset=offset))
    return dataclasses.replace(problem, buffers=problem.buffers + tuple(extra))


def _with_gaps(rng: random.Random, problem: Problem) -> Problem:
    """Some root buffers become absent, or hold only some bytes (a window), for a while in their lifetime."""
    members = {m for g in problem.groups for m, _ in g.members}
    buffers = []
    for b in problem.buffers:
        if b.id not in members and b.end - b.start >= 3 and rng.random() < 0.6:
            lo = rng.randint(b.start + 1, b.end - 2)
            window = None
            if rng.random() < 0.5:
                low = 0 if rng.random() < 0.5 else rng.randint(0, b.size)
                window = (low, rng.randint(low, b.size))
            b = dataclasses.replace(b, gaps=(Gap(lo, rng.randint(lo + 1, b.end - 1), window),))
        buffers.append(b)
    return dataclasses.replace(problem, buffers=tuple(buffers))


# -- the independent checker -------------------------------------------------------------


def occupancy(buf: Buffer) -> list[tuple[int, int, int, int]]:
    """(from, to, low byte, high byte above the offset) over the lifetime, derived here from the fields.

    Outside its gaps a buffer holds all its bytes; in a gap, its window's bytes or none.
    """
    pieces = [(buf.start, buf.end, 0, buf.size)]
    for gap in buf.gaps:
        cut = []
        for t0, t1, lo, hi in pieces:
            cut += [(a, b, lo, hi) for a, b in ((t0, min(t1, gap.start)), (max(t0, gap.end), t1)) if a < b]
            if gap.window is not None and max(t0, gap.start) < min(t1, gap.end):
                cut.append((max(t0, gap.start), min(t1, gap.end), *gap.window))
        pieces = cut
    return [p for p in pieces if p[2] < p[3]]


def check(problem: Problem, plan: Plan) -> list[str]:
    """Every fault of `plan`, found by comparing all pairs of buffers (no sweep, no shared code)."""
    faults = []
    offsets = plan.offsets
    ids = {b.id for b in problem.buffers}
    faults += [f"{k!r} is not a buffer" for k in offsets if k not in ids]
    for b in problem.buffers:
        x = offsets.get(b.id)
        if not isinstance(x, int) or isinstance(x, bool):
            faults.append(f"{b.id!r} has offset {x!r}")
            continue
        if x < 0 or x % b.alignment or (b.offset is not None and x != b.offset):
            faults.append(
                f"{b.id!r} at {x}: negative, misaligned ({b.alignment}) or not at its fixed {b.offset}"
            )
    if faults:
        return faults
    member_of = {}
    for g in problem.groups:
        for m, rel in g.members:
            member_of[m] = g.parent
            if offsets[m] != offsets[g.parent] + rel:
                faults.append(f"member {m!r} not {rel} bytes into {g.parent!r}")
    for sset in problem.same_offsets:
        if len({offsets[b] for b in sset.buffers}) > 1:
            faults.append(f"same-offset set {sset.buffers} split")
    roots = [b for b in problem.buffers if b.id not in member_of]
    for i, a in enumerate(roots):
        for b in roots[i + 1 :]:
            if a.pool != b.pool:
                continue
            xa, xb = offsets[a.id], offsets[b.id]
            for s, e, lo_a, hi_a in occupancy(a):
                for t, f, lo_b, hi_b in occupancy(b):
                    if s < f and t < e and xa + lo_a < xb + hi_b and xb + lo_b < xa + hi_a:
                        faults.append(
                            f"{a.id!r} and {b.id!r} share bytes at times [{max(s, t)}, {min(e, f)})"
                        )
    for pool in {b.pool for b in problem.buffers}:
        need = max(offsets[b.id] + b.size for b in problem.buffers if b.pool == pool)
        if plan.arena_sizes.get(pool, -1) < need:
            faults.append(f"pool {pool} declares {plan.arena_sizes.get(pool)} bytes, needs {need}")
        if problem.capacity is not None and need > problem.capacity:
            faults.append(f"pool {pool} needs {need} bytes, over the capacity {problem.capacity}")
    return faults


# -- the run -----------------------------------------------------------------------------


@dataclass
class Attempt:
    """What one solver did with one problem."""

    label: str
    plan: Plan | None = None
    faults: list[str] = field(default_factory=list)
    infeasible: str | None = None  # the InfeasibleError's message
    proven: bool = False  # the InfeasibleError's `proven`
    unsupported: bool = False
    crash: str | None = None

    @property
    def fits(self) -> bool:
        return self.plan is not None and not self.faults


def run_one(
    problem: Problem, label: str, solver: str, options: dict[str, Any], time_limit_s: float
) -> Attempt:
    """Solve with the registered function itself (not `solvers.solve`, which validates) and check.

    What the registry says the solver does not support is refused first, as `solve` would.
    """
    from memplan import solvers

    outcome = Attempt(label)
    spec = solvers.entry(solver)
    try:
        spec.check(problem, solvers.alternatives(problem))
        plan = spec.load()(problem, spec.make_params(options), time_limit_s=time_limit_s)
    except InfeasibleError as exc:
        outcome.infeasible, outcome.proven = str(exc), exc.proven
        return outcome
    except UnsupportedProblemError:
        outcome.unsupported = True
        return outcome
    except Exception as exc:  # noqa: BLE001 - a crash is what the fuzz counts
        frame = traceback.extract_tb(exc.__traceback__)[-1]
        outcome.crash = f"{type(exc).__name__}: {exc} [{Path(frame.filename).name}:{frame.lineno}]"
        return outcome
    if problem.capacity is not None and max(plan.arena_sizes.values(), default=0) > problem.capacity:
        outcome.infeasible = "not proven: plan over the capacity"  # what solvers.solve turns into an error
        return outcome
    outcome.plan = plan
    outcome.faults = check(problem, plan)
    return outcome


def fuzz(
    problems: int, seed: int = 0, time_limit_s: float = TIME_LIMIT_S, solvers: Sequence[tuple] = SOLVERS
) -> Report:
    """Run `problems` random problems through every solver and judge every plan and claim."""
    report = Report()
    for number in range(seed, seed + problems):
        problem = random_case(number)
        outcomes = [run_one(problem, label, name, opts, time_limit_s) for label, name, opts in solvers]
        valid = [o for o in outcomes if o.fits]
        best = min((o.plan.arena_size for o in valid if o.plan is not None), default=None)
        bound = lower_bound(problem)
        for o in outcomes:
            report.counts[o.label]["tried"] += 1
            if o.crash:
                report.fail(problem, o.label, "crash", o.crash)
            elif o.unsupported:
                report.counts[o.label]["unsupported"] += 1
            elif o.infeasible is not None:
                report.counts[o.label]["no plan"] += 1
                if not honest(o.infeasible, o.proven):
                    report.fail(problem, o.label, "false proof", f"proven={o.proven}, but: {o.infeasible}")
                elif o.proven and valid:
                    report.fail(
                        problem, o.label, "false proof", f"proved no plan fits, {valid[0].label} found one"
                    )
            elif o.faults:
                report.fail(problem, o.label, "invalid", "; ".join(o.faults[:3]))
            else:
                plan = o.plan
                assert plan is not None and best is not None, "a plan without faults is a valid one"
                report.counts[o.label]["plans"] += 1
                report.counts[o.label]["proven"] += plan.proven_optimal
                if plan.arena_size < bound:
                    report.fail(
                        problem, o.label, "invalid", f"arena {plan.arena_size} below the bound {bound}"
                    )
                elif plan.proven_optimal and plan.arena_size > best:
                    report.fail(
                        problem, o.label, "false proof", f"proven {plan.arena_size}, but {best} was found"
                    )
    return report


COLUMNS = ("tried", "plans", "proven", "no plan", "unsupported", "invalid", "false proof", "crash")


def table(report: Report) -> str:
    """The counts as a Markdown table, one row per solver and a total."""
    rows = [[label, *(counts[c] for c in COLUMNS)] for label, counts in report.counts.items()]
    rows.append(["**all**", *(report.total(c) for c in COLUMNS)])
    return markdown(pd.DataFrame(rows, columns=["solver", *COLUMNS]))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--problems", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    flags.add_time_limit(parser, TIME_LIMIT_S, why=TIME_LIMIT_WHY)
    parser.add_argument("--bank-problems", type=int, default=150, help="problems with banks (fuzz_banks)")
    parser.add_argument("--save", type=Path, help="folder for the failing problems as JSON")
    args = parser.parse_args(argv)
    from memplan.experiments.bench import fuzz_banks

    report = fuzz(args.problems, args.seed, args.time_limit)
    banked = fuzz_banks.fuzz(args.bank_problems, args.seed, args.time_limit)
    print(
        f"{args.problems} problems, seeds {args.seed}..{args.seed + args.problems - 1}\n\n{table(report)}\n"
    )
    print(f"{args.bank_problems} problems with banks, same seeds\n\n{fuzz_banks.table(banked)}")
    failures = report.failures + banked.failures
    for name, label, what in failures[:20]:
        print(f"- {name} / {label}: {what}")
    if args.save and (report.failing or banked.failing):
        from memplan.io import save_json

        args.save.mkdir(parents=True, exist_ok=True)
        for name, problem in (report.failing | banked.failing).items():
            save_json(problem, args.save / f"{name}.json")
    kinds = ("invalid", "false proof", "crash", "checker")
    bad = sum(r.total(k) for r in (report, banked) for k in kinds)
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
