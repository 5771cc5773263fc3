"""Model zoo, sweeps, benchmarks and the `memplan` command line."""

if __name__ != "memplan.experiments":  # pragma: no cover - only a wrong sys.path gets here
    raise ImportError(
        f"memplan's experiments/ directory was imported as {__name__!r}; it is the package"
        " memplan.experiments (install memplan with pip and import memplan.experiments)"
    )
