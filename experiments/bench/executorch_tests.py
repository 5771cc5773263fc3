"""ExecuTorch 1.5.1's own memory-planning tests, run with the stock pass, with `PlannerPass`, and with memplan's algorithm.

    python -m memplan.experiments.bench.executorch_tests [--files a.py,b.py] [--copies PlannerPass,slice_noop]
                                                         [--keep DIR [--reuse]] [--timeout 1800]

The test files ship inside the installed `executorch` wheel (SUITE). Each is
copied into a temporary folder three times (COPIES):

- `stock`: as is;
- `PlannerPass`: every `MemoryPlanningPass(...)` construction and every
  `class X(MemoryPlanningPass)` base replaced by `PlannerPass` with the same
  arguments; the library code that builds a `MemoryPlanningPass` for the
  caller (LIBRARY_CONSTRUCTIONS: `banked_memory_planning_pass`, Cadence's
  `CadenceMemoryPlanning`) and `ExecutorchBackendConfig`'s default
  `memory_planning_pass` (a `MemoryPlanningPass()` built once at import; here
  a new `PlannerPass()` per config left at the default) get it through the
  copy's conftest;
- `slice_noop`, `slice_noop_off`: the `PlannerPass` copy with that lever
  given explicitly (`PlannerPass(slice_noop=True)` / `False` wherever the
  caller does not say), so a run with and without slice no-ops stays
  reproducible whatever the default is (PLANNER_VARIANTS); run only when
  asked for with `--copies`. A failure of a variant that docs/executorch_tests.md
  lists for `PlannerPass` is classified as listed there;
- `algorithm`: the stock pass kept, and memplan's algorithm
  (`MemplanAlgorithm()`, memplan.planner.algorithms.memplan_algorithm) put in place of `greedy`
  in every `MemoryPlanningAlgorithmSuite` (the default suite included).

pytest runs each file of each copy on its own (junit XML). Every test that
passes stock and fails in another copy is classified by
docs/executorch_tests.md: a documented `difference` (another algorithm's exact
offsets, a removed write-back, ... with the reason), `open` work (a gap an
issue tracks), or else a `bug`. The table lists, per file, the tests passed in
each copy, the failures in each class and the seconds each copy took; entries
of the list whose test now passes are printed as stale.

Every copy gets one environment shim (conftest): ExecuTorch's Cadence code
imports `typing.override`, which Python 3.11 lacks; it is set to
`typing_extensions.override`.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import executorch
import pandas as pd

from memplan.experiments.markdown import markdown

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
COPIES = ("stock", "PlannerPass", "slice_noop", "slice_noop_off", "algorithm")
DEFAULT_COPIES = ("PlannerPass", "algorithm")  # besides stock
# Copies that are the PlannerPass copy with these keyword arguments wherever the caller gives none.
PLANNER_VARIANTS: dict[str, dict[str, object]] = {
    "slice_noop": {"slice_noop": True},
    "slice_noop_off": {"slice_noop": False},
}

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
_VARIANT = """
import memplan
from memplan.planner.pass_ import PlannerPass as _PlannerPass


class PlannerPass(_PlannerPass):
    \"\"\"PlannerPass with {kwargs!r} unless the caller gives them.\"\"\"

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **{{**{kwargs!r}, **kwargs}})


memplan.PlannerPass = PlannerPass  # what the substituted imports and the patch below pick up
"""
_ALGORITHM_PATCH = """
from executorch.exir import memory_planning
from executorch.exir.capture._config import ExecutorchBackendConfig

from memplan.planner.algorithms.memplan_algorithm import MemplanAlgorithm

_init = memory_planning.MemoryPlanningAlgorithmSuite.__init__


def _with_memplan(self, algo_list=None):
    _init(self, algo_list)
    self.algo_list = [MemplanAlgorithm() if a is memory_planning.greedy else a for a in self.algo_list]


