"""Everything that touches ExecuTorch: extraction, the pass, plan writing, cat fusion, shared state.

Private ExecuTorch names are imported only in `memplan.planner.et.compat`.
"""
