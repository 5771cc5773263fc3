"""The damaged-file bench (issue 20, item 4) on a small sample: no traceback, no abort, no unclear exit.

The default run damages cat_seed (2 copies per byte-level kind, the hostile paths); `-m slow` runs
every default model with 10 per kind, which exercises `replan --check` on programs replan changes.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from memplan.experiments.bench import damaged_pte


def test_damaged_copies_are_damaged_and_reproducible() -> None:
    data = bytes(range(256)) * 8
    copies = damaged_pte.damaged_copies(data, 4, random.Random(1))
    assert copies == damaged_pte.damaged_copies(data, 4, random.Random(1))
    kinds = [kind for kind, _, _ in copies]
    assert {k: kinds.count(k) for k in kinds} == {
        "bit flips": 4,
        "truncation": 4,
        "random bytes": 4,
        "header edit": 4,
    }
    for kind, label, damaged in copies:
        changed = sum(a != b for a, b in zip(damaged, data))
        if kind == "truncation":
            assert len(damaged) < len(data), label
        else:  # in place: flips touch at most 16 bytes, noise at most 256, header edits at most 8
            assert len(damaged) == len(data) and changed <= {"bit flips": 16, "random bytes": 256}.get(
                kind, 8
            )


def _check(df, tried: int) -> None:
    table = damaged_pte.outcome_table(df)
    totals = table[table["kind"] == "all"].set_index("command")
    assert int(totals["tried"].sum()) == tried == len(df)
    bad = df[df["outcome"].isin(damaged_pte.BAD_OUTCOMES)]
    assert bad.empty, bad.to_string()
    assert (df[df["kind"] == "original"]["outcome"] == "ok").all()
    assert (df[df["kind"] == "truncation"]["outcome"] == "clean error").all()


def test_a_sample_of_damaged_files_gives_no_traceback_and_no_abort(tmp_path: Path) -> None:
    cases = damaged_pte.make_cases(tmp_path, ["cat_seed"], 2, 0, ["inspect", "replan"])
    assert len(cases) == 2 * (1 + 4 * 2 + 8 + Path("/dev/zero").exists())
    _check(damaged_pte.run_cases(cases, jobs=1), len(cases))


@pytest.mark.slow
def test_the_default_models_damaged_give_no_traceback_and_no_abort(tmp_path: Path) -> None:
    cases = damaged_pte.make_cases(tmp_path, list(damaged_pte.DEFAULT_MODELS), 10, 1, ["inspect", "replan"])
    _check(damaged_pte.run_cases(cases, jobs=2), len(cases))
