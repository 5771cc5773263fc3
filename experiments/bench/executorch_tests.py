"""ExecuTorch 1.5.1's own memory-planning tests, run with the stock pass and with `PlannerPass`.

    python -m memplan.experiments.bench.executorch_tests [--files a.py,b.py] [--keep DIR] [--timeout 1800]

The test files ship inside the installed `executorch` wheel (SUITE). Each is
copied twice into a temporary folder: as is (`stock`), and with every
`MemoryPlanningPass(...)` construction and every `class X(MemoryPlanningPass)`
base replaced by `PlannerPass` with the same arguments (`planner`); the
library code that builds a `MemoryPlanningPass` for the caller
(LIBRARY_CONSTRUCTIONS: `banked_memory_planning_pass`, Cadence's
`CadenceMemoryPlanning`) and `ExecutorchBackendConfig`'s default
`memory_planning_pass` (a `MemoryPlanningPass()` built once at import; here a
new `PlannerPass()` per config left at the default) get `PlannerPass` through a
conftest in the `planner` copy. pytest runs each file of each copy on its own (junit XML).

Every test that passes stock and fails with `PlannerPass` is classified by
docs/executorch_tests.md: a documented `difference` (another algorithm's exact
offsets, a removed write-back, ... with the reason), `open` work (a gap an
issue tracks), or else a `bug`. The table lists, per file, the tests passed
with each pass, the failures in each class and the seconds each copy took;
entries of the list whose test now passes are printed as stale.

Both copies get one environment shim (conftest): ExecuTorch's Cadence code
imports `typing.override`, which Python 3.11 lacks; it is set to
`typing_extensions.override`.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import executorch
import pandas as pd

from memplan.experiments.cli.tables import markdown

SUITE = (
    "exir/tests/test_memory_planning.py",
    "exir/tests/test_banked_memory_planning.py",
    "exir/emit/test/test_emit.py",
    "exir/tests/test_propagate_device_pass.py",
    "backends/cadence/aot/tests/test_memory_passes.py",
    "extension/pybindings/test/test_pybindings.py",
    "exir/program/test/test_program.py",
    "exir/tests/test_passes.py",
    "exir/tests/test_remove_view_copy.py",
    "exir/tests/test_prune_empty_tensors_pass.py",
)
LIBRARY_CONSTRUCTIONS = (
    "executorch.exir.banked_memory_planning",
    "executorch.backends.cadence.aot.memory_planning",
)
DIFFERENCES = Path(__file__).resolve().parents[2] / "docs" / "executorch_tests.md"
CLASSES = ("difference", "open")  # what docs/executorch_tests.md may call a failure; anything else is a bug

_CONSTRUCTION = re.compile(r"(?<![\w.])MemoryPlanningPass(?=\s*\()")
_SUBCLASS = re.compile(r"(\bclass\s+\w+\s*\(\s*)MemoryPlanningPass(?=\s*[,)])")
_IMPORT = "from memplan import PlannerPass  # executorch_tests: the substitution\n"
_SHIM = """\
import typing

import typing_extensions

if not hasattr(typing, "override"):  # ExecuTorch's Cadence code imports it; Python 3.11 lacks it
    typing.override = typing_extensions.override
"""
_PATCH = """
import importlib

from executorch.exir.capture._config import ExecutorchBackendConfig

from memplan import PlannerPass

for _name in {modules!r}:
    importlib.import_module(_name).MemoryPlanningPass = PlannerPass

_STOCK_DEFAULT = ExecutorchBackendConfig.__dataclass_fields__["memory_planning_pass"].default
_init = ExecutorchBackendConfig.__init__


def _with_planner_pass(self, *args, **kwargs):
    _init(self, *args, **kwargs)
    if self.memory_planning_pass is _STOCK_DEFAULT:  # the config's own MemoryPlanningPass() default
        self.memory_planning_pass = PlannerPass()


