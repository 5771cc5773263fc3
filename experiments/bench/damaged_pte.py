"""`memplan inspect` and `memplan replan --check` on damaged and hostile `.pte` files, every outcome counted.

    python -m memplan.experiments.bench.damaged_pte [--models cat_seed,multi_method_cache,ds_cnn_xnnpack,lstm]
        [--per-kind 20] [--seed 0] [--commands inspect,replan] [--solver bestfit] [--jobs 2]

Each model is lowered with ExecuTorch's stock planner; from its bytes come damaged copies (bit flips,
truncations, a stretch of random bytes, edits of the flatbuffer and extended headers), and beside them
hostile paths (an empty file, a directory, a symlink loop, a missing file). Every file goes through
every command in a worker process, so an abort in native code is counted instead of ending the run.
Outcomes: `ok` (exit 0), `clean error` (exit 2, one `memplan: error:` line and nothing else),
`failure` (exit 1 with one error line: memplan's own fault, e.g. a re-planned program that runs
differently), `unclear` (any other exit or message), `traceback` (an exception escaped) and `abort`
(the worker died). Prints one row per command and kind, then the first few failures and worse; exits 1
when any run was unclear, a traceback or an abort.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import random
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

DEFAULT_MODELS = (
    "cat_seed",
    "multi_method_cache",
    "ds_cnn_xnnpack",
    "lstm",
)  # lstm: replan shrinks it, so --check runs
KINDS = ("bit flips", "truncation", "random bytes", "header edit", "hostile path")
OUTCOMES = ("ok", "clean error", "failure", "unclear", "traceback", "abort")
BAD_OUTCOMES = OUTCOMES[3:]
COMMANDS = ("inspect", "replan")
TIME_LIMIT_S = 1.0
FLATBUFFER_ID = slice(4, 8)  # "ET12" after the root table offset
EXTENDED_HEADER = 8  # "eh00", length (u32), program size, segment base offset, segment data size (u64)


@dataclass(frozen=True)
class Case:
    """One file (or path) given to one command."""

    model: str
    kind: str
    label: str
    path: str
    command: str

    def argv(self, run: Run) -> list[str]:
        if self.command == "inspect":
            return ["inspect", self.path]
        out = os.path.join(run.out_folder, f"{self.model}-{Path(self.path).name}")
        return [
            "replan",
            self.path,
            "--out",
            out,
            "--solver",
            run.solver,
            "--time-limit",
            f"{run.time_limit_s}",
            "--check",
        ]


@dataclass(frozen=True)
class Run:
    """How every case of one bench runs: where replan writes, with which solver and time limit."""

    out_folder: str
    solver: str
    time_limit_s: float


def damaged_copies(data: bytes, per_kind: int, rng: random.Random) -> list[tuple[str, str, bytes]]:
    """(kind, label, bytes) of `per_kind` damaged copies of a program per byte-level kind."""
    copies = []
    for _ in range(per_kind):
        flips = rng.choice((1, 1, 2, 4, 16))
        damaged = bytearray(data)
        for _ in range(flips):
            position = rng.randrange(len(data))
            damaged[position] ^= 1 << rng.randrange(8)
        copies.append(("bit flips", f"{flips} flip(s) from byte {position}", bytes(damaged)))
    for _ in range(per_kind):
        end = rng.randrange(len(data))
        copies.append(("truncation", f"first {end} bytes", data[:end]))
    for _ in range(per_kind):
        start = rng.randrange(len(data))
        length = min(rng.choice((4, 16, 64, 256)), len(data) - start)
        noise = bytes(rng.randrange(256) for _ in range(length))
        copies.append(("random bytes", f"{length} at {start}", data[:start] + noise + data[start + length :]))
    edits = _header_edits(len(data))
    for label, position, value in rng.sample(edits, min(per_kind, len(edits))):
        damaged = bytearray(data)
        damaged[position : position + len(value)] = value
        copies.append(("header edit", label, bytes(damaged)))
    return copies


def _header_edits(size: int) -> list[tuple[str, int, bytes]]:
    """(label, byte position, new bytes) of edits to the fields a reader trusts first."""

    def u64(v: int) -> bytes:
        return v.to_bytes(8, "little")

    program_size, segment_base = EXTENDED_HEADER + 8, EXTENDED_HEADER + 16
    return [
        ("flatbuffer id XX99", FLATBUFFER_ID.start, b"XX99"),
        ("root table offset 0", 0, bytes(4)),
        ("root table offset past the end", 0, (size + 64).to_bytes(4, "little")),
        ("root table offset 2^32-1", 0, b"\xff\xff\xff\xff"),
        ("extended header magic", EXTENDED_HEADER, b"xx00"),
        ("extended header length 0", EXTENDED_HEADER + 4, bytes(4)),
        ("extended header length 2^32-1", EXTENDED_HEADER + 4, b"\xff\xff\xff\xff"),
        ("program size 0", program_size, u64(0)),
        ("program size half", program_size, u64(size // 2)),
        ("program size past the end", program_size, u64(size * 4)),
        ("program size 2^63", program_size, u64(1 << 63)),
        ("segment base 0", segment_base, u64(0)),
        ("segment base past the end", segment_base, u64(size * 4)),
        ("segment base inside the header", segment_base, u64(16)),
        ("segment base 2^64-1", segment_base, u64((1 << 64) - 1)),
        ("segment data size 2^64-1", EXTENDED_HEADER + 24, u64((1 << 64) - 1)),
    ]


def hostile_paths(folder: Path, program: Path) -> list[tuple[str, Path]]:
    """(label, path) of paths that are not a readable program file."""
    empty = folder / "empty.pte"
    empty.write_bytes(b"")
    directory = folder / "a_directory.pte"
    directory.mkdir()
    loop = folder / "loop.pte"
    loop.symlink_to(loop)
    pair_a, pair_b = folder / "loop_a.pte", folder / "loop_b.pte"
    pair_a.symlink_to(pair_b)
    pair_b.symlink_to(pair_a)
    dangling = folder / "dangling.pte"
    dangling.symlink_to(folder / "nowhere.pte")
    unreadable = folder / "unreadable.pte"
    unreadable.write_bytes(program.read_bytes())
    unreadable.chmod(0)
    return [
        ("empty file", empty),
        ("a directory", directory),
        ("symlink to itself", loop),
        ("two symlinks to each other", pair_a),
        ("dangling symlink", dangling),
        ("missing file", folder / "missing.pte"),
        ("no read permission", unreadable),  # root reads it anyway: then it is the plain program
        ("name with a newline", _renamed(program, folder / "new\nline.pte")),
        *([("a character device", Path("/dev/zero"))] if Path("/dev/zero").exists() else []),
    ]


def _renamed(program: Path, path: Path) -> Path:
    path.write_bytes(program.read_bytes())
    return path


def make_cases(
    folder: Path, models: Sequence[str], per_kind: int, seed: int, commands: Sequence[str]
) -> list[Case]:
    """Write every damaged file of every model under `folder`; the cases that run them."""
    from memplan.experiments import flags
    from memplan.experiments.zoo import programs, runtime

    rng = random.Random(seed)
    cases = []
    for model in models:
        with flags.library_warnings_silenced():
            data = runtime.lower(programs.load(model)).buffer
        own = folder / model
        own.mkdir()
        original = own / "original.pte"
        original.write_bytes(data)
        files = [("original", "as built", original)]
        for n, (kind, label, damaged) in enumerate(damaged_copies(data, per_kind, rng)):
            path = own / f"{n:04d}.pte"
            path.write_bytes(damaged)
            files.append((kind, label, path))
        hostile = own / "hostile"
        hostile.mkdir()
        files += [("hostile path", label, path) for label, path in hostile_paths(hostile, original)]
        cases += [Case(model, kind, label, str(path), c) for kind, label, path in files for c in commands]
    return cases


def run_case(task: tuple[Case, Run]) -> dict:
    """Run one case's command in this process and classify what it did; never raises."""
    case, run = task
    from memplan.experiments.cli import main as cli

    out, err = io.StringIO(), io.StringIO()
    code: int | str | None
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = cli.main(case.argv(run))
    except SystemExit as exc:
        code = exc.code
    except Exception as exc:  # noqa: BLE001 - an escaped exception is the outcome being counted
        return {"outcome": "traceback", "detail": f"{type(exc).__name__}: {exc}"[:200]}
    lines = err.getvalue().splitlines()
    errors = [line for line in lines if line.startswith("memplan: error: ")]
    if code in (0, None) and not errors:
        return {"outcome": "ok", "detail": ""}
    one_line = len(errors) == 1 and lines[-1] == errors[0] and "Traceback" not in err.getvalue()
    if one_line and code in (1, 2):
        return {"outcome": "clean error" if code == 2 else "failure", "detail": errors[0][16:200]}
    return {"outcome": "unclear", "detail": f"exit {code}: {' | '.join(lines)[-200:]}"}


