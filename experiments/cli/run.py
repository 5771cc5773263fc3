"""`memplan run`: run someone's export script with memplan planning every program it builds.

    memplan run [--solver cpsat --time-limit 5 --cat-fusion off ...] -- export.py ARGS...
    memplan run [...] -- python export.py ARGS...     (as `py-spy record -- python x.py`)
    memplan run [...] -m package.module ARGS...

As `coverage run` does, the script runs in this process (runpy), as `__main__`, with its own
`sys.argv`; inside it every `to_executorch` plans memory with memplan (memplan.planner.substitute), so
its `.pte` files are memplan's and it writes them where it always does. Its exit code is kept. Then one
table per program built goes to stderr: per method, ExecuTorch's own bytes for the same graph,
memplan's, the saving, proven or not, the levers applied, the planning seconds, and who planned a
method the stock pass had to plan, and why.
"""

from __future__ import annotations

import json
import os
import re
import runpy
import sys
import traceback
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from memplan.errors import UsageError
from memplan.experiments.markdown import markdown_with_notes

USAGE = "memplan run [OPTIONS] -- [python] script.py [ARGS...]  or  memplan run [OPTIONS] -m package.module [ARGS...]"


@dataclass(frozen=True)
class Target:
    """What to run: a script path or a module name, and its arguments."""

    name: str
    args: list[str]
    module: bool


def split(argv: Sequence[str]) -> tuple[list[str], Target | None]:
    """memplan's own options, and the target after `--` or `-m` (or from the first `.py` argument or
    Python interpreter); None when there is none (the options may ask for --help)."""
    argv = list(argv)
    for i, arg in enumerate(argv):
        if arg in ("--", "-m"):
            rest = argv[i + 1 :]
            if not rest:
                raise UsageError(f"nothing to run after {arg!r}; usage: {USAGE}")
            return argv[:i], _target(rest, module=arg == "-m")
        if not arg.startswith("-") and (arg.endswith(".py") or is_interpreter(arg)):
            return argv[:i], _target(argv[i:], module=False)
    return argv, None


def _target(words: list[str], module: bool) -> Target:
    """What `words` run; a leading Python interpreter (`python x.py`, `python -m mod`) names the real
    target, which runs in this process all the same."""
    if module or not is_interpreter(words[0]):
        return Target(words[0], words[1:], module)
    rest = words[1:]
    if rest[:1] == ["-m"] and len(rest) > 1:
        return Target(rest[1], rest[2:], True)
    if rest and not rest[0].startswith("-"):
        return Target(rest[0], rest[1:], False)
    shown = " ".join(words[:2])
    raise UsageError(
        f"{shown!r}: memplan runs the script in its own Python; give {words[0]} a script or -m module"
        f" and no interpreter options; usage: {USAGE}"
    )


_INTERPRETER = re.compile(r"python(\d+(\.\d+)?)?(\.exe)?")


def is_interpreter(word: str) -> bool:
    """`python`, `python3`, `python3.11` (any folder) or this very interpreter, `sys.executable`."""
    if _INTERPRETER.fullmatch(os.path.basename(word)):
        return True
    return bool(sys.executable) and os.path.realpath(word) == os.path.realpath(sys.executable)


def execute(target: Target, options: dict[str, Any], report: str | None = None, quiet: bool = False) -> int:
    """Run `target` under `memplan.substituted(**options)`; print the tables (`quiet`: only the methods
    the stock pass planned, one line each); its exit code."""
    from memplan.planner.substitute import substituted

    if not target.module and not os.path.isfile(target.name):
        raise UsageError(f"no such script: {target.name!r}")
    with substituted(**options) as run:
        code = _run(target)
    text = tables(run.programs)
    for line in stock_planned(run.programs) if quiet and run.programs else [text]:  # none built: said
        print(line, file=sys.stderr)
    if report:
        write_report(report, text, run.programs)
        write_html_reports(report, run.programs, options)
    return code


