"""The ExecuTorch layer: extract a Problem from an edge program, plan it with memplan's solvers, apply it.

`pass_` (the drop-in `MemoryPlanningPass`) composes the stages in `stages/` (extract -> levers ->
solve -> apply -> verify, and the state several methods share). Below them: `levers/` (cat fusion,
state in place, slice no-ops: one protocol, one refusal vocabulary, shared graph facts), `algorithms/`
(ExecuTorch's algorithms translated, run as given, and memplan's solvers as one), `graph/` (a graph's
tensors as a Problem, the signature ExecuTorch's helpers read), `memory/` (memory maps' banks, device
arenas, the bytes instructions move) and `cadence/` (Cadence's algorithm). `pte/` reads, checks and
re-plans built `.pte` programs. Private ExecuTorch names are imported only in `compat`.
"""

if __name__ != "memplan.planner":  # pragma: no cover - only a wrong sys.path gets here
    raise ImportError(
        f"memplan's planner/ directory was imported as {__name__!r}; it is the package"
        " memplan.planner (install memplan with pip and import memplan.planner)"
    )

from memplan.planner import import_noise  # noqa: E402 - before anything imports torch or torchao

import_noise.silence()
