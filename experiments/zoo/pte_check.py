"""Run two builds of one program in `executorch.runtime` on the same random inputs and compare outputs.

Used by `memplan replan --check`: a re-planned program must give bit-identical outputs to the file it
came from. Every method is loaded before the first call (as a deployment would, so host methods share
arenas and state), then the methods run in file order, four times, so state written by one call is read by
the next. Integer inputs are 0 or 1 (valid token ids and positions for any model), floats are normal.

With `isolated` (what the command does) both programs run in a child process (`pte_run`): a program
that aborts the runtime (ExecuTorch's checks end the process) becomes a `CheckError` naming the
program, the signal and the runtime's last log line, instead of the end of memplan.
"""

from __future__ import annotations

import math
import pickle
import signal
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
from executorch.exir import schema
from executorch.exir.scalar_type import ScalarType

from memplan.errors import MemplanError
from memplan.experiments.zoo import pte_run
from memplan.experiments.zoo.pte_run import run
from memplan.planner.compat import deserialize_pte_binary

TORCH_DTYPES = {
    ScalarType.BYTE: torch.uint8,
    ScalarType.CHAR: torch.int8,
    ScalarType.SHORT: torch.int16,
    ScalarType.INT: torch.int32,
    ScalarType.LONG: torch.int64,
    ScalarType.HALF: torch.float16,
    ScalarType.FLOAT: torch.float32,
    ScalarType.DOUBLE: torch.float64,
    ScalarType.BOOL: torch.bool,
    ScalarType.BFLOAT16: torch.bfloat16,
}
ROUNDS = 4  # every method four times: state written by one call is read by the next
MAX_INPUT_ELEMENTS = 1 << 26  # 256 MiB of floats: a larger input is a damaged file, not a model to run
CHECK_TIMEOUT_S = 600.0


class CheckError(MemplanError, AssertionError):
    """The two programs disagree, or one of them cannot run; the message names the call and output."""


class OriginalFailsError(CheckError):
    """The original program cannot be run (no inputs can be made for it, or it fails): the input's fault."""


def random_calls(data: bytes, seed: int = 0, rounds: int = ROUNDS) -> list[tuple[str, list]]:
    """(method, inputs) for every method in file order, `rounds` times, from the inputs' types in the file."""
    program = deserialize_pte_binary(data).program
    generator = torch.Generator().manual_seed(seed)
    calls = []
    for _ in range(rounds):
        for plan in program.execution_plan:
            calls.append((plan.name, [_random_input(plan, i, generator) for i in plan.inputs]))
    return calls


def _random_input(plan: schema.ExecutionPlan, value: int, generator: torch.Generator):
    if not 0 <= value < len(plan.values):
        raise OriginalFailsError(f"{plan.name}: input {value} names no value of the method")
    val = plan.values[value].val
    if isinstance(val, schema.Int):
        return 1
    if isinstance(val, schema.Bool):
        return True
    if isinstance(val, schema.Double):
        return 0.5
    if not isinstance(val, schema.Tensor):
        raise OriginalFailsError(
            f"{plan.name}: input value {value} is a {type(val).__name__}; cannot make one up"
        )
    known = val.scalar_type in ScalarType._value2member_map_
    dtype = TORCH_DTYPES.get(ScalarType(val.scalar_type)) if known else None
    if dtype is None:
        raise OriginalFailsError(
            f"{plan.name}: input value {value} has element type {val.scalar_type}; cannot make one up"
        )
    shape = tuple(val.sizes)
    if any(d < 0 for d in shape) or math.prod(shape) > MAX_INPUT_ELEMENTS:
        raise OriginalFailsError(
            f"{plan.name}: input value {value} has sizes {list(shape)}; cannot make up such an input"
            f" (dimensions must not be negative, at most {MAX_INPUT_ELEMENTS:,} elements)"
        )
    if dtype.is_floating_point:
        return torch.randn(shape, generator=generator).to(dtype)
    if dtype is torch.bool:
        return torch.randint(0, 2, shape, generator=generator).bool()
    return torch.randint(0, 2, shape, generator=generator).to(dtype)


def check_same_outputs(
    before: bytes,
    after: bytes,
    seed: int = 0,
    rounds: int = ROUNDS,
    isolated: bool = True,
    timeout_s: float = CHECK_TIMEOUT_S,
) -> int:
    """Raise CheckError unless both programs give bit-identical outputs; return the calls compared.

    `isolated` runs them in a child process (see the module's docstring); an `OriginalFailsError`
    says the original itself cannot run, which is no fault of the re-planned one.
    """
    try:
        calls = random_calls(before, seed, rounds)
    except CheckError:
        raise
    except Exception as exc:  # noqa: BLE001 - the original's own description is at fault
        raise OriginalFailsError(f"cannot make up inputs: {type(exc).__name__}: {exc}") from None
    outcomes = (
        _run_isolated([before, after], calls, timeout_s) if isolated else _run_here([before, after], calls)
    )
    for which, (_, error) in zip(("original", "re-planned"), outcomes):
        if error:
            fault = OriginalFailsError if which == "original" else CheckError
            raise fault(f"the {which} program does not run: {error}")
    want, got = (outcome for outcome, _ in outcomes)
    compare_outputs(calls, got, want, "the original")
    return len(calls)


