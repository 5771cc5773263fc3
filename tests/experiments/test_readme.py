"""The README's example runs as written: nn.Module -> planned .pte -> executorch.runtime, vs the stock planner."""

from __future__ import annotations

import contextlib
import io
import re
import warnings
from pathlib import Path

README = Path(__file__).resolve().parents[2] / "README.md"


def example_source(marker: str = "readme-example") -> str:
    text = README.read_text()
    match = re.search(rf"<!-- {marker} -->\s*```python\n(.*?)```", text, re.S)
    assert match, f"README.md lost its <!-- {marker} --> block"
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


def test_the_readme_solver_example_reads_the_shipped_benchmark_and_gives_the_values_it_quotes(
    tmp_path, monkeypatch
):
    """Run from a folder outside the checkout: the MiniMalloc file comes with the package, not from beside it."""
    monkeypatch.chdir(tmp_path)
    source = example_source("readme-solvers-example")
    *body, last = source.strip().splitlines()
    expression, quoted = last.split("#")
    scope: dict = {"__name__": "readme"}
    exec(compile("\n".join(body), str(README), "exec"), scope)  # noqa: S102
    assert repr(eval(expression, scope)) == f"({quoted.strip().strip('()')})"  # noqa: S307
