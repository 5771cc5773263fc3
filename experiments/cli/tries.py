"""What each lever and lowering the user of `memplan report` did not use would save, measured.

The report's smallest change used to be read off the live peak (move one tensor to another bank),
which misses the changes that work: a weight transpose that constant folding removes, a CNN that
tiling shrinks by more than half. So `memplan report MODEL` re-plans the model once per lever or
lowering that was off (`candidates`: --const-prop, --convert-linear, both, --tiling, tiling after
those lowerings, cat fusion, state in place, slice no-ops) and records the program's arenas with it (`LeverTry`), next to the same
solver's plan without it. The tries are bounded: a quick solver (greedy or bestfit, the report's own
when it is one of them, else bestfit, with its plan without the lever made once more), no stock
lowering, and each try in a process of its own (spawned: it loads the model again) killed at a
wall-clock limit. A try over it, one that raises (its error's first line) and one whose process dies
are listed as failed; the user's own report is never affected. (An in-process SIGALRM was tried
first: the report of a 16-layer decoder aborted with SIGABRT in its first try, which completes without
the alarm, and FX wrapped a timeout inside a graph in InternalError.)
"""

from __future__ import annotations

import multiprocessing
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from memplan.experiments.zoo import ZooModel
from memplan.viz.report.model import LeverTry

TRY_SOLVERS = ("greedy", "bestfit")  # quick enough to re-plan a model several times
FALLBACK_SOLVER = "bestfit"
DEFAULT_TRY_SECONDS = 300.0


@dataclass(frozen=True)
class Candidate:
    flag: str
    what: str
    options: Mapping[str, Any]  # plan_model keyword arguments that switch it on


def candidates(model: ZooModel, levers: Mapping[str, bool]) -> list[Candidate]:
    """The levers and lowerings `model` (as the report lowered it) did not use."""
    from memplan.experiments.zoo.models.common import CONST_PROP

    found = []
    folded, linear = bool(model.backend_config.get(CONST_PROP)), bool(model.convert_to_linear)
    if not folded:
        found.append(
            Candidate("--const-prop", "fold constant subgraphs (weight transposes)", {"const_prop": True})
        )
    if not linear:
        found.append(
            Candidate(
                "--convert-linear",
                "XNNPACK's ConvertToLinearPass (linear, not transpose + mm)",
                {"convert_linear": True},
            )
        )
    if not folded and not linear:
        found.append(
            Candidate(
                "--const-prop --convert-linear",
                "both: fold constants and ConvertToLinearPass",
                {"const_prop": True, "convert_linear": True},
            )
        )
    single = [c for c in found if len(c.options) == 1]  # each lowering alone
    lowerings = {k: v for c in single for k, v in c.options.items()}
    if not levers.get("tiling", True) and lowerings:
        # A transposed classifier weight can hold the peak that tiling lowers: tile after the lowerings.
        flags = " ".join(c.flag for c in single)
        found.append(
            Candidate(f"--tiling {flags}", "tiling after the lowerings", {"tiling": True, **lowerings})
        )
    for lever, flag, what, option in (
        ("tiling", "--tiling", "compute the high-resolution CNN region in row bands", "tiling"),
        ("cat fusion", "--cat-fusion on", "write cat inputs inside the cat's output", "cat_fusion"),
        (
            "state in place",
            "PlannerPass(state_in_place=True)",
            "write new state values in place",
            "state_in_place",
        ),
        (
            "slice no-ops",
            "PlannerPass(slice_noop=True)",
            "place contiguous slices inside their source",
            "slice_noop",
        ),
    ):
        if not levers.get(lever, True):
            found.append(Candidate(flag, what, {option: True}))
    return found


def program_arena_bytes(planned: Any) -> int:
    """What the runtime allocates for the planned program (zoo.runtime.program_arena_bytes of each
    method's planned arena sizes)."""
    from memplan.experiments.zoo.runtime import program_arena_bytes as of_sizes

    graphs = {method: planned.program.exported_program(method).graph_module for method in planned.methods}
    return of_sizes({m: list(g.meta.get("non_const_buffer_sizes", [])) for m, g in graphs.items()})