def _run(target: Target) -> int:
    """The target as `python script.py` / `python -m module` would run it; its exit code."""
    saved_argv, saved_path = list(sys.argv), list(sys.path)
    try:
        if target.module:
            sys.argv = [target.name, *target.args]
            sys.path.insert(0, os.getcwd())
            runpy.run_module(target.name, run_name="__main__", alter_sys=True)
        else:
            sys.argv = [target.name, *target.args]
            sys.path.insert(0, os.path.dirname(os.path.abspath(target.name)))
            runpy.run_path(target.name, run_name="__main__")
        return 0
    except SystemExit as e:
        return _exit_code(e.code)
    except Exception:  # the script's own error: shown as Python shows it, after which the tables follow
        traceback.print_exc()
        return 1
    finally:
        sys.argv, sys.path[:] = saved_argv, saved_path


def _exit_code(code: object) -> int:
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)  # sys.exit("message") prints it and exits 1
    return 1


COLUMNS = (
    "method",
    "stock_bytes",
    "memplan_bytes",
    "saving",
    "proven",
    "levers",
    "planning_seconds",
    "planned_by",
)
NOTE = "not_proven_because"  # under the table, one line per method memplan did not prove

TILING_COLUMNS = ("region", "bands", "extra_macs")
"""With --tiling: the region tiled before lowering, its bands and extra MACs (memplan_bytes is then the
tiled program's arena)."""


def tables(programs: Sequence[Any]) -> str:
    """One Markdown table per program, headed by its name."""
    if not programs:
        return "memplan run: the script built no ExecuTorch program (no to_executorch call)"
    parts = []
    for program in programs:
        columns = [*COLUMNS, *(TILING_COLUMNS if program.tiled else ()), NOTE]
        frame = pd.DataFrame(program.rows(), columns=columns)
        parts.append(f"memplan: {program.name}\n\n{markdown_with_notes(frame, NOTE, ['method'])}\n")
    return "\n".join(parts)


def stock_planned(programs: Sequence[Any]) -> list[str]:
    """One line per method the stock pass planned, with the reason (what `--quiet` still says)."""
    return [
        f"memplan: {program.name}: {m.method} planned by {m.planner}" + (f": {m.note}" if m.note else "")
        for program in programs
        for m in program.fell_back
    ]


def write_report(folder: str, text: str, programs: Sequence[Any]) -> None:
    """`report.md` (the tables) and `report.json` (their rows) in `folder`."""
    out = Path(folder)
    try:
        out.mkdir(parents=True, exist_ok=True)
        (out / "report.md").write_text(text + "\n")
        rows = [{"program": p.name, "rows": p.rows()} for p in programs]
        (out / "report.json").write_text(json.dumps(rows, indent=1) + "\n")
    except OSError as e:
        raise UsageError(f"cannot write the report to {folder!r}: {e.strerror}") from None
    print(f"memplan: report written to {out}/", file=sys.stderr)


def write_html_reports(folder: str, programs: Sequence[Any], options: dict[str, Any]) -> None:
    """`program_N.html` per program built: the interactive report of the program the script got.

    The page is `memplan report` of the built program's bytes (its own layout next to memplan's
    re-plan of it), so it shows exactly what the script wrote. The user's export has already
    succeeded here: a program whose report cannot be made is named with the reason, never raised.
    """
    from memplan import solvers
    from memplan.planner.pte.program import read_program
    from memplan.viz.report import from_pte, write

    solver = options.get("solver") or solvers.DEFAULT_SOLVER
    time_limit_s = options.get("time_limit_s") or solvers.DEFAULT_TIME_LIMIT_S
    for program in programs:
        path = Path(folder) / f"program_{program.index}.html"
        try:
            layout = read_program(bytes(program.program.buffer))
            write(from_pte(layout, solver, time_limit_s), path)
        except Exception as e:  # the export is done; a report is an extra
            print(f"memplan: no report for {program.name}: {type(e).__name__}: {e}", file=sys.stderr)
        else:
            print(f"memplan: interactive report of {program.name}: {path}", file=sys.stderr)