def _aborted(task: tuple[Case, Run], exc: BaseException) -> dict:
    return {"outcome": "abort", "detail": f"the worker died: {exc}"[:200]}


def run_cases(
    cases: Sequence[Case],
    solver: str = "bestfit",
    time_limit_s: float = TIME_LIMIT_S,
    jobs: int = 1,
    quiet: bool = True,
) -> pd.DataFrame:
    """One row per case with its outcome; every case runs in a worker process."""
    from memplan.experiments.flags import progress
    from memplan.experiments.sweep.executors import run_all

    rows = []
    with tempfile.TemporaryDirectory(prefix="memplan-damaged-out-") as out_folder:
        settings = Run(out_folder, solver, time_limit_s)
        tasks = [(case, settings) for case in cases]
        done = run_all(run_case, tasks, jobs=jobs, crashed=_aborted, isolate=True, affinity=_one_key)
        for (case, _), result in progress(done, len(tasks), "damaged .pte", quiet):
            rows.append(
                {
                    "model": case.model,
                    "kind": case.kind,
                    "label": case.label,
                    "command": case.command,
                    **result,
                }
            )
    return pd.DataFrame(rows, columns=["model", "kind", "label", "command", "outcome", "detail"])


def _one_key(task: tuple[Case, Run]) -> str:
    return task[0].model


