"""Extraction means what ExecuTorch's planner (and so the runtime) does.

Each check lowers a tiny program twice from the same edge program: once with
ExecuTorch's own `MemoryPlanningPass` (recording what it gave each tensor) and
once extracting the problem, then compares the two by buffer id (node name).
"""

from __future__ import annotations

import pytest
import torch
from executorch import exir
from executorch.exir import ExecutorchBackendConfig
from executorch.exir.backend.partitioner import DelegationSpec, Partitioner, PartitionResult
from executorch.exir.backend.test.backend_with_compiler_demo import BackendWithCompilerDemo
from executorch.exir.backend.utils import tag_mutated_buffer
from executorch.exir.dialects._ops import ops as exir_ops
from helpers.executorch_programs import ExtractRecorder, StockRecorder, tiny

from memplan import PlannerPass
from memplan.experiments.zoo import runtime
from memplan.peak_bound import lower_bound
from memplan.planner.graph.extract import XNNPACK_PADDING, ExtractionError
from memplan.problem import BufferKind

_MODELS: dict[str, object] = {}


def model(name: str):
    """One ZooModel per name, so the harness exports it once and copies the edge program."""
    if name not in _MODELS:
        _MODELS[name] = tiny(name)
    return _MODELS[name]


_BOTH: dict[tuple, tuple[StockRecorder, ExtractRecorder]] = {}


def both(name: str, **flags):
    """(stock recorder, extract recorder) after lowering `name` with each (cached: read only)."""
    key = (name, tuple(sorted(flags.items())))
    if key not in _BOTH:
        _BOTH[key] = _lower_both(name, **flags)
    return _BOTH[key]


def _lower_both(name: str, **flags):
    stock, ours = StockRecorder(**flags), ExtractRecorder(**flags)
    # Unplanned mutable buffers must be emitted by name.
    config = {"emit_mutable_buffer_names": not flags.get("alloc_mutable_buffers", True)}
    runtime.lower(model(name), memory_planning_pass=stock, **config)
    runtime.lower(model(name), memory_planning_pass=ours, **config)
    return stock, ours


@pytest.mark.parametrize("name", ["chain", "stateful", "dynamic", "zero_size", "mlp_xnnpack"])
def test_lifetimes_and_planned_set_match_executorch(name):
    stock, ours = both(name)
    (record,), (ex,) = stock.records, ours.extractions
    planned = {bid for bid, (_, _, off, size) in record.items() if off is not None and size > 0}
    assert {b.id for b in ex.problem.buffers} == planned
    assert set(ex.zero_size) == {
        bid for bid, (_, _, off, size) in record.items() if off is not None and size == 0
    }
    for buf in ex.problem.buffers:
        (first, last), _, _, size = record[buf.id]
        assert (buf.start, buf.end) == (first, last + 1), buf.id  # inclusive -> half-open
        assert buf.size == size and buf.pool == 1 and buf.alignment == 16


def test_lower_bound_is_at_most_the_stock_arena():
    for name in ["chain", "stateful", "dynamic", "zero_size", "mlp_xnnpack"]:
        stock, ours = both(name)
        (sizes,), (ex,) = stock.buffer_sizes, ours.extractions
        assert lower_bound(ex.problem) + ex.extra_padding <= sizes[1], name


def test_kinds_labels_and_ids():
    _, ours = both("stateful")
    (ex,) = ours.extractions
    by_id = {b.id: b for b in ex.problem.buffers}
    assert by_id["x"].kind is BufferKind.GRAPH_INPUT and by_id["x"].label == "input"
    assert by_id["b_state"].kind is BufferKind.MUTABLE_STATE and by_id["b_state"].label == "state"
    assert by_id["aten_relu_default"].label == "aten.relu.out"
    assert any(b.kind is BufferKind.GRAPH_OUTPUT for b in ex.problem.buffers)
    # Mutable state lives for the whole method, whatever its last use.
    assert (by_id["b_state"].start, by_id["b_state"].end) == (0, ex.num_nodes)
    assert not any(b.id.startswith("alloc") for b in ex.problem.buffers)