ExecutorchBackendConfig.__init__ = _with_planner_pass
"""


@dataclass(frozen=True)
class Entry:
    """One failure docs/executorch_tests.md explains."""

    test: str  # "wheel/path.py::Class::test"
    kind: str  # one of CLASSES
    reason: str


@dataclass
class FileResult:
    """One test file run with the stock pass and with PlannerPass."""

    path: str
    substitutions: int
    stock: dict[str, str] = field(default_factory=dict)  # test -> passed / failed / skipped
    planner: dict[str, str] = field(default_factory=dict)
    stock_seconds: float = 0.0
    planner_seconds: float = 0.0

    def regressions(self) -> list[str]:
        """Tests that pass stock and do not pass with PlannerPass (a missing result counts as failed)."""
        return sorted(t for t, o in self.stock.items() if o == "passed" and self.planner.get(t) != "passed")


def substitute(source: str) -> tuple[str, int]:
    """`source` with `PlannerPass` in place of each `MemoryPlanningPass(` call and subclass base."""
    text, calls = _CONSTRUCTION.subn("PlannerPass", source)
    text, bases = _SUBCLASS.subn(r"\1PlannerPass", text)
    if calls + bases:
        text = _with_import(text)
    return text, calls + bases


def _with_import(text: str) -> str:
    """The import placed after any `from __future__` line (which must stay first)."""
    lines = text.splitlines(keepends=True)
    last_future = max((i for i, line in enumerate(lines) if line.startswith("from __future__")), default=-1)
    lines.insert(last_future + 1, _IMPORT)
    return "".join(lines)


def copy_name(path: str) -> str:
    """The file name of `path`'s copy: unique and collected by pytest."""
    return "test__" + path.replace("/", "__")


def prepare(folder: Path, files: Sequence[str], *, planner: bool) -> dict[str, int]:
    """Copy `files` from the wheel into `folder` (substituted when `planner`); path -> substitutions."""
    folder.mkdir(parents=True, exist_ok=True)
    root = Path(next(iter(executorch.__path__)))  # a namespace package: no __file__
    conftest = _SHIM + (_PATCH.format(modules=LIBRARY_CONSTRUCTIONS) if planner else "")
    (folder / "conftest.py").write_text(conftest)
    counts = {}
    for path in files:
        source = (root / path).read_text()
        text, counts[path] = substitute(source) if planner else (source, 0)
        (folder / copy_name(path)).write_text(text)
    return counts


def run_file(folder: Path, path: str, timeout_s: float, reuse: bool = False) -> tuple[dict[str, str], float]:
    """Outcome of every test of one copied file, and the seconds pytest took (its tests' when `reuse`d)."""
    report = folder / (copy_name(path) + ".xml")
    if reuse and report.exists():
        return outcomes(report.read_text(), path), reported_seconds(report.read_text())
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={report}"]
    started = time.perf_counter()
    try:
        subprocess.run(
            [*command, copy_name(path)], cwd=folder, timeout=timeout_s, capture_output=True, check=False
        )
    except subprocess.TimeoutExpired:
        pass  # the tests reported so far count; the rest are missing, so not passed
    seconds = time.perf_counter() - started
    return (outcomes(report.read_text(), path) if report.exists() else {}), seconds


def outcomes(junit_xml: str, path: str) -> dict[str, str]:
    """Test id ("path::Class::test") -> passed / failed / skipped, from pytest's junit XML."""
    found = {}
    for case in ET.fromstring(junit_xml).iter("testcase"):
        cls = case.get("classname", "").rsplit(".", 1)[-1]
        prefix = f"{path}::{cls}::" if cls and not cls.startswith("test__") else f"{path}::"
        kinds = {child.tag for child in case}
        outcome = "failed" if kinds & {"failure", "error"} else "skipped" if "skipped" in kinds else "passed"
        found[prefix + case.get("name", "?")] = outcome
    return found


def reported_seconds(junit_xml: str) -> float:
    """The seconds the tests of a junit XML report took together."""
    return sum(float(case.get("time", 0)) for case in ET.fromstring(junit_xml).iter("testcase"))


def documented(text: str) -> dict[str, Entry]:
    """The failures docs/executorch_tests.md lists: rows `| `test` | kind | reason |`."""
    entries = {}
    for number, line in enumerate(text.splitlines(), 1):
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 3 or "::" not in cells[0]:
            continue
        test, kind, reason = cells[0].strip("`"), cells[1], cells[2]
        if kind not in CLASSES:
            raise ValueError(f"docs/executorch_tests.md line {number}: kind {kind!r} is not one of {CLASSES}")
        entries[test] = Entry(test, kind, reason)
    return entries


