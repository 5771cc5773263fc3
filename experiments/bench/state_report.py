"""Benchmark: write-back copies, bytes copied per call and arena bytes, stock vs memplan off vs on.

    python -m memplan.experiments.bench.state_report            # the table of docs/state_in_place.md
    python -m memplan.experiments.bench.state_report --no-1b    # without the Llama-3.2-1B-shapes row
        [--solvers cpsat,bestfit] [--time-limit 5]

Each program is lowered three times: ExecuTorch's stock `MemoryPlanningPass`,
`PlannerPass(state_in_place=False)` ("off") and `PlannerPass()` ("on"). Copies
and bytes are counted in the emitted program (every `aten::copy_`
instruction and the bytes of the tensor it writes), arenas are the bytes the
runtime allocates for the program (per mem_id the largest method's, summed),
lower bounds are memplan's (most bytes live at once). Every lowering is run
in `executorch.runtime` over the model's calls and compared with eager
PyTorch before its row is printed. The multi-method cache program is called
until its cache is full (`FILLING_ROUNDS` writes), so every position is checked.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence
from dataclasses import dataclass

from memplan.experiments import flags
from memplan.experiments.markdown import StreamedTable
from memplan.experiments.zoo import ZooModel, runtime
from memplan.experiments.zoo.models import hybrid
from memplan.experiments.zoo.models.stateful import multi_method_cache
from memplan.peak_bound import lower_bounds
from memplan.planner.pass_ import PlannerPass

_ELEMENT_BYTES = {"BOOL": 1, "BYTE": 1, "CHAR": 1, "SHORT": 2, "HALF": 2, "BFLOAT16": 2, "INT": 4}
_ELEMENT_BYTES |= {"FLOAT": 4, "LONG": 8, "DOUBLE": 8}
FILLING_ROUNDS = 4  # set_cache writes of 4 positions each fill multi_method_cache's 16-position cache
COLUMNS = (
    "solver",
    "program",
    "calls",
    "copy_ per call (stock / off / on)",
    "bytes copied per call (stock / off / on)",
    "arena bytes (stock / off / on)",
    "lower bound (off / on)",
)


@dataclass(frozen=True)
class Lowering:
    copies: int  # aten::copy_ instructions (write-backs), summed over the methods
    bytes_copied: int  # bytes those copies move
    arena: int  # bytes the runtime allocates (per mem_id the largest method, summed)
    lower_bound: int | None  # memplan's bound on the same problems (None for stock)
    seconds: float


def state_copies(program) -> tuple[int, int]:
    """(copy_ instructions, bytes they write) over every method of an emitted program."""
    count = nbytes = 0
    for plan in program.executorch_program.execution_plan:
        for instr in plan.chains[0].instructions:
            args = instr.instr_args
            if not hasattr(args, "op_index") or plan.operators[args.op_index].name != "aten::copy_":
                continue
            dest = plan.values[args.args[0]].val
            count += 1
            numel = 1
            for size in dest.sizes:
                numel *= size
            nbytes += numel * _ELEMENT_BYTES[dest.scalar_type.name]
    return count, nbytes


def program_arena(program) -> int:
    """Bytes of the arenas one loaded program needs: its methods share one set of arenas."""
    per_id: dict[int, int] = {}
    for sizes in runtime.stock_arena_bytes(program).values():
        for mem_id, size in enumerate(sizes):
            per_id[mem_id] = max(per_id.get(mem_id, 0), size)
    return sum(per_id.values())


def program_lower_bound(pass_: PlannerPass) -> int:
    per_pool: dict[int, int] = {}
    for result in pass_.results.values():
        for pool, bound in lower_bounds(result.problem).items():
            per_pool[pool] = max(per_pool.get(pool, 0), bound)
    return sum(per_pool.values())


def lower_and_check(model: ZooModel, pass_: PlannerPass | None) -> Lowering:
    t0 = time.perf_counter()
    program = runtime.lower(model, memory_planning_pass=pass_)
    seconds = time.perf_counter() - t0
    runtime.check_outputs(model, program.buffer)
    copies, nbytes = state_copies(program)
    bound = None if pass_ is None else program_lower_bound(pass_)
    return Lowering(copies, nbytes, program_arena(program), bound, seconds)


def programs(with_1b: bool) -> list[ZooModel]:
    found = [
        hybrid.llama_kv(),
        hybrid.qwen35_hybrid(),
        hybrid.lfm2_hybrid(),
        multi_method_cache(FILLING_ROUNDS),
    ]
    if with_1b:
        found.append(hybrid.llama_3_2_1b_shapes())
    return found


def row(
    model: ZooModel, stock: Lowering, solver: str, time_limit_s: float
) -> tuple[list[object], list[Lowering]]:
    """The table row of one program planned by `solver` without and with state in place (`stock`: the
    stock pass's lowering), and the three lowerings."""
    off, on = (
        lower_and_check(model, PlannerPass(solver=solver, time_limit_s=time_limit_s, state_in_place=s))
        for s in (False, True)
    )
    cells: list[object] = [
        solver,
        model.name,
        len(model.calls),
        f"{stock.copies} / {off.copies} / {on.copies}",
        f"{stock.bytes_copied:,} / {off.bytes_copied:,} / {on.bytes_copied:,}",
        f"{stock.arena:,} / {off.arena:,} / {on.arena:,}",
        f"{off.lower_bound:,} / {on.lower_bound:,}",
    ]
    return cells, [stock, off, on]


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    flags.add_solvers(ap, ("cpsat",))
    flags.add_time_limit(ap)
    ap.add_argument("--no-1b", action="store_true", help="skip the Llama-3.2-1B-shapes row")
    args = ap.parse_args(argv)
    table = StreamedTable(COLUMNS)
    timings = []
    for model in programs(not args.no_1b):
        stock = lower_and_check(model, None)
        for solver in flags.solvers_of(args):
            cells, runs = row(model, stock, solver, args.time_limit)
            table.row(cells)
            seconds = " / ".join(f"{r.seconds:.1f}" for r in runs)
            timings.append(
                f"{model.name} ({solver}): {model.description}; lowering s (stock/off/on) {seconds}"
            )
    print("\nEvery lowering matched eager PyTorch over all of its calls in executorch.runtime.")
    print("\n".join(timings))
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