def check_same_as_stock(
    planned: bytes, stock: bytes, calls: Sequence[tuple[str, Any]], atol: float | None = None
) -> int:
    """Raise CheckError unless `planned` gives what `stock` (the same graph, ExecuTorch's own plan) gives
    on `calls`: bit for bit, or within `atol` when given; return the calls compared. Runs here."""
    from memplan.experiments.zoo.runtime import run_pte

    try:
        want = run_pte(stock, calls)
    except Exception as exc:  # noqa: BLE001 - the stock program's own failure
        raise OriginalFailsError(f"the stock program does not run: {type(exc).__name__}: {exc}") from None
    try:
        got = run_pte(planned, calls)
    except Exception as exc:  # noqa: BLE001 - memplan's program fails where stock's runs
        raise CheckError(f"the planned program does not run: {type(exc).__name__}: {exc}") from None
    compare_outputs(calls, got, want, "the stock program", atol)
    return len(calls)


def compare_outputs(
    calls: Sequence[tuple[str, Any]],
    got: Sequence[Sequence[torch.Tensor]],
    want: Sequence[Sequence[torch.Tensor]],
    reference: str,
    atol: float | None = None,
) -> None:
    """CheckError naming the first call and output of `got` that differs from `want` (bit for bit, or by
    more than `atol`)."""
    for i, ((method, _), g, w) in enumerate(zip(calls, got, want)):
        if len(g) != len(w):
            raise CheckError(f"call {i} ({method}): {len(g)} outputs, {reference} gives {len(w)}")
        for j, (a, b) in enumerate(zip(g, w)):
            if a.dtype != b.dtype or a.shape != b.shape:
                raise CheckError(
                    f"call {i} ({method}) output {j}: {a.dtype} {tuple(a.shape)}, {reference}"
                    f" gives {b.dtype} {tuple(b.shape)}"
                )
            if _same_bits(a, b):
                continue
            diff = (a.double() - b.double()).abs().nan_to_num(float("inf")).max().item()
            if atol is None or not diff <= atol:
                within = "" if atol is None else f", atol {atol:g}"
                raise CheckError(
                    f"call {i} ({method}) output {j} differs from {reference} (max abs diff {diff:.3g}{within})"
                )


Outcome = tuple[list[list[torch.Tensor]], str]  # each call's outputs, or "" and what went wrong


def _run_here(programs: Sequence[bytes], calls: Sequence[tuple[str, list]]) -> list[Outcome]:
    outcomes: list[Outcome] = []
    for data in programs:
        try:
            outcomes.append((run(data, calls), ""))
        except Exception as exc:  # noqa: BLE001 - say which side failed
            outcomes.append(([], f"{type(exc).__name__}: {exc}"))
            break
    return outcomes


def _run_isolated(
    programs: Sequence[bytes], calls: Sequence[tuple[str, list]], timeout_s: float
) -> list[Outcome]:
    """`_run_here` in a child process (the `pte_run` script); one that dies or hangs ends the list with why."""
    with tempfile.TemporaryDirectory(prefix="memplan-check-") as name:
        folder = Path(name)
        (folder / pte_run.JOB_FILE).write_bytes(
            pickle.dumps({"programs": list(programs), "calls": list(calls)})
        )
        try:
            done = subprocess.run(
                [sys.executable, pte_run.__file__, str(folder)],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                timeout=timeout_s,
            )
            death = "" if done.returncode == 0 else _death(done.returncode, done.stderr)
        except subprocess.TimeoutExpired:
            death = f"it did not finish in {timeout_s:g} s"
        outcomes: list[Outcome] = []
        for index in range(len(programs)):
            path = pte_run.outcome_file(folder, index)
            if not path.exists():
                outcomes.append(([], death or "the child process left no outcome"))
                break
            outcomes.append(pickle.loads(path.read_bytes()))
            if outcomes[-1][1]:
                break
    return outcomes


def _death(returncode: int, stderr: bytes) -> str:
    """How the child ended, with the runtime's last log line."""
    lines = [line.strip() for line in stderr.decode(errors="replace").splitlines() if line.strip()]
    last = f"; the runtime's last words: {lines[-1][:300]}" if lines else ""
    if returncode < 0:
        number = -returncode
        name = signal.Signals(number).name if number in signal.valid_signals() else f"signal {number}"
        return f"the runtime ended the process with {name}{last}"
    return f"the process exited with code {returncode}{last}"


def _same_bits(a: torch.Tensor, b: torch.Tensor) -> bool:
    return (
        torch.equal(a.reshape(-1).view(torch.uint8), b.reshape(-1).view(torch.uint8)) if a.numel() else True
    )
