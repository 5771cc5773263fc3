"""Re-plan a built `.pte`: new offsets and arena sizes for its planned tensors, nothing else changed.

Each method's problem comes from `planner.pte.program` (lifetimes from the instruction stream). A method
is re-planned only when that problem could be derived, the new plan passes the validator, no arena
grows and the total shrinks; otherwise it keeps the file's layout and the report says why. The
program is written back with ExecuTorch's own serializer (delegate blobs, constants and named data
travel unchanged).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from memplan import solvers
from memplan.errors import MemplanError
from memplan.plan import Plan
from memplan.planner.compat import serialize_pte_binary
from memplan.planner.pte.layout import MethodLayout, ProgramLayout
from memplan.planner.pte.program import read_program
from memplan.planner.pte.structure import PteError
from memplan.validate import check_plan


@dataclass
class MethodReplan:
    """What happened to one method: the arenas before and after, the plan, or why it was kept."""

    method: str
    before: list[int]
    after: list[int]
    plan: Plan | None = None
    kept_because: str = ""

    @property
    def saved_bytes(self) -> int:
        return sum(self.before) - sum(self.after)


@dataclass
class Replan:
    """The re-planned program's bytes, one entry per method, and the program as read (`program.data`)."""

    data: bytes
    methods: list[MethodReplan]
    program: ProgramLayout

    @property
    def changed(self) -> bool:
        return any(m.plan is not None for m in self.methods)


def replan(
    source: str | Path | bytes,
    solver: str = solvers.DEFAULT_SOLVER,
    time_limit_s: float | None = solvers.DEFAULT_TIME_LIMIT_S,
    alignment: int = solvers.DEFAULT_ALIGNMENT,
    require_saving: bool = True,
) -> Replan:
    """Re-plan every method of the program at `source` with `solver`.

    `require_saving=False` writes the solver's plan even when it is no smaller (never larger): a
    program laid out differently but equivalent, which is how tests prove the rewriting itself.
    """
    solvers.get_solver(solver)  # unknown names fail before any work
    program = read_program(source, alignment)
    reports = [_replan_method(m, solver, time_limit_s, require_saving) for m in program.methods.values()]
    if not any(r.plan is not None for r in reports):
        return Replan(program.data, reports, program)
    for report in reports:
        if report.plan is not None:
            _write(program, program.methods[report.method], report)
    try:
        written = bytes(serialize_pte_binary(program.pte, extract_delegate_segments=True))
    except Exception as exc:  # noqa: BLE001 - what read back from a damaged file may not serialize
        raise PteError(
            f"{program.path or 'data'}: cannot write the program back ({type(exc).__name__}: {exc})"
        ) from None
    return Replan(written, reports, program)


def _replan_method(
    layout: MethodLayout, solver: str, time_limit_s: float | None, require_saving: bool
) -> MethodReplan:
    report = MethodReplan(layout.name, list(layout.arenas), list(layout.arenas))
    if layout.problem is None:
        report.kept_because = "; ".join(layout.cannot) or "no planned tensors"
        return report
    problem = layout.problem
    try:
        plan = solvers.solve(problem, solver, time_limit_s=time_limit_s)
        check_plan(problem, plan)
    except MemplanError as exc:  # the input's fault or the solver's: either way the file's layout stays
        report.kept_because = f"{solver} failed: {(str(exc).splitlines() or [type(exc).__name__])[0]}"
        return report
    after = list(layout.arenas)
    floor = layout.dead_floor()
    for pool, size in plan.arena_sizes.items():
        after[pool] = max(size, floor.get(pool, 0)) + layout.slack.get(pool, 0)
    grew = [p for p in range(len(after)) if after[p] > layout.arenas[p]]
    if grew or (require_saving and sum(after) >= sum(layout.arenas)):
        where = f" (arena {grew[0]} would grow)" if grew else ""
        report.kept_because = (
            f"{solver} found nothing smaller than the file's {sum(layout.arenas):,} bytes{where}"
        )
        return report
    report.after, report.plan = after, plan
    return report


def _write(program: ProgramLayout, layout: MethodLayout, report: MethodReplan) -> None:
    """Set every planned tensor's offset from the plan, and the method's arena sizes."""
    plan = report.plan
    assert plan is not None
    execution_plan = next(p for p in program.pte.program.execution_plan if p.name == layout.name)
    for bid, held in layout.members.items():
        base = plan.offsets[bid]
        for value, rel in held:
            info = execution_plan.values[value].val.allocation_info
            offset = base + rel
            info.memory_offset_low, info.memory_offset_high = offset & 0xFFFFFFFF, offset >> 32
    # No bytes (or none ever touched), but the runtime wants them inside the (smaller) arena
    for value in [*layout.zero_size, *layout.dead]:
        info = execution_plan.values[value].val.allocation_info
        info.memory_offset_low = info.memory_offset_high = 0
    execution_plan.non_const_buffer_sizes = list(report.after)