memory_planning.MemoryPlanningAlgorithmSuite.__init__ = _with_memplan
# ExecutorchBackendConfig's default pass was built (with its suite) when executorch.exir was imported.
_default = ExecutorchBackendConfig.__dataclass_fields__["memory_planning_pass"].default
_default.memory_planning_algo.algo_list = [MemplanAlgorithm()]
"""


@dataclass(frozen=True)
class Entry:
    """One failure docs/executorch_tests.md explains."""

    test: str  # "wheel/path.py::Class::test"
    copy: str  # one of COPIES[1:]
    kind: str  # one of CLASSES
    reason: str


@dataclass
class FileResult:
    """One test file run in each copy."""

    path: str
    substitutions: int
    outcomes: dict[str, dict[str, str]] = field(default_factory=dict)  # copy -> test -> passed/failed/skipped
    seconds: dict[str, float] = field(default_factory=dict)  # copy -> seconds

    def passed(self, copy: str) -> int:
        return sum(o == "passed" for o in self.outcomes.get(copy, {}).values())

    def regressions(self, copy: str) -> list[str]:
        """Tests that pass stock and do not pass in `copy` (a missing result counts as failed)."""
        mine = self.outcomes.get(copy, {})
        return sorted(
            t for t, o in self.outcomes.get("stock", {}).items() if o == "passed" and mine.get(t) != "passed"
        )


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


def prepare(folder: Path, files: Sequence[str], copy: str) -> dict[str, int]:
    """Copy `files` from the wheel into `folder` as `copy` wants them; path -> substitutions."""
    folder.mkdir(parents=True, exist_ok=True)
    root = Path(next(iter(executorch.__path__)))  # a namespace package: no __file__
    (folder / "conftest.py").write_text(_SHIM + conftest_patch(copy))
    counts = {}
    for path in files:
        source = (root / path).read_text()
        text, counts[path] = substitute(source) if _planner_copy(copy) else (source, 0)
        (folder / copy_name(path)).write_text(text)
    return counts


def _planner_copy(copy: str) -> bool:
    """Whether `copy` substitutes PlannerPass (itself or one of its variants)."""
    return copy == "PlannerPass" or copy in PLANNER_VARIANTS


def conftest_patch(copy: str) -> str:
    """What the copy's conftest does besides the shim."""
    planner = _PATCH.format(modules=LIBRARY_CONSTRUCTIONS)
    if copy in PLANNER_VARIANTS:
        return _VARIANT.format(kwargs=PLANNER_VARIANTS[copy]) + planner
    return {"PlannerPass": planner, "algorithm": _ALGORITHM_PATCH}.get(copy, "")


def run_file(folder: Path, path: str, timeout_s: float, reuse: bool = False) -> tuple[dict[str, str], float]:
    """Outcome of every test of one copied file, and the seconds its tests took (pytest's junit times).

    `reuse` reads a report a previous run left instead of running the file again.
    """
    report = folder / (copy_name(path) + ".xml")
    if not (reuse and report.exists()):
        report.unlink(missing_ok=True)
        command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={report}"]
        try:
            subprocess.run(
                [*command, copy_name(path)], cwd=folder, timeout=timeout_s, capture_output=True, check=False
            )
        except subprocess.TimeoutExpired:
            pass  # no report: every test counts as not passed
    if not report.exists():
        return {}, 0.0
    text = report.read_text()
    return outcomes(text, path), reported_seconds(text)


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


def documented(text: str) -> dict[tuple[str, str], Entry]:
    """The failures docs/executorch_tests.md lists: rows `| `test` | copy | kind | reason |`, by (copy, test)."""
    entries = {}
    for number, line in enumerate(text.splitlines(), 1):
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 4 or "::" not in cells[0]:
            continue
        test, copy, kind, reason = cells[0].strip("`"), cells[1], cells[2], cells[3]
        if copy not in COPIES[1:]:
            raise ValueError(
                f"docs/executorch_tests.md line {number}: copy {copy!r} is not one of {COPIES[1:]}"
            )
        if kind not in CLASSES:
            raise ValueError(f"docs/executorch_tests.md line {number}: kind {kind!r} is not one of {CLASSES}")
        entries[(copy, test)] = Entry(test, copy, kind, reason)
    return entries


def listed(copy: str, test: str, entries: Mapping[tuple[str, str], Entry]) -> Entry | None:
    """The entry explaining `test`'s failure in `copy`; a PlannerPass variant falls back on PlannerPass's."""
    entry = entries.get((copy, test))
    if entry is None and copy in PLANNER_VARIANTS:
        entry = entries.get(("PlannerPass", test))
    return entry


def classify(copy: str, test: str, entries: Mapping[tuple[str, str], Entry]) -> str:
    """`difference`, `open` or `bug`."""
    entry = listed(copy, test, entries)
    return entry.kind if entry else "bug"


def stale(results: Iterable[FileResult], entries: Mapping[tuple[str, str], Entry]) -> list[tuple[str, str]]:
    """Listed (copy, test) pairs that were run and did not fail (the list should drop them)."""
    ran = {(c, t): o for r in results for c, found in r.outcomes.items() for t, o in found.items()}
    return sorted(key for key in entries if key in ran and ran[key] != "failed")


