"""Exact planning besides CP-SAT, and what exact solvers share: the MILP solver, MiniMalloc's canonical
search, the split of a problem into independent parts, and the per-pool bounds they prove against."""
