"""The README's example runs as written: nn.Module -> planned .pte -> executorch.runtime, vs the stock planner."""

from __future__ import annotations

import contextlib
import io
import re
import warnings
from pathlib import Path

README = Path(__file__).resolve().parents[2] / "README.md"


def example_source() -> str:
    text = README.read_text()
    match = re.search(r"<!-- readme-example -->\s*```python\n(.*?)```", text, re.S)
    assert match, "README.md lost its <!-- readme-example --> block"
    return match.group(1)


def test_the_readme_example_plans_runs_and_beats_the_stock_planner(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    printed = io.StringIO()
    with warnings.catch_warnings(), contextlib.redirect_stdout(printed):
        warnings.simplefilter("ignore")
        exec(compile(example_source(), str(README), "exec"), {"__name__": "readme"})  # noqa: S102
    stock, planned = (
        int(n.replace(",", "")) for n in re.findall(r"(?:stock|memplan) ([\d,]+) B", printed.getvalue())
    )
    assert planned < stock
    assert (tmp_path / "three_branch.pte").stat().st_size > 0
    # the numbers quoted in the README's comment are the ones the example prints
    assert f"# {stock:,} B vs {planned:,} B" in example_source()
