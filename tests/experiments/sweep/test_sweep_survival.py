"""Sweeps that survive what kills processes (issue 15): a torn record, a segfaulting solver, a
parent killed with SIGKILL."""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from memplan.errors import UsageError
from memplan.experiments.cli import main as cli
from memplan.experiments.sweep import run as sweep
from memplan.experiments.sweep import run_log
from memplan.experiments.sweep.executors import run_all
from memplan.experiments.sweep.grid import PlanRun


def _runs(n: int) -> list[PlanRun]:
    return [PlanRun(f"modèle{i}", "bestfit", 16, True, 5.0) for i in range(n)]


def _logged(folder: Path, n: int) -> Path:
    log = run_log.RunLog(folder)
    for run in _runs(n):
        log.add(run, {"error": None, "rows": [{"method": "forward", "arena_bytes": 64}]})
    return log.path


def _tear_mid_line(data: bytes) -> bytes:
    return data[: data.rindex(b'"rows"')]


def _tear_inside_an_escape(data: bytes) -> bytes:
    return data[: data.rindex(b"\\u00e8") + 4]  # json.dumps writes 'è' as \u00e8: cut after \u0


TEARS = {
    "torn last line": _tear_mid_line,
    "torn, then a NUL-filled block": lambda data: _tear_mid_line(data) + b"\0" * 4096,
    "a NUL-filled tail after the last record": lambda data: data + b"\0" * 512,
    "torn inside an escape": _tear_inside_an_escape,
    "only the closing brace lost": lambda data: data[:-2],
}


@pytest.mark.parametrize("tear", list(TEARS))
def test_a_torn_end_of_the_record_is_dropped_with_a_warning_and_redone(tmp_path: Path, tear: str) -> None:
    path = _logged(tmp_path, 3)
    path.write_bytes(TEARS[tear](path.read_bytes()))
    with pytest.warns(UserWarning, match=r"runs\.jsonl:\d+: dropped .* will be done again"):
        log = run_log.RunLog(tmp_path)
    survivors = 3 if "after the last record" in tear else 2
    runs = _runs(3)
    assert [log.is_done(r) for r in runs] == [True] * survivors + [False] * (3 - survivors)
    log.add(runs[2], {"error": None, "rows": []})  # the redone run lands on a line of its own
    reread = run_log.RunLog(tmp_path)
    assert all(reread.is_done(r) for r in runs)
    assert b"\0" not in path.read_bytes()


def test_a_last_record_without_its_newline_is_kept_and_the_next_one_starts_a_new_line(tmp_path: Path) -> None:
    path = _logged(tmp_path, 2)
    path.write_bytes(path.read_bytes().rstrip(b"\n"))
    log = run_log.RunLog(tmp_path)
    assert all(log.is_done(r) for r in _runs(2))
    log.add(_runs(3)[2], {"error": None, "rows": []})
    assert all(run_log.RunLog(tmp_path).is_done(r) for r in _runs(3))


@pytest.mark.parametrize(
    "corrupt",
    [
        lambda lines: [lines[0], lines[1][:20], lines[2]],  # a torn line followed by a good one
        lambda lines: lines + [b'{"hello": 1}'],  # JSON that is not a sweep record
        lambda lines: lines[:-1] + [lines[-1][:30] + b"\n" + lines[-1][:30]],  # two torn lines
    ],
)
def test_damage_that_is_not_a_torn_end_is_still_refused(tmp_path: Path, corrupt) -> None:
    path = _logged(tmp_path, 3)
    path.write_bytes(b"\n".join(corrupt(path.read_bytes().splitlines())) + b"\n")
    with pytest.raises(UsageError, match=r"runs\.jsonl:\d+: not a sweep record"):
        run_log.RunLog(tmp_path)


def test_a_sweep_resumes_a_folder_whose_record_was_torn(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    args = dict(out=tmp_path, models=["cat_seed"], solvers=["greedy", "bestfit"], jobs=1, progress=False)
    first = sweep.sweep(**args)
    path = tmp_path / run_log.RUNS_FILE
    path.write_bytes(_tear_mid_line(path.read_bytes()))
    seen = []
    real = sweep.execute
    monkeypatch.setattr(sweep, "execute", lambda run: seen.append(run) or real(run))
    with pytest.warns(UserWarning, match="dropped 1 unreadable line"):
        again = sweep.sweep(**args)
    assert len(seen) == 1  # only the torn run is done again
    columns = ["model", "solver", "arena_bytes", "error"]
    assert again[columns].equals(first[columns])


def _segfault_on_13(n: int) -> int:
    if n == 13:
        ctypes.string_at(0)  # a real segmentation fault in native code
    return n * n


def test_a_segfault_with_one_job_becomes_a_result_when_isolated() -> None:
    results = dict(
        run_all(_segfault_on_13, [1, 13, 2], jobs=1, isolate=True, crashed=lambda n, exc: f"died on {n}")
    )
    assert results == {1: 1, 13: "died on 13", 2: 4}


def test_the_sweep_command_isolates_runs_even_with_one_job(monkeypatch: pytest.MonkeyPatch) -> None:
    seen = {}

    def fake_sweep(**kwargs):
        seen.update(kwargs)
        raise KeyboardInterrupt  # stop before any work

    monkeypatch.setattr(sweep, "sweep", fake_sweep)
    with pytest.raises(SystemExit):
        cli.main(["sweep", "--jobs", "1", "--quiet"])
    assert seen["jobs"] == 1 and seen["isolate"] is True


PARENT = textwrap.dedent(
    """
    import os, sys, time
    from memplan.experiments.sweep.executors import run_all

    def work(n):
        if n < 2:
            return os.getpid()
        time.sleep(600)

    if __name__ == "__main__":
        for _, pid in run_all(work, [0, 1, 2, 3], jobs=2):
            print(pid, flush=True)
    """
)


def _children(pid: int) -> set[int]:
    found = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                found.add(int(entry.name))
    return found


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.mark.skipif(not Path("/proc").exists(), reason="needs /proc to find the worker processes")
def test_killing_the_parent_with_sigkill_leaves_no_worker_or_resource_tracker(tmp_path: Path) -> None:
    script = tmp_path / "parent.py"
    script.write_text(PARENT)
    parent = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True)
    try:
        workers = {int(parent.stdout.readline()) for _ in range(2)}  # both workers are up
        children = _children(parent.pid)
        assert workers <= children and len(children) >= 3  # the workers and the resource tracker
    finally:
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait()
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline and any(_alive(p) for p in children):
        time.sleep(0.2)
    left = [p for p in children if _alive(p)]
    for pid in left:
        os.kill(pid, signal.SIGKILL)  # do not leave them behind for the next test
    assert not left, f"still running after the parent was killed: {left}"
