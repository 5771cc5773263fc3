"""ExecuTorch memory-planning algorithms and memplan: a given algorithm read as a memplan problem
(`translate`), run as given (`given`), and memplan's solvers as an algorithm (`memplan_algorithm`)."""