def classify(test: str, entries: Mapping[str, Entry]) -> str:
    """`difference`, `open` or `bug`."""
    entry = entries.get(test)
    return entry.kind if entry else "bug"


def stale(results: Iterable[FileResult], entries: Mapping[str, Entry]) -> list[str]:
    """Listed tests that were run and did not fail with PlannerPass (the list should drop them)."""
    ran = {t: o for r in results for t, o in r.planner.items()}
    return sorted(t for t in entries if t in ran and ran[t] != "failed")


def table(results: Sequence[FileResult], entries: Mapping[str, Entry]) -> pd.DataFrame:
    rows = []
    for r in results:
        kinds = [classify(t, entries) for t in r.regressions()]
        rows.append(
            {
                "file": r.path,
                "substituted": r.substitutions,
                "passed stock": sum(o == "passed" for o in r.stock.values()),
                "passed PlannerPass": sum(o == "passed" for o in r.planner.values()),
                "differences": kinds.count("difference"),
                "open": kinds.count("open"),
                "bugs": kinds.count("bug"),
                "stock seconds": round(r.stock_seconds),
                "PlannerPass seconds": round(r.planner_seconds),
            }
        )
    df = pd.DataFrame(rows)
    total = {c: df[c].sum() if c != "file" else "total" for c in df.columns}
    return pd.concat([df, pd.DataFrame([total])], ignore_index=True)


def run(files: Sequence[str], folder: Path, timeout_s: float, *, reuse: bool = False) -> list[FileResult]:
    """Both copies of `files` under `folder`, one pytest run per file and copy.

    `reuse` keeps the reports a previous run left in `folder` instead of running those copies again.
    """
    prepare(folder / "stock", files, planner=False)
    counts = prepare(folder / "planner", files, planner=True)
    results = []
    for path in files:
        result = FileResult(path, counts[path])
        result.stock, result.stock_seconds = run_file(folder / "stock", path, timeout_s, reuse)
        result.planner, result.planner_seconds = run_file(folder / "planner", path, timeout_s, reuse)
        results.append(result)
        print(f"{path}: {_counts(result)}", file=sys.stderr, flush=True)
    return results


def _counts(result: FileResult) -> str:
    passed = sum(o == "passed" for o in result.stock.values())
    return f"stock {passed} passed, PlannerPass {sum(o == 'passed' for o in result.planner.values())} passed"


def failures(results: Sequence[FileResult], entries: Mapping[str, Entry]) -> pd.DataFrame:
    rows = [
        {
            "test": test,
            "class": classify(test, entries),
            "reason": entries[test].reason if test in entries else "",
        }
        for r in results
        for test in r.regressions()
    ]
    return pd.DataFrame(rows, columns=["test", "class", "reason"])


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--files", help="comma-separated wheel paths (default: all of SUITE)")
    parser.add_argument("--keep", type=Path, help="run in this folder and keep it (default: a temporary one)")
    parser.add_argument("--timeout", type=float, default=1800.0, help="seconds per file and copy")
    parser.add_argument("--reuse", action="store_true", help="with --keep: keep the reports found there")
    args = parser.parse_args(argv)
    files = args.files.split(",") if args.files else list(SUITE)
    unknown = [f for f in files if f not in SUITE]
    if unknown:
        parser.error(f"not in SUITE: {', '.join(unknown)}")
    entries = documented(DIFFERENCES.read_text())
    if args.keep:
        results = run(files, args.keep, args.timeout, reuse=args.reuse)
    else:
        with tempfile.TemporaryDirectory(prefix="executorch_tests_") as tmp:
            results = run(files, Path(tmp), args.timeout)
    print(markdown(table(results, entries)))
    broken = failures(results, entries)
    if len(broken):
        print()
        print(markdown(broken))
    old = stale(results, entries)
    if old:
        print("\nlisted in docs/executorch_tests.md but not failing:", *old, sep="\n  ")
    return 1 if (broken["class"] == "bug").any() else 0


if __name__ == "__main__":
    sys.exit(main())
