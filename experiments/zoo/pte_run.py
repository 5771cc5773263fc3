"""Run `.pte` programs in `executorch.runtime` on given calls; also a script, so a child process can do it.

    python pte_run.py JOB_FOLDER

`pte_check` runs programs it does not trust this way: the script imports only torch and ExecuTorch's
runtime (not memplan, whose packages import much more), reads `job.pkl` (the programs' bytes and the
calls) and writes `outcome-<i>.pkl` for each program as it finishes: each call's outputs, or what
went wrong. A program that aborts the runtime leaves no outcome file, and the process's exit status
and last log line say what happened.
"""

from __future__ import annotations

import pickle
import sys
from collections.abc import Sequence
from pathlib import Path

import torch

JOB_FILE = "job.pkl"


def run(data: bytes, calls: Sequence[tuple[str, list]]) -> list[list[torch.Tensor]]:
    """Load the program once, load every method, run `calls` in order; each call's outputs."""
    from executorch.runtime import Runtime

    program = Runtime.get().load_program(data)
    methods = {name: program.load_method(name) for name in sorted(program.method_names)}
    results = []
    for name, inputs in calls:
        outputs = methods[name].execute([x.clone() if isinstance(x, torch.Tensor) else x for x in inputs])
        results.append([_tensor(x) for x in outputs])
    return results


def _tensor(x) -> torch.Tensor:
    return x.detach().clone() if isinstance(x, torch.Tensor) else torch.tensor(x)


def outcome_file(folder: Path, index: int) -> Path:
    return folder / f"outcome-{index}.pkl"


def main(folder: Path) -> None:
    """Run each program of the job in turn; stop at the first that fails."""
    job = pickle.loads((folder / JOB_FILE).read_bytes())
    for index, data in enumerate(job["programs"]):
        try:
            outcome: tuple[list, str] = (run(data, job["calls"]), "")
        except Exception as exc:  # noqa: BLE001 - reported to the parent, which names the program
            outcome = ([], f"{type(exc).__name__}: {exc}")
        outcome_file(folder, index).write_bytes(pickle.dumps(outcome))
        if outcome[1]:
            break


if __name__ == "__main__":
    main(Path(sys.argv[1]))
