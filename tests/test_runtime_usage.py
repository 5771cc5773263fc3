"""No code, test, doc or notebook chains `load_program(...).load_method(...)`: the temporary `Program`
is freed at once and its method, run later, crashes the interpreter (a segmentation fault on larger
programs; ExecuTorch's Python runtime does not keep the program alive for its methods)."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FOLDERS = ("memplan", "planner", "solvers", "viz", "experiments", "tests", "docs", "notebooks")
SUFFIXES = (".py", ".md", ".ipynb")
# load_program( arguments, one level of parentheses inside ) then .load_method, across line breaks too
CHAINED = re.compile(r"load_program\((?:[^()]|\([^()]*\))*\)\s*\.load_method\(")


def _sources() -> list[Path]:
    files = [REPO / "README.md"]
    for folder in FOLDERS:
        files += [p for p in (REPO / folder).rglob("*") if p.suffix in SUFFIXES and p.is_file()]
    return [p for p in files if p != Path(__file__).resolve()]


def test_the_pattern_is_found_where_it_is_written() -> None:
    assert CHAINED.search('m = Runtime.get().load_program(open("x.pte", "rb").read()).load_method("f")')
    assert not CHAINED.search('p = Runtime.get().load_program(b)\nm = p.load_method("forward")')


def test_every_program_stays_alive_while_its_methods_run() -> None:
    sources = _sources()
    assert len(sources) > 100, f"found only {len(sources)} files under {REPO}"
    chained = [
        f"{path.relative_to(REPO)}:{path.read_text(errors='replace')[: m.start()].count(chr(10)) + 1}"
        for path in sources
        for m in CHAINED.finditer(path.read_text(errors="replace"))
    ]
    assert not chained, (
        f"load_program(...).load_method(...) chained (keep the Program in a variable): {chained}"
    )
