"""Benchmark scripts: each prints tables (`python -m memplan.experiments.bench.<name> --help`).

They build their flags with `memplan.experiments.cli.args` and print with `memplan.experiments.cli.tables`;
no script imports another.
"""
