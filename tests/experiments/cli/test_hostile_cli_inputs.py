"""Hostile inputs on the command line (issue 31, item 13): files that are not files, an output over an
input, factories that return nonsense or exit, two sweeps into one folder: each a clear refusal."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from helpers.cli import run_cli

from memplan.errors import UsageError
from memplan.experiments.sweep import run as sweep_run

PROBLEM = "id,lower,upper,size\n0,0,2,8\n1,1,3,8\n"


@pytest.fixture
def problems(tmp_path: Path) -> Path:
    folder = tmp_path / "problems"
    folder.mkdir()
    (folder / "a.csv").write_text(PROBLEM)
    return folder


def test_bench_csv_refuses_a_fifo_and_a_link_to_dev_zero_without_reading_them(problems, capsys) -> None:
    os.mkfifo(problems / "b.csv")  # reading it would block for ever
    (problems / "c.csv").symlink_to("/dev/zero")  # reading it would never end
    code, out, err = run_cli(["bench-csv", str(problems), "--solvers", "bestfit", "--quiet"], capsys)
    assert code == 0, err
    rows = {line.split("|")[1].strip(): line for line in out.splitlines() if line.startswith("| ")}
    assert "not a regular file" in rows["b.csv"] and "not a regular file" in rows["c.csv"]
    assert "16" in rows["a.csv"]  # the regular file is still solved: two 8 B buffers live together


def test_bench_csv_never_writes_its_table_over_an_input(problems, capsys) -> None:
    code, _, err = run_cli(["bench-csv", str(problems), "--out", str(problems / "a.csv")], capsys)
    assert code == 2 and "is one of the input problems" in err
    assert (problems / "a.csv").read_text() == PROBLEM


FACTORIES = """
import sys
import torch
from torch import nn

def text_inputs():
    return nn.Linear(2, 2), "x"

def number_key():
    return {3: (nn.Linear(2, 2), (torch.randn(1, 2),))}

def no_methods():
    return {}

def exits():
    sys.exit(0)
"""


@pytest.mark.parametrize(
    ("factory", "words"),
    [
        ("text_inputs", "example inputs must be a tuple of tensors, got a str"),
        ("number_key", "method name 3 must be a Python identifier string"),
        ("no_methods", "no methods"),
        ("exits", "called sys.exit(0) instead of returning a program"),
    ],
)
def test_a_factory_returning_nonsense_or_exiting_is_one_error_line(factory, words, tmp_path, capsys) -> None:
    path = tmp_path / "factories.py"
    path.write_text(FACTORIES)
    code, out, err = run_cli(["plan", f"{path}:{factory}", "--quiet"], capsys)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and words in err, err


def test_a_fifo_or_a_folder_named_pt2_is_called_what_it_is(tmp_path, capsys) -> None:
    os.mkfifo(tmp_path / "pipe.pt2")
    (tmp_path / "folder.pt2").mkdir()
    code, _, err = run_cli(["plan", str(tmp_path / "pipe.pt2")], capsys)
    assert code == 2 and "is not a regular file (a FIFO, socket or device)" in err
    code, _, err = run_cli(["plan", str(tmp_path / "folder.pt2")], capsys)
    assert code == 2 and "is a folder, not a file" in err
    code, _, err = run_cli(
        ["sweep", "--models", str(tmp_path / "pipe.pt2"), "--out", str(tmp_path / "o")], capsys
    )
    assert code == 2 and "is not a regular file" in err


def test_a_second_sweep_into_the_same_folder_is_refused_at_once(tmp_path) -> None:
    folder = tmp_path / "out"
    folder.mkdir()
    with sweep_run.folder_lock(folder):
        with pytest.raises(UsageError, match=f"another sweep \\(pid {os.getpid()}\\) is writing to"):
            sweep_run.sweep(out=folder, models=["cat_seed"], solvers=["bestfit"], progress=False, jobs=1)
    with sweep_run.folder_lock(folder):  # released: the next sweep may go
        pass


CHANNEL_MISMATCH = """
import torch
from torch import nn


class Broken(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Conv2d(3, 8, 3)
        self.b = nn.Conv2d(16, 4, 3)  # expects 16 channels, gets 8

    def forward(self, x):
        y = self.a(x)
        return self.b(y)


def make():
    return Broken(), (torch.randn(1, 3, 16, 16),)
"""


def test_a_bug_in_the_users_model_is_one_line_naming_model_method_and_frame(tmp_path, capsys) -> None:
    path = tmp_path / "broken_model.py"
    path.write_text(CHANNEL_MISMATCH)
    code, out, err = run_cli(["plan", f"{path}:make", "--solver", "bestfit", "--quiet"], capsys)
    assert code == 1 and out == ""
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert err.startswith("memplan: error: broken_model:make: method forward: torch.export failed at")
    assert f"{path}:14 in forward (return self.b(y)): RuntimeError: Given groups=1" in err
    assert err.rstrip().endswith("(--verbose shows the full traceback)")
    code, _, err = run_cli(["plan", f"{path}:make", "--solver", "bestfit", "--quiet", "--verbose"], capsys)
    assert code == 1 and err.startswith("Traceback (most recent call last):")
    assert f'File "{path}", line 14, in forward' in err
    assert err.splitlines()[-1].startswith("memplan: error: broken_model:make: method forward:")


def test_a_failing_factory_names_the_users_frame(tmp_path, capsys) -> None:
    path = tmp_path / "factory_bug.py"
    path.write_text("def make():\n    return {}['missing']\n")
    code, _, err = run_cli(["plan", f"{path}:make", "--quiet"], capsys)
    assert code == 2 and err.count("\n") == 1
    assert f"factory_bug:make() failed at {path}:2 in make (return {{}}['missing']): KeyError" in err