@pytest.mark.parametrize("alignment", [1, 64])
def test_alignment_is_the_pass_alignment(alignment):
    stock, ours = both("chain", alignment=alignment)
    (record,), (ex,) = stock.records, ours.extractions
    for buf in ex.problem.buffers:
        assert buf.alignment == alignment
        assert buf.size % alignment == 0 and buf.size == record[buf.id][3]
    pass_ = PlannerPass(solver="bestfit", alignment=alignment)
    et = runtime.lower(model("chain"), memory_planning_pass=pass_)
    offsets = pass_.results["forward"].plan.offsets
    assert all(off % alignment == 0 for off in offsets.values())
    runtime.check_outputs(model("chain"), et.buffer)


@pytest.mark.parametrize(
    "flags",
    [
        dict(alloc_graph_input=False),
        dict(alloc_graph_output=False),
        dict(alloc_mutable_buffers=False),
        dict(alloc_graph_input=False, alloc_graph_output=False),
    ],
)
def test_alloc_flags_filter_like_apply_algo(flags):
    stock, ours = both("stateful", **flags)
    (record,), (ex,) = stock.records, ours.extractions
    planned = {bid for bid, (_, _, off, size) in record.items() if off is not None and size > 0}
    assert {b.id for b in ex.problem.buffers} == planned
    kinds = {b.kind for b in ex.problem.buffers}
    assert (BufferKind.GRAPH_INPUT in kinds) == flags.get("alloc_graph_input", True)
    assert (BufferKind.GRAPH_OUTPUT in kinds) == flags.get("alloc_graph_output", True)
    assert (BufferKind.MUTABLE_STATE in kinds) == flags.get("alloc_mutable_buffers", True)


def test_zero_size_tensors_get_a_place_but_no_bytes():
    pass_ = PlannerPass(solver="bestfit")
    et = runtime.lower(model("zero_size"), memory_planning_pass=pass_)
    _, ours = both("zero_size")
    (ex,) = ours.extractions
    assert ex.zero_size and all(s.allocated_memory == 0 for s in ex.zero_size.values())
    assert not set(ex.zero_size) & {b.id for b in ex.problem.buffers}
    gm = et.exported_program().graph_module
    from executorch.exir.memory_planning import get_node_tensor_specs

    zero = [s for n in gm.graph.nodes for s in get_node_tensor_specs(n) if s.allocated_memory == 0]
    assert zero and all(s.mem_id == 1 and s.mem_offset is not None and s.mem_obj_id is not None for s in zero)
    runtime.check_outputs(model("zero_size"), et.buffer)


def test_dynamic_bound_tensors_are_planned_at_their_upper_bound():
    _, ours = both("dynamic")
    (ex,) = ours.extractions
    assert ex.problem.buffer("x").size == 10 * 16 * 4  # Dim max=10, 16 floats
    pass_ = PlannerPass(solver="bestfit")
    et = runtime.lower(model("dynamic"), memory_planning_pass=pass_)
    runtime.check_outputs(model("dynamic"), et.buffer)  # n = 4, 1, 10


def test_control_flow_submodules_are_planned_and_reserved():
    pass_ = PlannerPass(solver="bestfit")
    et = runtime.lower(model("cond"), memory_planning_pass=pass_)
    result = pass_.results["forward"]
    (reserved,) = [b for b in result.problem.buffers if b.kind is BufferKind.SUBMODULE]
    branches = list(result.submodules.values())
    assert len(branches) == 2
    assert reserved.offset == 0 and reserved.pool == 1
    assert reserved.size == max(r.buffer_sizes[1] for r in branches)
    assert (reserved.start, reserved.end) == (0, len(et.exported_program().graph_module.graph.nodes))
    for sub in branches:
        assert sub.plan.arena_sizes[1] <= reserved.size
    runtime.check_outputs(model("cond"), et.buffer)  # both branches taken


def test_inplace_results_keep_their_storage_alive_until_last_use():
    """ExecuTorch 1.5.1 ends the lifetime at the in-place op; the extraction stretches it."""
    pass_ = PlannerPass(solver="bestfit")
    et = runtime.lower(model("reinplace"), memory_planning_pass=pass_)
    problem = pass_.results["forward"].problem
    nodes = list(et.exported_program().graph_module.graph.nodes)
    inplace = next(n for n in nodes if "index_put_" in n.name)
    last_use = max(nodes.index(u) for u in inplace.users)
    written = problem.buffer("aten_mul_tensor")  # a = x * 2, which index_put_ writes into
    assert nodes.index(inplace) < last_use
    assert written.end == last_use + 1
    runtime.check_outputs(model("reinplace"), et.buffer)


