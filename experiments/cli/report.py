"""`memplan report` and `memplan diff`: a program (zoo name, .pt2, file.py:factory or .pte) as an
interactive HTML report, and two programs compared.

The report itself is memplan.viz.report; here a program spec becomes its data: a `.pte` is read
(memplan.planner.pte) and compared with memplan's re-plan of it, anything else is planned with
`memplan.plan_model` next to ExecuTorch's stock pass.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from memplan.errors import UsageError
from memplan.viz.report import ProgramReport

PTE_SUFFIX = ".pte"
_PERCENT = re.compile(r"\s*([0-9]+(?:\.[0-9]+)?)\s*%?\s*")


def program_report(
    spec: str, solver: str, time_limit_s: float, alignment: int, cat_fusion: bool, **lowering: Any
) -> ProgramReport:
    """The report data of one program spec."""
    from memplan.experiments.zoo.lowering import library_warnings_silenced

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
    from memplan.experiments.planning import plan_model

    planned = plan_model(
        spec, solver, time_limit_s=time_limit_s, alignment=alignment, cat_fusion=cat_fusion, **lowering
    )
    return planned.report_data()


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
