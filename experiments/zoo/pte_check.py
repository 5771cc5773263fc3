"""Run two builds of one program in `executorch.runtime` on the same random inputs and compare outputs.

Used by `memplan replan --check`: a re-planned program must give bit-identical outputs to the file it
came from. Every method is loaded before the first call (as a deployment would, so host methods share
arenas and state), then the methods run in file order, four times, so state written by one call is read by
the next. Integer inputs are 0 or 1 (valid token ids and positions for any model), floats are normal.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from executorch.exir import schema
from executorch.exir.scalar_type import ScalarType

from memplan.errors import MemplanError
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


class CheckError(MemplanError, AssertionError):
    """The two programs disagree, or one of them cannot run; the message names the call and output."""


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
    val = plan.values[value].val
    if isinstance(val, schema.Int):
        return 1
    if isinstance(val, schema.Bool):
        return True
    if isinstance(val, schema.Double):
        return 0.5
    if not isinstance(val, schema.Tensor):
        raise CheckError(f"{plan.name}: input value {value} is a {type(val).__name__}; cannot make one up")
    dtype = TORCH_DTYPES.get(ScalarType(val.scalar_type))
    if dtype is None:
        raise CheckError(
            f"{plan.name}: input value {value} has element type {val.scalar_type}; cannot make one up"
        )
    shape = tuple(val.sizes)
    if dtype.is_floating_point:
        return torch.randn(shape, generator=generator).to(dtype)
    if dtype is torch.bool:
        return torch.randint(0, 2, shape, generator=generator).bool()
    return torch.randint(0, 2, shape, generator=generator).to(dtype)


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


def check_same_outputs(before: bytes, after: bytes, seed: int = 0, rounds: int = ROUNDS) -> int:
    """Raise CheckError unless both programs give bit-identical outputs; return the calls compared."""
    calls = random_calls(before, seed, rounds)
    try:
        want = run(before, calls)
    except Exception as exc:  # noqa: BLE001 - say which side failed
        raise CheckError(f"the original program does not run: {type(exc).__name__}: {exc}") from None
    try:
        got = run(after, calls)
    except Exception as exc:  # noqa: BLE001
        raise CheckError(f"the re-planned program does not run: {type(exc).__name__}: {exc}") from None
    for i, ((method, _), g, w) in enumerate(zip(calls, got, want)):
        if len(g) != len(w):
            raise CheckError(f"call {i} ({method}): {len(g)} outputs, the original gives {len(w)}")
        for j, (a, b) in enumerate(zip(g, w)):
            if a.dtype != b.dtype or a.shape != b.shape or not _same_bits(a, b):
                diff = (a.double() - b.double()).abs().max().item() if a.shape == b.shape else float("nan")
                raise CheckError(
                    f"call {i} ({method}) output {j} differs from the original (max abs diff {diff:.3g})"
                )
    return len(calls)


def _same_bits(a: torch.Tensor, b: torch.Tensor) -> bool:
    return (
        torch.equal(a.reshape(-1).view(torch.uint8), b.reshape(-1).view(torch.uint8)) if a.numel() else True
    )
