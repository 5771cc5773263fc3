"""ExecuTorch's `TargetMemoryMap` (exir/banked_memory_planning.py) as banks of a memplan `Problem`.

`PlannerPass(memory_map=TargetMemoryMap([...]))` takes ExecuTorch's own
`Bank(name, size, mem_id, alignment)` list, in preference order (fastest
first), with the meaning ExecuTorch gives it:

- A tensor whose `mem_id` is unset may go to any declared bank; one whose
  `mem_id` a custom pool pass set is pinned there (counted against the
  bank's capacity if declared, laid out but not budgeted otherwise). An
  undeclared arena never receives a tensor on its own.
- A bank's `alignment` tightens the graph's alignment (it must be a multiple
  of it) and rounds sizes up; submodule reservations are charged to their
  bank; the XNNPACK padding ExecuTorch adds to every arena with tensors comes
  out of each bank's size.

Every buffer also carries how many times the emitted instructions name it
(planner.memory.instruction_traffic `argument_counts`): size x accesses is the traffic, as the
emitted program counts it, that the solvers keep out of slow banks.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence

import torch
from executorch.exir.banked_memory_planning import BankedGreedy, BankPlacementError, TargetMemoryMap

from memplan.planner.graph.extract import Extraction, ExtractionError
from memplan.planner.memory.instruction_traffic import argument_counts
from memplan.problem import MAX_COORDINATE, Bank, Problem


def banks_of(memory_map: TargetMemoryMap, alignment: int, padding: int = 0) -> tuple[Bank, ...]:
    """memplan banks for the map (preference order kept), each `padding` bytes smaller."""
    for bank in memory_map.banks:
        if bank.alignment is not None and bank.alignment % alignment:
            raise ExtractionError(
                f"bank {bank.name!r} (mem_id {bank.mem_id}) declares alignment {bank.alignment}, which is not"
                f" a multiple of the graph's alignment {alignment}; a bank may only tighten it"
            )
    return tuple(
        Bank(bank.name, bank.mem_id, max(0, bank.size - padding), alignment=bank.alignment or alignment)
        for bank in memory_map.banks
    )


def with_memory_map(
    extraction: Extraction,
    graph_module: torch.fx.GraphModule,
    memory_map: TargetMemoryMap,
    alignment: int,
) -> Extraction:
    """The extraction's problem over the map's banks: unpinned tensors may go to any bank.

    Tensors on another device choose among the same banks here; with device arenas on,
    `planner.memory.devices.split_by_device` moves them to that device's copy of the map, as stock does.
    """
    problem = extraction.problem
    declared = tuple(memory_map.mem_ids())
    counts = argument_counts(extraction.spec_of, graph_module.graph.nodes)
    buffers = []
    for buf in problem.buffers:
        root = problem.root_of(buf.id)[0]
        spec = extraction.spec_of.get(root)
        free = spec is not None and spec.mem_id is None
        buffers.append(
            dataclasses.replace(
                buf,
                pool=declared[0] if free else buf.pool,
                banks=declared if free else (),
                accesses=counts.get(buf.id, 0),
            )
        )
    banked = Problem(
        tuple(buffers),
        problem.groups,
        problem.same_offsets,
        capacity=problem.capacity,
        name=problem.name,
        banks=banks_of(memory_map, alignment, extraction.extra_padding),
        shared_objects=problem.shared_objects,
    )
    return dataclasses.replace(extraction, problem=banked)


def state_pool(memory_map: TargetMemoryMap, problem: Problem) -> int:
    """The arena of state shared across methods under a map: one past every arena the map or a pin uses."""
    return max([*memory_map.mem_ids(), *problem.pools]) + 1


def stock_sizes(
    memory_map: TargetMemoryMap,
    alignment: int,
    extraction: Extraction,
    graph_module: torch.fx.GraphModule,
    signature,
) -> list[int]:
    """What ExecuTorch's own BankedGreedy gives for these tensors ([] when it raises BankPlacementError),
    without overlapping allocations when the problem asks for shared objects.

    BankedGreedy realigns every spec to the bank it tries; the graph's alignment is restored after.
    """
    overlapping = not extraction.problem.shared_objects
    try:
        return list(
            BankedGreedy(memory_map, allow_overlapping_allocations=overlapping)(
                alignment, extraction.specs, graph_module, signature, extraction.extra_padding
            ).bufsizes
        )
    except BankPlacementError:
        return []
    finally:
        for spec in extraction.specs:
            spec.realign(alignment)


_UNITS = {"": 1, "b": 1, "k": 1000, "kb": 1000, "kib": 1024, "m": 1000**2, "mb": 1000**2, "mib": 1024**2}
_UNITS |= {"g": 1000**3, "gb": 1000**3, "gib": 1024**3}


# The bank a bare size names (`--budget 150000`, `--memory-map 64KiB`): the one arena, mem_id 1.
ONE_BANK = "arena"


def parse_memory_map(spec: str, what: str = "memory map") -> TargetMemoryMap:
    """`"sram:64KiB,dram:16MiB"` -> a TargetMemoryMap, banks in that (preference) order at mem_ids 1, 2, ...

    The one grammar of every bank list memplan takes (`--memory-map`, the report's `--budget`, the
    tiling `--budget`): a size alone (`150000`, `256KiB`) is one bank, ONE_BANK. A bank may add its
    alignment, a power of two: `sram:64KiB:64`. Sizes take B, KB/KiB, MB/MiB, GB/GiB, up to 2^62 bytes,
    in ASCII digits (as the CSV reader: `int` would also take '١٢'). Every fault is a ValueError
    naming `what` ("memory map", "budget"), the spec and the bank, before any run starts.
    """
    from executorch.exir.banked_memory_planning import Bank as EtBank

    items = [t.strip() for t in spec.split(",") if t.strip()]
    if len(items) == 1 and ":" not in items[0] and _SIZE.fullmatch(items[0]):
        return TargetMemoryMap([EtBank(ONE_BANK, _bytes(f"{what} {_shown(spec)}", items[0]), 1, None)])
    banks = []
    for mem_id, item in enumerate(items, start=1):
        parts = item.split(":")
        if len(parts) not in (2, 3) or not parts[0]:
            raise ValueError(
                f"{what} {spec!r}: bank {item!r} is not name:size or name:size:alignment"
                " (a size alone, e.g. 150000 or 256KiB, is one bank when it is the only one)"
            )
        where = f"{what} {_shown(spec)}: bank {_shown(parts[0])}"
        size = _bytes(where, parts[1])
        alignment = _alignment(where, parts[2]) if len(parts) == 3 else None
        banks.append(EtBank(parts[0], size, mem_id, alignment))
    if not banks:
        raise ValueError(f"{what} {spec!r} names no bank; write it as sram:64KiB,dram:16MiB (or one size)")
    return TargetMemoryMap(banks)


def parse_one_size(spec: str, what: str) -> int:
    """The bytes of a bank list that must name one bank (`150000`, `146KiB`, `sram:146KiB`): the tiling
    budget, in the grammar of `parse_memory_map`; ValueError when it names several."""
    banks = parse_memory_map(spec, what).banks
    if len(banks) != 1:
        raise ValueError(
            f"{what} {_shown(spec)} names {len(banks)} banks; give one size, e.g. 150000 or 146KiB"
        )
    return banks[0].size


_SIZE = re.compile(r"([0-9]+)\s*([A-Za-z]*)")
_DIGITS = re.compile(r"[0-9]+")


def _bytes(where: str, text: str) -> int:
    match = _SIZE.fullmatch(text.strip())
    unit = match.group(2).lower() if match else ""
    if not match or unit not in _UNITS:
        raise ValueError(f"{where}: size {text!r} is not a number (ASCII digits) of B, KiB, MiB or GiB")
    size = _small_int(match.group(1))
    if size is None or size * _UNITS[unit] > MAX_COORDINATE:
        raise ValueError(
            f"{where}: size {_shown(text)} is beyond 2^62 bytes, more than solvers can represent"
        )
    return size * _UNITS[unit]


def _alignment(where: str, text: str) -> int:
    value = _small_int(text.strip()) if _DIGITS.fullmatch(text.strip()) else None
    if value is None or value < 1 or value & (value - 1) or value > MAX_COORDINATE:
        raise ValueError(
            f"{where}: alignment {_shown(text)} is not a power of two (1, 2, 4, ..., 64, ...) in ASCII digits"
        )
    return value


def _small_int(digits: str) -> int | None:
    """int(digits), or None past 19 digits (beyond 2^62 anyway; Python refuses more than 4,300)."""
    return int(digits) if len(digits.lstrip("0")) <= len(str(MAX_COORDINATE)) else None


def _shown(text: str) -> str:
    return repr(text) if len(text) <= 40 else f"{text[:20]!r}... ({len(text):,} characters)"


def bank_buffer_sizes(sizes: list[int], banks: Sequence[Bank], arena_sizes: dict[int, int]) -> list[int]:
    """`non_const_buffer_sizes` as ExecuTorch's BankedGreedy writes them over `banks` (a memory map's,
    and each device's copy of it).

    Every declared bank has an entry (0 when empty), and a bank left empty gets no XNNPACK
    padding: ExecuTorch pads only the arenas that hold something.
    """
    out = list(sizes) + [0] * (max(bank.pool for bank in banks) + 1 - len(sizes))
    for bank in banks:
        if arena_sizes.get(bank.pool, 0) == 0:
            out[bank.pool] = 0
    return out
