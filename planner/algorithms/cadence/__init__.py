"""Cadence (backends/cadence/aot) memory planning with memplan: its memories and placement constraints
as a memplan problem (`problem_of`), and memplan's solvers as a Cadence `MemoryPlanningAlgo` (`algo`)."""
