"""One arena per device, numbered as ExecuTorch's `apply_algo` numbers them.

With `enable_non_cpu_memory_planning` (set by `to_executorch` from the
backend config), ExecuTorch 1.5.1 plans the tensors of each (device type,
device index) on their own: CPU:0 first, then the other devices sorted by
(type value, index), each device's arenas appended after the previous ones;
`graph_module.meta["non_const_buffer_device"]` then names the device of every
arena not on CPU:0, and the runtime allocates those arenas on that device.
Here every device becomes a pool of its own in the `Problem`, so no solver
ever mixes host and device bytes, and the pools get the numbers stock gives.
Control-flow reservations stay on CPU:0, as in stock.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from executorch.exir.schema import DeviceType, NonConstBufferDevice
from executorch.exir.tensor import TensorSpec

from memplan.errors import PlanningError
from memplan.planner.graph.extract import DEFAULT_POOL, Extraction
from memplan.problem import BufferKind

Device = tuple[DeviceType, int]
CPU: Device = (DeviceType.CPU, 0)


def device_of(spec: TensorSpec) -> Device:
    return (spec.device, spec.device_index)


@dataclass(frozen=True)
class DeviceArenas:
    """The device of every arena (mem_id) not on CPU:0."""

    devices: dict[int, Device] = dataclasses.field(default_factory=dict)

    def buffer_devices(self, num_buffers: int) -> list[NonConstBufferDevice] | None:
        """`non_const_buffer_device` for `num_buffers` arenas; None when all are host arenas, as in stock."""
        if not any(dt != DeviceType.CPU for dt, _ in self.devices.values()):
            return None
        return [
            NonConstBufferDevice(buffer_idx=mem_id, device_type=dt, device_index=di)
            for mem_id, (dt, di) in sorted(self.devices.items())
            if mem_id < num_buffers
        ]

    def names(self) -> dict[int, str]:
        """The `Problem.pool_names` of the device arenas: {2: "cuda:0"}."""
        return {pool: device_name(*device) for pool, device in self.devices.items()}


def device_name(device_type: int, index: int) -> str:
    """A device as torch spells it ("cuda:0", "cpu:1"); a type this ExecuTorch does not know by its number."""
    known = device_type in DeviceType._value2member_map_
    return f"{DeviceType(device_type).name.lower() if known else f'device type {device_type}'}:{index}"


def split_by_device(extraction: Extraction, where: str) -> tuple[Extraction, DeviceArenas]:
    """The extraction with each device's tensors in its own pool, and the device of each such pool.

    Under a memory map each device gets its own copy of the banks (same sizes, alignments and
    costs), numbered as stock numbers them. A tensor aliasing another (storage_base) follows its
    base. Unchanged when every tensor is on CPU:0.
    """
    problem = extraction.problem
    specs = {**extraction.spec_of, **extraction.zero_size}
    keys = {bid: device_of(spec) for bid, spec in specs.items()}
    others = sorted({k for k in keys.values() if k != CPU}, key=lambda k: (k[0].value, k[1]))
    if not others:
        return extraction, DeviceArenas()
    pinned = sorted(bid for bid, spec in specs.items() if spec.mem_id is not None)
    if pinned:
        raise PlanningError(
            f"{where}: tensors on non-CPU devices cannot be planned together with tensors a custom pool pass"
            f" pinned to a mem_id ({', '.join(pinned[:10])}); ExecuTorch refuses this too (its device arenas"
            " would collide with the custom pools). Drop the pins or enable_non_cpu_memory_planning."
        )
    on_host = any(k == CPU for k in keys.values())
    reserved = [b.id for b in problem.buffers if b.kind is BufferKind.SUBMODULE]
    if reserved and not on_host:
        raise PlanningError(
            f"{where}: control-flow submodules reserve host memory ({', '.join(reserved)}) but no tensor of"
            " this graph is on the host; ExecuTorch would give that arena to a device"
        )
    # One algorithm run numbers arenas 1..width (a memory map: its largest mem_id); stock appends
    # each device's run after the previous ones, so a device's copy of arena p is base + p - 1.
    width = max((bank.pool for bank in problem.banks), default=DEFAULT_POOL)
    first = 1 + width if on_host else 1
    base_of = {device: first + i * width for i, device in enumerate(others)}

    def moved(pool: int, device: Device) -> int:
        return pool if device == CPU else base_of[device] + pool - 1

    buffers = []
    for buf in problem.buffers:
        device = keys.get(problem.root_of(buf.id)[0], CPU)
        banks = tuple(moved(p, device) for p in buf.banks)
        buffers.append(dataclasses.replace(buf, pool=moved(buf.pool, device), banks=banks))
    arenas = DeviceArenas({moved(p, d): d for d in others for p in range(1, width + 1)})
    copies = tuple(  # each device plans over its own copy of the memory map, as stock's BankedGreedy does
        dataclasses.replace(bank, name=f"{bank.name} · {device_name(*d)}", pool=moved(bank.pool, d))
        for d in others
        for bank in problem.banks
    )
    split = dataclasses.replace(
        problem,
        buffers=tuple(buffers),
        banks=problem.banks + copies,
        pool_names={**problem.pool_names, **arenas.names()},
    )
    return dataclasses.replace(extraction, problem=split), arenas


def place_zero_size(extraction: Extraction, arenas: DeviceArenas) -> None:
    """Give zero-byte tensors on a device that device's arena (`apply_plan` puts them in the host pool)."""
    pool_of: dict[Device, int] = {}
    for pool, device in sorted(arenas.devices.items()):
        pool_of.setdefault(device, pool)  # the device's first arena
    for spec in extraction.zero_size.values():
        if spec.storage_base is None and device_of(spec) in pool_of:
            spec.mem_id = pool_of[device_of(spec)]


def with_device_arenas(sizes: list[int], arenas: DeviceArenas) -> list[int]:
    """`non_const_buffer_sizes` with an entry for every device arena (0 when empty)."""
    width = max(arenas.devices, default=0) + 1
    return list(sizes) + [0] * max(0, width - len(sizes))
