"""What a `.pte` reader trusts before it walks a method: every index in range, every planned tensor in its arena.

A flatbuffer that parses can still be damaged (a flipped bit, a hostile edit): an argument naming a value
past the end, a negative dimension, a tensor past the end of its arena. ExecuTorch's runtime refuses such
a method when it loads it; `check_method` refuses it first, naming the method, the value and the fault,
so nothing downstream indexes out of range or plans a tensor of negative size.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from executorch.exir import schema

from memplan.errors import ProblemError


class PteError(ProblemError):
    """The file is not an ExecuTorch program memplan can read; the message says why."""


def check_method(plan: schema.ExecutionPlan, element_bytes: dict[int, int], where: str) -> None:
    """Raise PteError unless every reference of `plan` is in range and every planned tensor fits its arena.

    `element_bytes` maps a scalar type's number to its size; tensors of other types are left to the
    reader (it says it cannot size them).
    """
    method = f"{where}: method {plan.name!r}"
    n_values = len(plan.values)

    def value(index: object, what: str) -> None:
        if not isinstance(index, int) or not 0 <= index < n_values:
            raise PteError(f"{method}: {what} names value {index!r}, but the method has {n_values} values")

    for what, indices in (("an input", plan.inputs), ("an output", plan.outputs)):
        for index in indices:
            value(index, what)
    for c, chain in enumerate(plan.chains):
        for k, instruction in enumerate(chain.instructions):
            _check_instruction(
                plan,
                instruction.instr_args,
                f"instruction {k} of chain {c}",
                value,
                len(chain.instructions),
                method,
            )
    for entry in plan.non_const_buffer_device or ():
        arena = entry.buffer_idx
        if not isinstance(arena, int) or not 0 < arena < len(plan.non_const_buffer_sizes):
            raise PteError(
                f"{method}: non_const_buffer_device puts arena {arena!r} on a device, but the method's"
                f" arenas are 1..{len(plan.non_const_buffer_sizes) - 1}"
            )
    for index, evalue in enumerate(plan.values):
        val = evalue.val
        if isinstance(val, (schema.TensorList, schema.OptionalTensorList)):
            for item in val.items:
                if not (isinstance(val, schema.OptionalTensorList) and item == -1):
                    value(item, f"the tensor list at value {index}")
        if isinstance(val, schema.Tensor):
            _check_tensor(plan, index, val, element_bytes, method)


def _check_instruction(plan, instr, where: str, value, n_instructions: int, method: str) -> None:
    if isinstance(instr, schema.KernelCall):
        _in_range(instr.op_index, len(plan.operators), f"{method}: {where} calls operator", "operators")
        _each(value, instr.args, f"{where}: an argument")
    elif isinstance(instr, schema.DelegateCall):
        _in_range(instr.delegate_index, len(plan.delegates), f"{method}: {where} calls delegate", "delegates")
        _each(value, instr.args, f"{where}: an argument")
    elif isinstance(instr, schema.MoveCall):
        _each(value, (instr.move_from, instr.move_to), f"{where}: a move")
    elif isinstance(instr, schema.JumpFalseCall):
        value(instr.cond_value_index, f"{where}: a jump's condition")
        destination = instr.destination_instruction  # the end of the chain (n) is a place to jump to
        if not isinstance(destination, int) or not 0 <= destination <= n_instructions:
            raise PteError(
                f"{method}: {where} jumps to {destination!r}, past the chain's {n_instructions} instructions"
            )
    elif isinstance(instr, schema.FreeCall):
        value(instr.value_index, f"{where}: a free")


def _each(value, indices: Iterable[int], what: str) -> None:
    for index in indices:
        value(index, what)


def _in_range(index: object, count: int, what: str, things: str) -> None:
    if not isinstance(index, int) or not 0 <= index < count:
        raise PteError(f"{what} {index!r}, but the method has {count} {things}")


def _check_tensor(plan, index: int, t: schema.Tensor, element_bytes: dict[int, int], method: str) -> None:
    negative = [d for d in t.sizes if d < 0]
    if negative:
        raise PteError(
            f"{method}: value {index} has a negative dimension {negative[0]} (sizes {list(t.sizes)})"
        )
    info = t.allocation_info
    size = element_bytes.get(t.scalar_type)
    if info is None or size is None:
        return
    arenas = plan.non_const_buffer_sizes
    if not 0 < info.memory_id < len(arenas):
        raise PteError(
            f"{method}: value {index} is planned in arena {info.memory_id}, but the method's arenas are"
            f" 1..{len(arenas) - 1}"
        )
    nbytes = math.prod(t.sizes) * size
    offset = info.memory_offset_low + (info.memory_offset_high << 32)
    if nbytes and offset + nbytes > arenas[info.memory_id]:
        raise PteError(
            f"{method}: value {index} lies at bytes [{offset:,}, {offset + nbytes:,}) of arena"
            f" {info.memory_id}, which has {arenas[info.memory_id]:,}; the runtime would refuse it"
        )
