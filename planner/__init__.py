"""The ExecuTorch layer: extract a Problem from an edge program, plan it with memplan's solvers, apply it.

`pass_` (the drop-in `MemoryPlanningPass`) runs the steps: `extract` (lifetimes, sizes, pools with
ExecuTorch's own semantics), the levers that reshape the problem — `cat` (cat fusion),
`state_in_place` (a method's mutable state written where it lives, no write-back copy),
`cross_method_state` (state that several methods of one program share sits at one offset in each),
`banks` (memory maps) — then `apply` (offsets into TensorSpecs, after the validator) and `verify`.
`pte` and `replan` read and re-plan built `.pte` programs. Private ExecuTorch names are imported
only in `compat`.
"""

if __name__ != "memplan.planner":  # pragma: no cover - only a wrong sys.path gets here
    raise ImportError(
        f"memplan's planner/ directory was imported as {__name__!r}; it is the package"
        " memplan.planner (install memplan with pip and import memplan.planner)"
    )

from memplan.planner import import_noise  # noqa: E402 - before anything imports torch or torchao

import_noise.silence()
