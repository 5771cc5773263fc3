"""`memplan report` and `memplan diff`: a program (zoo name, .pt2, file.py:factory or .pte) as an
interactive HTML report, and two programs compared.

The report itself is memplan.viz.report; here a program spec becomes its data: a `.pte` is read
(memplan.planner.pte) and compared with memplan's re-plan of it, anything else is planned with
`memplan.plan_model` next to ExecuTorch's stock pass. With `--memory-map` a model is planned across the
map's banks (`PlannerPass(memory_map=...)`, as `memplan sweep --memory-map` and `memplan run
--memory-map` plan); under a budget of several banks that the plan does not fit, `across_banks` plans
the model across the budget's banks to check what the report suggests.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from memplan.errors import BankCapacityError, UsageError
from memplan.viz.report import ProgramReport
from memplan.viz.report.model import BankedPlan
from memplan.viz.report.sources import banked_plan

PTE_SUFFIX = ".pte"
_PERCENT = re.compile(r"\s*([0-9]+(?:\.[0-9]+)?)\s*%?\s*")


def program_report(
    spec: str,
    solver: str,
    time_limit_s: float,
    alignment: int,
    cat_fusion: bool,
    memory_map: str = "",
    **lowering: Any,
) -> ProgramReport:
    """The report data of one program spec, across `memory_map`'s banks if given.

    A map memplan cannot fit the program into leaves the report on the plan without the map, its
    `banked` saying which bank falls short and by how much.
    """
    from memplan.experiments.zoo.lowering import library_warnings_silenced

    if spec.endswith(PTE_SUFFIX) and memory_map:
        raise UsageError(
            f"--memory-map cannot re-plan {spec}: a .pte is re-planned inside the file's own arenas"
            " (memplan replan keeps each tensor's mem_id), never moved across banks; report the model"
            " (zoo name, .pt2 or file.py:factory) with --memory-map instead"
        )
    if spec.endswith(PTE_SUFFIX):
        from memplan.planner.pte.program import read_program
        from memplan.planner.pte.structure import PteError
        from memplan.viz.report import from_pte

        try:
            with library_warnings_silenced():
                layout = read_program(spec, alignment)
        except PteError as exc:
            raise UsageError(str(exc)) from None
        return from_pte(layout, solver, time_limit_s)
    if memory_map:
        from memplan.experiments.sweep.grid import check_memory_map

        check_memory_map(memory_map, [solver])
    options = {"time_limit_s": time_limit_s, "alignment": alignment, "cat_fusion": cat_fusion, **lowering}
    try:
        return (
            _banked_report(spec, solver, memory_map, options)
            if memory_map
            else _report(spec, solver, options)
        )
    except BankCapacityError as exc:
        data = _report(spec, solver, options)
        data.banked = _shortfall(exc)
        return data


def across_banks(
    spec: str,
    budget: str,
    solver: str,
    time_limit_s: float,
    alignment: int,
    cat_fusion: bool,
    **lowering: Any,
) -> BankedPlan | None:
    """memplan's plan of a model across the banks of `budget` (memory-map syntax), or by how much its
    best plan falls short; None for a `.pte` (its tensors cannot move across banks). A solver that
    cannot choose banks is replaced by bestfit (banked best-fit)."""
    from memplan.experiments.planning import plan_model
    from memplan.experiments.sweep.grid import BANK_SWEEP_SOLVERS

    if spec.endswith(PTE_SUFFIX):
        return None
    solver = solver if solver in BANK_SWEEP_SOLVERS else "bestfit"
    options = {"time_limit_s": time_limit_s, "alignment": alignment, "cat_fusion": cat_fusion, **lowering}
    try:
        planned = plan_model(spec, solver, memory_map=budget, stock=False, **options)
    except BankCapacityError as exc:
        return _shortfall(exc)
    return banked_plan(planned.results, planned.program, planned.methods)


def _report(spec: str, solver: str, options: dict[str, Any]) -> ProgramReport:
    from memplan.experiments.planning import plan_model

    return plan_model(spec, solver, **options).report_data()


def _banked_report(spec: str, solver: str, memory_map: str, options: dict[str, Any]) -> ProgramReport:
    from memplan.experiments.planning import plan_model

    planned = plan_model(spec, solver, memory_map=memory_map, **options)
    data = planned.report_data()
    data.banked = banked_plan(planned.results, planned.program, planned.methods)
    data.source += f", across the banks of --memory-map {memory_map}"
    return data


def _shortfall(exc: BankCapacityError) -> BankedPlan:
    return BankedPlan(short_bank=exc.bank, short_by=exc.missing, proven=exc.proven)


def check_out(path: str) -> Path:
    out = Path(path)
    if out.suffix.lower() not in (".html", ".htm"):
        raise UsageError(f"--out {path!r} must end in .html")
    if not out.parent.is_dir():
        raise UsageError(f"cannot write {path!r}: no folder {str(out.parent)!r}")
    return out


def parse_growth(text: str) -> float:
    """`"5%"` or `"5"` -> 0.05."""
    match = _PERCENT.fullmatch(text)
    if not match:
        raise UsageError(f"--max-growth {text!r} is not a percentage like 5%")
    return float(match.group(1)) / 100


def check_node_data_out(path: str) -> Path:
    out = Path(path)
    if out.suffix.lower() != ".json":
        raise UsageError(f"--model-explorer {path!r} must end in .json")
    if not out.parent.is_dir():
        raise UsageError(f"cannot write {path!r}: no folder {str(out.parent)!r}")
    from memplan.viz.model_explorer import require_explorer

    require_explorer()
    return out


def write_node_data(data: ProgramReport, spec: str, out: Path) -> str:
    """Write the Model Explorer overlays of `data` (and, for a model, the program they describe, as
    `out` with .pte) and say what was written and how to open it."""
    from memplan.experiments.cli.explore import EXTENSION
    from memplan.viz.model_explorer import write_overlays

    pte = Path(spec) if spec.endswith(PTE_SUFFIX) else out.with_suffix(PTE_SUFFIX)
    try:
        if not spec.endswith(PTE_SUFFIX):
            pte.write_bytes(data.pte)
        written = write_overlays(data, out)
    except OSError as exc:
        raise UsageError(f"cannot write {str(out)!r}: {exc.strerror or exc}") from None
    return (
        f"wrote {', '.join(map(str, written))} (node data for {pte}); open them with: model-explorer {pte}"
        f" --extensions={EXTENSION} --node_data_paths={','.join(map(str, written))}"
        f" (or memplan explore {spec})"
    )
