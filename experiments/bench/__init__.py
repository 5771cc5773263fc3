"""Benchmark scripts: each prints tables (`python -m memplan.experiments.bench.<name> --help`).

They build their flags with `memplan.experiments.flags` and print with `memplan.experiments.markdown`;
no script imports another.
"""
