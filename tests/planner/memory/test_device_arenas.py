"""Device arenas: with enable_non_cpu_memory_planning, one arena per (device, index), numbered as stock numbers them,
and named by their device wherever a user sees them (plots, results, `memplan inspect`)."""

from __future__ import annotations

import pytest
import torch
from executorch.exir import ExecutorchBackendConfig, to_edge
from executorch.exir.backend.test.device_util import DeviceAwarePartitioner
from executorch.exir.banked_memory_planning import Bank, BankedGreedy, TargetMemoryMap
from executorch.exir.memory_planning import MemoryPlanningAlgorithmSuite
from executorch.exir.passes import MemoryPlanningPass
from executorch.exir.schema import DeviceType
from executorch.exir.tensor import TensorSpec
from executorch.runtime import Runtime
from helpers.cli import run_cli
from helpers.executorch_programs import tiny, write_read

from memplan import PlannerPass, viz
from memplan.errors import PlanningError, SharedStatePolicyError
from memplan.experiments.zoo import runtime
from memplan.planner.pte.program import read_program
from memplan.validate import validate
from memplan.viz.gantt import POOL_LABEL


class TwoMethods(torch.nn.Module):
    def forward(self, x, y):
        return torch.sin(x) + y

    def offload(self, x, y):
        return (x + y) * torch.cos(y)


class _Method(torch.nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, *args):
        return self.fn(*args)


def _lower_two_methods(planning_pass):
    module, inputs = TwoMethods(), (torch.randn(2, 2), torch.randn(2, 2))
    programs = {
        name: torch.export.export(_Method(getattr(module, name)), inputs, strict=True)
        for name in ("forward", "offload")
    }
    edge = to_edge(programs).to_backend({"offload": DeviceAwarePartitioner("cuda:0")})
    config = ExecutorchBackendConfig(enable_non_cpu_memory_planning=True, memory_planning_pass=planning_pass)
    return edge.to_executorch(config), module


def _plans(program):
    return {
        p.name: (list(p.non_const_buffer_sizes), p.non_const_buffer_device)
        for p in program.executorch_program.execution_plan
    }


@pytest.fixture(scope="module")
def two_methods():
    """The two-method program with `offload` on cuda:0, planned by PlannerPass: (program, pass, module)."""
    pass_ = PlannerPass(solver="bestfit")
    program, module = _lower_two_methods(pass_)
    return program, pass_, module


def test_device_arenas_are_numbered_and_tagged_as_stock(two_methods):
    stock, _ = _lower_two_methods(MemoryPlanningPass())
    mine, pass_, module = two_methods
    assert {m: devices for m, (_, devices) in _plans(mine).items()} == {
        m: devices for m, (_, devices) in _plans(stock).items()
    }
    sizes, devices = _plans(mine)["offload"]
    assert [(d.buffer_idx, d.device_type, d.device_index) for d in devices] == [(2, DeviceType.CUDA, 0)]
    assert len(sizes) == len(_plans(stock)["offload"][0])
    assert {b.pool for b in pass_.results["offload"].problem.buffers} == {1, 2}
    assert not validate(pass_.results["offload"].problem, pass_.results["offload"].plan)

    # The host method loads and runs as eager, call after call; the device method asks for device
    # memory, which a CPU-only runtime refuses (as for the stock program).
    program = Runtime.get().load_program(mine.buffer)
    forward = program.load_method("forward")
    for _ in range(3):
        x, y = torch.randn(2, 2), torch.randn(2, 2)
        assert torch.allclose(forward.execute([x, y])[0], module.forward(x, y))
    with pytest.raises(RuntimeError):
        program.load_method("offload")


def test_results_and_plots_name_the_device_of_each_arena(two_methods):
    _, pass_, _ = two_methods
    result = pass_.results["offload"]
    assert result.problem.pool_names == {2: "cuda:0"}
    assert result.note.endswith("device arenas: mem_id 2 · cuda:0")
    assert "pools [1, 2 (cuda:0)]" in repr(result.problem)

    ax = viz.gantt(result.problem, result.plan)
    assert [t.get_text() for t in ax.texts if t.get_gid() == POOL_LABEL] == [
        " mem_id 1",
        " mem_id 2 · cuda:0",
    ]
    _, labels = viz.profile(result.problem, result.plan).get_legend_handles_labels()
    assert "live, mem_id 2 · cuda:0" in labels
    titles = [ax.get_title() for ax in viz.bank_profile(result.problem, result.plan).axes]
    assert titles[0].startswith("mem_id 1: ") and titles[1].startswith("mem_id 2 · cuda:0: ")
    host = pass_.results["forward"]  # nothing of it on a device: one pool, no label, as before
    assert not host.problem.pool_names and "device" not in host.note
    assert not [t for t in viz.gantt(host.problem, host.plan).texts if t.get_gid() == POOL_LABEL]


def test_inspect_names_the_device_of_each_arena(two_methods, tmp_path, capsys):
    program, pass_, _ = two_methods
    pte = tmp_path / "two.pte"
    pte.write_bytes(program.buffer)
    code, out, err = run_cli(["inspect", str(pte), "--brief", "--out", str(tmp_path / "two.png")], capsys)
    assert code == 0, err
    sizes = pass_.results["offload"].buffer_sizes
    assert f"| {sizes[1]:,} + {sizes[2]:,} (cuda:0) " in out
    assert f"device arenas: mem_id 2 on cuda:0 ({sizes[2]:,} bytes)" in out
    assert out.count("cuda:0") == 2  # the host method names no device
    assert (tmp_path / "two.png").stat().st_size > 0
    layout = read_program(program.buffer).methods
    assert layout["offload"].devices == {2: "cuda:0"} and not layout["forward"].devices
    derived = layout["offload"].problem
    assert derived is not None and derived.pool_label(2) == "mem_id 2 · cuda:0"


