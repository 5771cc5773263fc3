"""The problem model and what speaks it without ExecuTorch: `problem` (imports nothing of
memplan), `io` (MiniMalloc CSV, JSON), `generate`. ExecuTorch code lives in `memplan.planner.et`."""

if __name__ != "memplan.planner":  # pragma: no cover - only a wrong sys.path gets here
    raise ImportError(
        f"memplan's planner/ directory was imported as {__name__!r}; it is the package"
        " memplan.planner (install memplan with pip and import memplan.planner)"
    )
