"""memplan inside someone else's export: every `MemoryPlanningPass` a flow builds becomes `PlannerPass`.

`substituted(...)` (`memplan.substituted`, and `memplan run` on the command line) wraps ExecuTorch's
one planning site, `EdgeProgramManager.to_executorch` (session); each stock pass is swapped for a
`PlannerPass` with its own arguments (swap), guarded method by method with the stock pass as the
fallback (guard) on a copy of the edge programs taken first (snapshot); `programs` holds what
each program got (results).
"""

from memplan.planner.substitute.results import MethodRow, ProgramResult
from memplan.planner.substitute.session import Substitution, substituted

__all__ = ["MethodRow", "ProgramResult", "Substitution", "substituted"]