def outcome_table(df: pd.DataFrame) -> pd.DataFrame:
    """Per command and kind: files tried and how many ended in each outcome (plus an `all` row per command)."""
    counts = pd.crosstab([df["command"], df["kind"]], df["outcome"]).reindex(
        columns=list(OUTCOMES), fill_value=0
    )
    counts.insert(0, "tried", counts.sum(axis=1))
    totals = counts.groupby(level=0).sum()
    totals.index = pd.MultiIndex.from_tuples([(c, "all") for c in totals.index])
    return pd.concat([counts, totals]).sort_index(kind="stable").reset_index(names=["command", "kind"])


def main(argv: Sequence[str] | None = None) -> int:
    from memplan import solvers
    from memplan.experiments import flags
    from memplan.experiments.markdown import markdown

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    flags.add_models(ap, DEFAULT_MODELS)
    ap.add_argument(
        "--per-kind", type=int, default=20, help="damaged copies per model and kind (default: %(default)s)"
    )
    ap.add_argument("--seed", type=int, default=0, help="of the damage (default: %(default)s)")
    flags.add_list(ap, "--commands", COMMANDS, "command", "commands to run", choices=COMMANDS)
    ap.add_argument(
        "--solver", default="bestfit", choices=solvers.available(), help="replan's (default: %(default)s)"
    )
    flags.add_time_limit(
        ap, TIME_LIMIT_S, why="the damaged programs are small; a solve is not what is measured"
    )
    ap.add_argument("--jobs", type=int, default=1, help="worker processes (default: %(default)s)")
    ap.add_argument("--quiet", action="store_true", help="no progress bar")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="memplan-damaged-") as folder:
        cases = make_cases(Path(folder), flags.models_of(args), args.per_kind, args.seed, args.commands)
        df = run_cases(cases, args.solver, args.time_limit, args.jobs, args.quiet)
    print(markdown(outcome_table(df)))
    shown = df[
        df["outcome"].isin(("failure", *BAD_OUTCOMES))
    ]  # failures are listed, bad outcomes fail the run
    if len(shown):
        print()
        print(markdown(shown.head(20)))
    return 1 if shown["outcome"].isin(BAD_OUTCOMES).any() else 0


if __name__ == "__main__":
    raise SystemExit(main())