def table(results: Sequence[FileResult], entries: Mapping[tuple[str, str], Entry]) -> pd.DataFrame:
    """Per file: tests passed in each copy, each copy's failures by class, and the seconds each copy took."""
    copies = [c for c in COPIES if any(c in r.outcomes for r in results)]
    rows = []
    for r in results:
        row: dict[str, object] = {"file": r.path, "substituted": r.substitutions}
        for copy in copies:
            row[f"passed {copy}"] = r.passed(copy)
            if copy != "stock":
                kinds = [classify(copy, t, entries) for t in r.regressions(copy)]
                row[f"{copy} differences"] = kinds.count("difference")
                row[f"{copy} open"] = kinds.count("open")
                row[f"{copy} bugs"] = kinds.count("bug")
        for copy in copies:
            row[f"{copy} seconds"] = round(r.seconds.get(copy, 0.0))
        rows.append(row)
    df = pd.DataFrame(rows)
    total = {c: df[c].sum() if c != "file" else "total" for c in df.columns}
    return pd.concat([df, pd.DataFrame([total])], ignore_index=True)


def failures(results: Sequence[FileResult], entries: Mapping[tuple[str, str], Entry]) -> pd.DataFrame:
    """Every regression: test, copy, class and the documented reason."""
    rows = [
        {
            "test": test,
            "copy": copy,
            "class": classify(copy, test, entries),
            "reason": entry.reason if (entry := listed(copy, test, entries)) else "",
        }
        for r in results
        for copy in r.outcomes
        if copy != "stock"
        for test in r.regressions(copy)
    ]
    return pd.DataFrame(rows, columns=["test", "copy", "class", "reason"])


def run(
    files: Sequence[str],
    folder: Path,
    timeout_s: float,
    copies: Sequence[str] = DEFAULT_COPIES,
    *,
    reuse: bool = False,
) -> list[FileResult]:
    """The copies of `files` under `folder`, one pytest run per file and copy (stock always).

    `reuse` keeps the reports a previous run left in `folder` instead of running those copies again.
    """
    copies = ["stock", *(c for c in copies if c != "stock")]
    counts = {copy: prepare(folder / copy, files, copy) for copy in copies}
    results = []
    for path in files:
        result = FileResult(
            path, max((counts[c].get(path, 0) for c in copies if _planner_copy(c)), default=0)
        )
        for copy in copies:
            result.outcomes[copy], result.seconds[copy] = run_file(folder / copy, path, timeout_s, reuse)
        results.append(result)
        summary = ", ".join(f"{copy} {result.passed(copy)}" for copy in copies)
        print(f"{path}: passed {summary}", file=sys.stderr, flush=True)
    return results


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--files", help="comma-separated wheel paths (default: all of SUITE)")
    parser.add_argument(
        "--copies",
        default=",".join(DEFAULT_COPIES),
        help=f"copies besides stock, of {', '.join(COPIES[1:])} (default: {','.join(DEFAULT_COPIES)})",
    )
    parser.add_argument("--keep", type=Path, help="run in this folder and keep it (default: a temporary one)")
    parser.add_argument("--timeout", type=float, default=1800.0, help="seconds per file and copy")
    parser.add_argument("--reuse", action="store_true", help="with --keep: keep the reports found there")
    args = parser.parse_args(argv)
    files = args.files.split(",") if args.files else list(SUITE)
    unknown = [f for f in files if f not in SUITE]
    if unknown:
        parser.error(f"not in SUITE: {', '.join(unknown)}")
    copies = args.copies.split(",")
    if wrong := [c for c in copies if c not in COPIES]:
        parser.error(f"not a copy: {', '.join(wrong)} (copies: {', '.join(COPIES)})")
    entries = documented(DIFFERENCES.read_text())
    if args.keep:
        results = run(files, args.keep, args.timeout, copies, reuse=args.reuse)
    else:
        with tempfile.TemporaryDirectory(prefix="executorch_tests_") as tmp:
            results = run(files, Path(tmp), args.timeout, copies)
    print(markdown(table(results, entries)))
    broken = failures(results, entries)
    if len(broken):
        print()
        print(markdown(broken))
    old = stale(results, entries)
    if old:
        print(
            "\nlisted in docs/executorch_tests.md but not failing:",
            *(f"{c}: {t}" for c, t in old),
            sep="\n  ",
        )
    return 1 if (broken["class"] == "bug").any() else 0


if __name__ == "__main__":
    sys.exit(main())