def test_xnnpack_padding_and_delegate_io_are_planned():
    pass_ = PlannerPass(solver="bestfit")
    et = runtime.lower(model("mlp_xnnpack"), memory_planning_pass=pass_)
    result = pass_.results["forward"]
    delegate_io = [b for b in result.problem.buffers if b.label.startswith("delegate:Xnnpack")]
    assert delegate_io, "the delegate's outputs are planned like any tensor"
    assert result.buffer_sizes[1] == result.plan.arena_sizes[1] + XNNPACK_PADDING
    assert runtime.stock_arena_bytes(et)["forward"] == result.buffer_sizes
    runtime.check_outputs(model("mlp_xnnpack"), et.buffer)


class _AddWithStatePartitioner(Partitioner):
    """Delegates the adds and, like ExecuTorch's backends, the buffers they mutate."""

    def partition(self, edge_program):
        for node in edge_program.graph.nodes:
            if node.op == "call_function" and node.target == exir_ops.edge.aten.add.Tensor:
                node.meta["delegation_tag"] = "tag0"
        tag_mutated_buffer(edge_program)
        spec = DelegationSpec(BackendWithCompilerDemo.__name__, [])
        return PartitionResult(tagged_exported_program=edge_program, partition_tags={"tag0": spec})


class _TwoStates(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("delegated", torch.zeros(4, 4))
        self.register_buffer("kept", torch.ones(4, 4))

    def forward(self, x):
        self.delegated.add_(x)
        self.kept.mul_(x)
        return x.sin() * 2


def test_state_consumed_by_a_delegate_is_not_planned():
    ep = torch.export.export(_TwoStates(), (torch.rand(4, 4),), strict=True)
    lowered = exir.to_edge(ep).to_backend(_AddWithStatePartitioner())
    pass_ = PlannerPass(solver="bestfit")
    et = lowered.to_executorch(ExecutorchBackendConfig(memory_planning_pass=pass_))
    problem = pass_.results["forward"].problem
    state = [b for b in problem.buffers if b.kind is BufferKind.MUTABLE_STATE]
    assert [b.label for b in state] == ["kept"]
    assert "delegated" not in {b.label for b in problem.buffers}
    signature = et.exported_program().graph_signature
    assert set(signature.buffers_to_mutate.values()) == {"kept"}
    assert len(et.buffer) > 0


def test_an_alias_that_does_not_fit_its_base_names_both_nodes():
    class Shrink(PlannerPass):
        def run(self, graph_module, graph_signature=None):
            for node in graph_module.graph.nodes:
                if node.name == "aten_sigmoid_default":
                    node.meta["_share_alloc_with_arg_idx"] = 0
                    node.meta["_shared_alloc_offset"] = 64  # the base has 128 bytes
            return super().run(graph_module, graph_signature)

    with pytest.raises(ExtractionError) as err:
        runtime.lower(model("chain"), memory_planning_pass=Shrink(solver="bestfit"))
    assert "aten_sigmoid_default" in str(err.value) and "'y'" in str(err.value)


def test_storage_base_alias_becomes_a_group_member():
    class ReluInPlace(PlannerPass):
        """Let relu write into its input's storage, like a backend pass would."""

        def run(self, graph_module, graph_signature=None):
            for node in graph_module.graph.nodes:
                if node.name == "aten_relu_default":
                    node.meta["_share_alloc_with_arg_idx"] = 0
            return super().run(graph_module, graph_signature)

    pass_ = ReluInPlace(solver="bestfit")
    et = runtime.lower(model("chain"), memory_planning_pass=pass_)
    problem = pass_.results["forward"].problem
    assert problem.parent_of("aten_relu_default") == ("x", 0)
    x, relu = problem.buffer("x"), problem.buffer("aten_relu_default")
    assert x.end >= relu.end  # the base's lifetime covers the alias
    plan = pass_.results["forward"].plan
    assert plan.offsets["aten_relu_default"] == plan.offsets["x"]
    runtime.check_outputs(model("chain"), et.buffer)