def _tiling_said(planned: Any) -> str:
    """What tiling did to each method (its report's summary: the region and peaks, or why not tiled)."""
    said = []
    for method in planned.methods:
        report = getattr(planned.results[method], "tiling", None)
        if report is not None:
            said.append(f"{method}: {report.summary()}")
    return "; ".join(said)


def _one_line(exc: BaseException) -> str:
    first = (str(exc).strip().splitlines() or [""])[0]
    return f"{type(exc).__name__}: {first}"


def _plan_in_child(conn: Any, spec: str, lowering: dict, solver: str, options: dict) -> None:
    """A try's process: load the model, plan it, send (arena bytes, note) or (None, the error)."""
    try:
        from memplan.experiments.planning import plan_model
        from memplan.experiments.zoo.lowering import library_warnings_silenced
        from memplan.experiments.zoo.programs import load, with_lowering

        with library_warnings_silenced():
            planned = plan_model(with_lowering(load(spec), **lowering), solver, stock=False, **options)
        conn.send((program_arena_bytes(planned), _tiling_said(planned) if options.get("tiling") else ""))
    except Exception as exc:  # any failure of a try is reported; the user's report stands
        conn.send((None, _one_line(exc)))


def planned_bytes(
    spec: str, lowering: Mapping[str, Any], solver: str, options: Mapping[str, Any], seconds: float
) -> tuple[int | None, str]:
    """(the program's arena bytes or None, a note or why it failed) of `spec` planned in a process of
    its own, killed after `seconds`: a try that hangs, overruns or crashes cannot take the report with it."""
    context = multiprocessing.get_context("spawn")
    receive, send = context.Pipe(duplex=False)
    child = context.Process(
        target=_plan_in_child, args=(send, spec, dict(lowering), solver, dict(options)), daemon=True
    )
    child.start()
    send.close()
    try:
        answer = receive.recv() if receive.poll(seconds) else (None, f"over the {seconds:g} s limit per try")
    except EOFError:  # the process ended without an answer
        child.join()
        answer = (None, f"the try's process died (exit code {child.exitcode})")
    finally:
        if child.is_alive():
            child.kill()
        child.join()
        receive.close()
    return answer


def measure(
    spec: str,
    lowering: Mapping[str, Any],
    candidate: Candidate,
    solver: str,
    options: Mapping[str, Any],
    baseline: int,
    seconds: float,
) -> LeverTry:
    """One try: the model planned with `candidate` on, or why that gave no plan."""
    arena, note = planned_bytes(spec, lowering, solver, {**options, **candidate.options}, seconds)
    return LeverTry(candidate.flag, candidate.what, solver, baseline, arena, note)


def try_levers(
    spec: str,
    solver: str,
    options: Mapping[str, Any],
    levers: Mapping[str, bool],
    report_bytes: int,
    seconds: float = DEFAULT_TRY_SECONDS,
    progress: Callable[[str], None] | None = None,
) -> list[LeverTry]:
    """Every candidate of the model `spec` (lowered with `options`), measured, largest saving first;
    tries that failed last. `report_bytes` is the report's own arena (the baseline when `solver` is a
    try solver)."""
    from memplan.experiments.zoo.programs import load, with_lowering

    say = progress or (lambda line: None)
    lowering = {k: options.get(k) for k in ("partitioner", "convert_linear", "const_prop")}
    rest = {k: v for k, v in options.items() if k not in lowering}
    model = with_lowering(load(spec), **lowering)
    todo = candidates(model, levers)
    if not todo:
        return []
    quick = solver if solver in TRY_SOLVERS else FALLBACK_SOLVER
    baseline = report_bytes
    if quick != solver:
        say(f"{model.name}: planning again with {quick}, the tries' solver")
        arena, why = planned_bytes(spec, lowering, quick, rest, seconds)
        if arena is None:
            failed = f"the plan without it ({quick}) failed: {why}"
            return [LeverTry(c.flag, c.what, quick, 0, failed=failed) for c in todo]
        baseline = arena
    found = []
    for candidate in todo:
        say(f"{model.name}: trying {candidate.flag} with {quick} (at most {seconds:g} s)")
        began = time.perf_counter()
        found.append(measure(spec, lowering, candidate, quick, rest, baseline, seconds))
        say(f"{model.name}: {candidate.flag} took {time.perf_counter() - began:.1f} s")
    return sorted(found, key=lambda t: (t.arena is None, -t.saving, t.flag))