def _retagging(base: type):
    """`base` (a planning pass) that first moves every relu and cat result to host device index 1."""

    class Retag(base):  # type: ignore[misc, valid-type]
        def run(self, graph_module, graph_signature=None):
            for node in graph_module.graph.nodes:
                spec = node.meta.get("spec")
                name = str(node.target)
                if isinstance(spec, TensorSpec) and any(op in name for op in ("relu", "cat")):
                    spec.device_index = 1
            return super().run(graph_module, graph_signature)

    return Retag


@pytest.mark.parametrize("name", ["chain", "stateful"])
def test_a_second_host_device_gets_its_own_arena_and_runs_as_eager(name):
    model = tiny(name)
    stock = runtime.lower(
        model, memory_planning_pass=_retagging(MemoryPlanningPass)(), enable_non_cpu_memory_planning=True
    )
    pass_ = _retagging(PlannerPass)(solver="bestfit")
    mine = runtime.lower(model, memory_planning_pass=pass_, enable_non_cpu_memory_planning=True)
    runtime.check_outputs(model, mine.buffer)
    ((stock_sizes, stock_devices),) = _plans(stock).values()
    ((sizes, devices),) = _plans(mine).values()
    assert devices is None and stock_devices is None  # host arenas carry no device entry, as in stock
    assert len(sizes) == len(stock_sizes)
    result = pass_.results["forward"]
    assert result.arenas.devices  # the index-1 arena exists ...
    (pool,) = result.arenas.devices
    assert result.problem.pool_label(pool) == f"mem_id {pool} · cpu:1"  # plots and reports say which
    assert any(b.pool == pool for b in result.problem.buffers)  # ... holds tensors ...
    assert not validate(result.problem, result.plan)  # ... and never shares bytes with the host arena


def test_pinned_tensors_and_devices_are_refused_like_stock():
    class Pin(PlannerPass):
        def run(self, graph_module, graph_signature=None):
            for node in graph_module.graph.nodes:
                spec = node.meta.get("spec")
                if isinstance(spec, TensorSpec) and "relu" in str(node.target):
                    spec.device, spec.mem_id = DeviceType.CUDA, 1
            return super().run(graph_module, graph_signature)

    with pytest.raises(PlanningError, match="pinned"):
        runtime.lower(tiny("chain"), memory_planning_pass=Pin(), enable_non_cpu_memory_planning=True)


def test_under_a_memory_map_each_device_plans_over_its_own_copy_of_the_banks():
    """As stock's BankedGreedy per device: host tensors in the map's banks, device tensors in the
    device's copy of them (arenas numbered after the host's), never in a host bank."""
    model = tiny("chain")
    memory_map = TargetMemoryMap([Bank("sram", 1024, 1), Bank("dram", 1 << 20, 2)])
    stock = runtime.lower(
        model,
        memory_planning_pass=_retagging(MemoryPlanningPass)(
            MemoryPlanningAlgorithmSuite(algo_list=[BankedGreedy(memory_map)])
        ),
        enable_non_cpu_memory_planning=True,
    )
    pass_ = _retagging(PlannerPass)(solver="bestfit", memory_map=memory_map)
    mine = runtime.lower(model, memory_planning_pass=pass_, enable_non_cpu_memory_planning=True)
    runtime.check_outputs(model, mine.buffer)
    ((stock_sizes, _),) = _plans(stock).values()
    ((sizes, _),) = _plans(mine).values()
    assert len(sizes) == len(stock_sizes) == 5  # [constants, sram, dram, sram · cpu:1, dram · cpu:1]
    result = pass_.results["forward"]
    assert set(result.arenas.devices) == {3, 4}
    assert [b.name for b in result.problem.banks] == ["sram", "dram", "sram · cpu:1", "dram · cpu:1"]
    on_device = {bid for bid, spec in result.specs.items() if spec.device_index == 1}
    assert on_device
    for bid, spec in result.specs.items():
        assert (spec.mem_id in (3, 4)) == (bid in on_device), (bid, spec.mem_id)
    assert sizes[3] > 0 and not validate(result.problem, result.plan)


def test_state_shared_across_methods_with_a_device_arena_is_refused_like_stock():
    """Shared state takes mem_id 2, which a device arena would also be: stock refuses, and so does memplan,
    naming the method and its arenas (never a program whose state and device tensors share an arena)."""

    def retag_relu(base):
        class Retag(base):  # type: ignore[misc, valid-type]
            def run(self, graph_module, graph_signature=None):
                for node in graph_module.graph.nodes:
                    spec = node.meta.get("spec")
                    if isinstance(spec, TensorSpec) and "relu" in str(node.target):
                        spec.device_index = 1
                return super().run(graph_module, graph_signature)

        return Retag

    model = write_read()
    with pytest.raises(ValueError, match="Cannot share mutable buffers"):
        runtime.lower(
            model,
            memory_planning_pass=retag_relu(MemoryPlanningPass)(share_mutable_buffers=True),
            enable_non_cpu_memory_planning=True,
        )
    with pytest.raises(SharedStatePolicyError, match="method 'noise'.*mem_id 2"):
        runtime.lower(
            model, memory_planning_pass=retag_relu(PlannerPass)(), enable_non_cpu_memory_planning=True
        )
