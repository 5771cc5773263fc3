"""Running the `memplan` command line inside the test process (faster than a subprocess)."""

from __future__ import annotations

import pytest

from memplan.experiments.cli import main as cli


def run_cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    """Exit code, stdout and stderr of `memplan argv`."""
    try:
        code = cli.main(argv)
    except SystemExit as exc:
        code = exc.code  # type: ignore[assignment]
    out, err = capsys.readouterr()
    return code, out, err
