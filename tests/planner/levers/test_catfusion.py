"""Cat fusion end to end: which cats go, why the others stay, and that every
program still computes what eager PyTorch computes in executorch.runtime."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from memplan.errors import InfeasibleError
from memplan.experiments import zoo
from memplan.experiments.bench.catfusion_report import main as report_main
from memplan.experiments.zoo import ZooModel, runtime
from memplan.experiments.zoo.models.common import zoo_recipe
from memplan.experiments.zoo.models.concat import DenseBlock, DenseNetStem
from memplan.peak_bound import lower_bound
from memplan.planner.levers.cat.decisions import CatStatus
from memplan.planner.levers.refusals import Refusal
from memplan.planner.pass_ import PlannerPass
from memplan.validate import validate


def make(name: str, module: nn.Module, *inputs: torch.Tensor, **kw) -> ZooModel:
    kw.setdefault("convert_to_linear", False)
    kw.setdefault("backend_config", zoo_recipe()["backend_config"])  # constant subgraphs folded
    return ZooModel(name, name, {"forward": (module.eval(), inputs)}, [("forward", inputs)], **kw)


def lower(model: ZooModel, **options):
    """Lower with best-fit and cat fusion; check outputs; return (program, method result)."""
    planner = PlannerPass(solver="bestfit", **options)
    program = runtime.lower(model, memory_planning_pass=planner)
    runtime.check_outputs(model, program.buffer)
    return program, planner.results["forward"]


def kernels(program) -> list[str]:
    """Operator name of every kernel call of the first method, in order."""
    plan = program.executorch_program.execution_plan[0]
    return [
        plan.operators[i.instr_args.op_index].name
        for i in plan.chains[0].instructions
        if hasattr(i.instr_args, "op_index")
    ]


def arena(program) -> int:
    return sum(program.executorch_program.execution_plan[0].non_const_buffer_sizes)


def statuses(result) -> list[CatStatus]:
    return [d.status for d in result.cat_report.decisions]


# -- the cats that go -----------------------------------------------------------------


def test_seed_cat_is_removed_and_the_producers_write_into_the_output():
    model = zoo.get("cat_seed")
    program, result = lower(model)
    unfused, _ = lower(model, cat_fusion=False)
    assert "aten::cat" in kernels(unfused)
    assert "aten::cat" not in kernels(program)
    assert "aten::cat" not in [op.name for op in program.executorch_program.execution_plan[0].operators]
    assert len(kernels(program)) == len(kernels(unfused)) - 1
    report = result.cat_report
    assert statuses(result) == [CatStatus.FUSED]
    assert report.copy_bytes_removed == 8 * 16 * 4
    assert report.arena_with <= report.arena_without
    assert arena(program) <= arena(unfused)
    # cos and sin sit back to back inside the cat output, in that order.
    out, cos, sin = (result.specs[b] for b in ("aten_cat_default", "aten_cos_default", "aten_sin_default"))
    assert (cos.mem_offset, sin.mem_offset) == (out.mem_offset, out.mem_offset + 4 * 16 * 4)
    assert cos.mem_id == sin.mem_id == out.mem_id
    group = [g for g in result.problem.groups if g.parent == "aten_cat_default"]
    assert group and group[0].members == (("aten_cos_default", 0), ("aten_sin_default", 256))
    parent = result.problem.buffer("aten_cat_default")
    assert parent.start == result.problem.buffer("aten_cos_default").start
    assert not validate(result.problem, result.plan)


def test_unet_skip_concatenations_are_fused_and_the_arena_shrinks():
    model = zoo.get("unet")
    program, result = lower(model)
    unfused, _ = lower(model, cat_fusion=False)
    report = result.cat_report
    print(f"\nunet: {report.summary()}")
    assert statuses(result) == [CatStatus.FUSED, CatStatus.FUSED]
    assert kernels(unfused).count("aten::cat") == 2 and "aten::cat" not in kernels(program)
    assert report.arena_with <= report.arena_without
    assert arena(program) <= arena(unfused)
    assert report.lower_bound_with == lower_bound(result.problem)


def dense_stem() -> ZooModel:
    torch.manual_seed(0)
    return make("dense_stem", DenseNetStem(n_layers=3), torch.randn(1, 3, 8, 8))


def test_densenet_block_behind_a_stem_fuses_the_last_cat_and_aliases_the_earlier_ones():
    # Growth allowed: this is about the layout; the arena policy is the next test.
    program, result = lower(dense_stem(), cat_fusion_allow_growth=True)
    report = result.cat_report
    print(f"\ndense_stem: {report.summary()}")
    # cat([x]), cat([x, f1]), cat([x, f1, f2]) are prefixes of the final cat([x, f1, f2, f3]).
    assert statuses(result) == [CatStatus.ALIASED] * 3 + [CatStatus.FUSED]
    assert "aten::cat" not in kernels(program)
    final = report.decisions[-1]
    for d in report.decisions[:-1]:  # every prefix starts where the region starts
        assert result.specs[d.output].mem_offset == result.specs[final.output].mem_offset
    # The final cat was the graph output: the program now returns its memory.alloc node,
    # and the signature names that node.
    exported = program.exported_program()
    returned = [n.name for n in exported.graph.output_node().args[0]]
    assert [o.arg.name for o in exported.graph_signature.output_specs] == returned
    assert returned[0].startswith("alloc")


def test_densenet_block_behind_a_stem_never_gets_a_larger_arena():
    model = dense_stem()
    program, result = lower(model)
    unfused, _ = lower(model, cat_fusion=False)
    report = result.cat_report
    assert report.copy_bytes_removed > 0
    assert kernels(program).count("aten::cat") == kernels(unfused).count("aten::cat") - len(
        [d for d in report.decisions if d.status is not CatStatus.REFUSED]
    )
    assert report.arena_with <= report.arena_without
    assert arena(program) <= arena(unfused)


def bare_dense_block() -> ZooModel:
    """A DenseNet block fed straight from the graph input: every cat reads x."""
    torch.manual_seed(0)
    return make("bare_dense_block", DenseBlock(), torch.randn(1, 16, 16, 16))


def test_bare_densenet_block_keeps_its_cats_because_every_cat_reads_the_graph_input():
    program, result = lower(bare_dense_block())
    assert statuses(result) == [CatStatus.REFUSED] * 5
    assert all(d.reasons == (Refusal.GRAPH_INPUT,) for d in result.cat_report.decisions)
    assert kernels(program).count("aten::cat") == 5


def test_partial_fusion_clones_the_graph_input_once_and_removes_every_cat():
    model = bare_dense_block()
    program, result = lower(model, cat_fusion_partial=True, cat_fusion_allow_growth=True)
    report = result.cat_report
    print(f"\ndensenet_block (partial): {report.summary()}")
    assert statuses(result) == [CatStatus.ALIASED] * 4 + [CatStatus.PARTIAL]
    assert "aten::cat" not in kernels(program)
    assert kernels(program).count("aten::clone") == 1
    partial = report.decisions[-1]
    assert [i.placement for i in partial.inputs] == ["copy"] + ["member"] * 4
    assert partial.copy_bytes_removed == partial.nbytes - 16 * 16 * 16 * 4
    # The graph input is read by the clone only, so its buffer dies there, not at the last cat:
    # the clone stands where cat([x]) stood, the node after that cat's memory.alloc.
    x = result.problem.buffer(partial.inputs[0].buffer)
    first_alloc = result.problem.buffer(report.decisions[0].output).start
    assert x.end == first_alloc + 2  # half-open: last read at first_alloc + 1
    # Under the default policy the arena never grows.
    program, result = lower(model, cat_fusion_partial=True)
    unfused, _ = lower(model, cat_fusion=False)
    assert result.cat_report.arena_with <= result.cat_report.arena_without
    assert arena(program) <= arena(unfused)


class ConstantAndInputs(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.w = nn.Parameter(torch.randn(4, 16))

    def forward(self, x):
        s = x.sin()
        return torch.cat([self.w, s, x, s]).relu()


def test_partial_fusion_clones_a_parameter_a_graph_input_and_a_repeat():
    program, result = lower(
        make("partial_mix", ConstantAndInputs(), torch.randn(4, 16)), cat_fusion_partial=True
    )
    [decision] = result.cat_report.decisions
    assert decision.status is CatStatus.PARTIAL
    assert [i.placement for i in decision.inputs] == ["copy", "member", "copy", "copy"]
    assert [i.reason for i in decision.inputs] == [
        Refusal.CONSTANT,
        None,
        Refusal.GRAPH_INPUT,
        Refusal.DUPLICATE_INPUT,
    ]
    assert kernels(program).count("aten::clone") == 3 and "aten::cat" not in kernels(program)
    assert decision.copy_bytes_removed == 256


def test_partial_fusion_never_clones_what_a_plain_copy_would_get_wrong():
    model = make("dtypes", MixedDtypes(), torch.randn(4, 16), torch.randint(0, 5, (4, 16), dtype=torch.int32))
    planner = PlannerPass(solver="bestfit", cat_fusion_partial=True)
    runtime.lower(model, memory_planning_pass=planner)
    [decision] = planner.results["forward"].cat_report.decisions
    assert decision.status is CatStatus.REFUSED and decision.reasons == (Refusal.DTYPE_MISMATCH,)


class Nested(nn.Module):
    def forward(self, x):
        inner = torch.cat([x.sin(), x.cos()])
        return torch.cat([inner, x.tanh()]).relu()


def test_nested_cats_form_one_region_with_nested_groups():
    program, result = lower(make("nested", Nested(), torch.randn(4, 16)))
    assert statuses(result) == [CatStatus.FUSED, CatStatus.FUSED]
    assert "aten::cat" not in kernels(program)
    inner, outer = (d.output for d in result.cat_report.decisions)
    assert result.problem.parent_of(inner) == (outer, 0)
    assert result.problem.root_of("aten_cos_default") == (outer, 256)
    assert result.specs["aten_tanh_default"].mem_offset == result.specs[outer].mem_offset + 512


class ViewInput(nn.Module):
    def forward(self, x):
        return torch.cat([x.sin().view(2, 16), x.cos().reshape(2, 16)]).sigmoid()


def test_an_input_seen_through_a_view_moves_its_base():
    program, result = lower(make("view", ViewInput(), torch.randn(4, 8)))
    assert statuses(result) == [CatStatus.FUSED]
    assert [i.buffer for i in result.cat_report.decisions[0].inputs] == [
        "aten_sin_default",
        "aten_cos_default",
    ]


class InnerDimLeadingOne(nn.Module):
    def forward(self, x):
        return torch.cat([x.sin(), x.cos()], dim=1).relu()


def test_inner_dim_with_leading_dims_of_size_one_is_fused():
    program, result = lower(make("lead1", InnerDimLeadingOne(), torch.randn(1, 4, 16)))
    assert statuses(result) == [CatStatus.FUSED]
    assert "aten::cat" not in kernels(program)


class GraphOutputInput(nn.Module):
    def forward(self, x):
        s = x.sin()
        return torch.cat([s, x.cos()]) * 2, s


def test_an_input_that_is_also_a_graph_output_is_fused_when_outputs_are_planned():
    program, result = lower(make("out_input", GraphOutputInput(), torch.randn(4, 16)))
    assert statuses(result) == [CatStatus.FUSED]


class Misaligned(nn.Module):
    def forward(self, a, b):
        return torch.cat([a.sin(), b.cos()]).relu()


def test_relaxed_alignment_fuses_an_input_at_an_element_offset():
    model = make("misaligned", Misaligned(), torch.randn(3), torch.randn(5))
    program, result = lower(model, cat_fusion_relax_alignment=True)
    assert statuses(result) == [CatStatus.FUSED]
    assert result.specs["aten_cos_default"].mem_offset == result.specs["aten_cat_default"].mem_offset + 12


# -- the cats that stay, with their reasons -------------------------------------------


class TwoInputs(nn.Module):
    def forward(self, x, y):
        return torch.cat([x, y]).relu()


class GraphInputAndOp(nn.Module):
    def forward(self, x):
        return torch.cat([x, x.sin()]).relu()


class ParamAndConstants(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.w = nn.Parameter(torch.randn(4, 16))
        self.register_buffer("b", torch.ones(4, 16))

    def forward(self, x):
        return torch.cat([self.w, x.sin(), self.b]).relu()


class Twice(nn.Module):
    def forward(self, x):
        s = x.sin()
        return torch.cat([s, s]).relu()


class InnerDim(nn.Module):
    def forward(self, x):
        return torch.cat([x.sin(), x.cos()], dim=1).relu()


class State(nn.Module):
    """Concatenates the state as it was before this call's update."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("state", torch.zeros(4, 16))

    def forward(self, x):
        y = torch.cat([x.sin(), self.state])
        self.state.add_(x)
        return y.relu()


class WrittenLater(nn.Module):
    """index_put becomes index_put_ on `a` after the cat has read it; the cat output is read later."""

    def forward(self, x, idx, v):
        a = x * 2
        y = torch.cat([a, x.cos()])
        b = a.index_put((idx,), v)
        return y.sin() * 3, b


class OutputWrittenLater(nn.Module):
    """index_put_ on the cat output would also change `a`, which is read afterwards."""

    def forward(self, x, idx, v):
        a = x.sin()
        y = torch.cat([a, x.cos()])
        return y.index_put((idx,), v), a * 2


class CondInput(nn.Module):
    def forward(self, x):
        c = torch.cond(x.sum() > 0, lambda x: x.sin() * 2, lambda x: x.cos() - 1, (x,))
        return torch.cat([c, x.tanh()]).relu()


class Dynamic(nn.Module):
    def forward(self, x):
        return torch.cat([x.sin(), x.cos()]).relu() * 2


REINPLACE = {"backend_config": {"run_reinplace_pass": True}}
INDEX_PUT_INPUTS = (torch.randn(4, 8), torch.tensor([1, 2]), torch.randn(2, 8))

REFUSED = {
    "two_graph_inputs": (TwoInputs(), (torch.randn(4, 16), torch.randn(2, 16)), {}, Refusal.GRAPH_INPUT),
    "graph_input_and_op": (GraphInputAndOp(), (torch.randn(4, 16),), {}, Refusal.GRAPH_INPUT),
    "parameter_and_buffer": (ParamAndConstants(), (torch.randn(4, 16),), {}, Refusal.CONSTANT),
    "same_tensor_twice": (Twice(), (torch.randn(4, 16),), {}, Refusal.DUPLICATE_INPUT),
    "inner_dim": (InnerDim(), (torch.randn(4, 16),), {}, Refusal.INNER_DIM),
    "misaligned": (Misaligned(), (torch.randn(3), torch.randn(5)), {}, Refusal.MISALIGNED),
    "mutable_buffer": (State(), (torch.randn(4, 16),), {}, Refusal.MUTABLE_BUFFER),
    "input_written_in_place_later": (
        WrittenLater(),
        INDEX_PUT_INPUTS,
        REINPLACE,
        Refusal.INPUT_WRITTEN_IN_PLACE,
    ),
    "output_written_in_place_later": (
        OutputWrittenLater(),
        INDEX_PUT_INPUTS,
        REINPLACE,
        Refusal.OUTPUT_WRITTEN_IN_PLACE,
    ),
    "control_flow_output": (CondInput(), (torch.randn(4, 16),), {}, Refusal.CONTROL_FLOW_OUTPUT),
    "dynamic_shape": (Dynamic(), (torch.randn(4, 16),), {}, Refusal.DYNAMIC_SHAPE),
}


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_unsafe_cats_are_refused_with_their_reason_and_still_run(case):
    module, inputs, kw, reason = REFUSED[case]
    model = make(case, module, *inputs, **kw)
    if case == "dynamic_shape":
        model.dynamic_shapes = {"forward": ({0: torch.export.Dim("n", min=1, max=10)},)}
        model.calls = [("forward", (torch.randn(n, 16),)) for n in (4, 1, 10)]
    program, result = lower(model)
    [decision] = result.cat_report.decisions
    assert decision.status is CatStatus.REFUSED
    assert reason in decision.reasons, decision.detail
    assert decision.copy_bytes_removed == 0
    assert kernels(program).count("aten::cat") == 1
    if "in_place" in case:
        assert "aten::index_put_" in kernels(program)  # the hazard is really there


class UpdatedState(nn.Module):
    """The updated state (a new activation, copied back into the buffer at the end) is concatenated."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("state", torch.zeros(4, 16))

    def forward(self, x):
        self.state.add_(x)
        return torch.cat([x.sin(), self.state]).relu()


def test_the_updated_state_of_a_mutable_buffer_is_fused_and_survives_calls():
    x = torch.randn(4, 16)
    model = make("updated_state", UpdatedState(), x)
    model.calls = [("forward", (x,)), ("forward", (x * 2,)), ("forward", (x * 3,))]
    program, result = lower(model)  # three calls: the write-back still sees the right bytes
    assert statuses(result) == [CatStatus.FUSED]


def test_unplanned_graph_outputs_refuse_both_as_output_and_as_input():
    model = make("out_input", GraphOutputInput(), torch.randn(4, 16))
    program, result = lower(model, alloc_graph_output=False)
    [decision] = result.cat_report.decisions
    assert decision.reasons == (Refusal.INPUT_NOT_PLANNED,)

    class CatIsOutput(nn.Module):
        def forward(self, x):
            return torch.cat([x.sin(), x.cos()])

    program, result = lower(make("cat_out", CatIsOutput(), torch.randn(4, 16)), alloc_graph_output=False)
    assert result.cat_report.decisions[0].reasons == (Refusal.OUTPUT_NOT_PLANNED,)


class MixedDtypes(nn.Module):
    def forward(self, x, i):
        return torch.cat([x.sin(), i * 2]) * 2


class ChannelsLast(nn.Module):
    def forward(self, x):
        x = x.to(memory_format=torch.channels_last)
        return torch.cat([x.sin(), x.cos()], 1).relu()


@pytest.mark.parametrize(
    "case, model, reason",
    [
        # ExecuTorch 1.5.1's portable cat.out copies int32 bits into a float output unconverted.
        (
            "dtypes",
            make(
                "dtypes", MixedDtypes(), torch.randn(4, 16), torch.randint(0, 5, (4, 16), dtype=torch.int32)
            ),
            Refusal.DTYPE_MISMATCH,
        ),
        # The runtime's channels-last output does not compare equal to eager's in this harness.
        (
            "channels_last",
            make("channels_last", ChannelsLast(), torch.randn(1, 3, 4, 4)),
            Refusal.NOT_CONTIGUOUS,
        ),
    ],
)
def test_refused_cats_where_even_the_stock_program_differs_from_eager_run_exactly_like_it(
    case, model, reason
):
    # Eager PyTorch disagrees with the stock program here; fusion must not change what the program computes.
    planner = PlannerPass(solver="bestfit")
    fused = runtime.lower(model, memory_planning_pass=planner)
    stock = runtime.lower(model)
    assert reason in planner.results["forward"].cat_report.decisions[0].reasons
    got, want = runtime.run_pte(fused.buffer, model.calls), runtime.run_pte(stock.buffer, model.calls)
    assert torch.equal(got[0][0], want[0][0])


class DelegatedLinear(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(16, 16)

    def forward(self, x):
        return torch.cat([self.linear(x), x.sin()]).abs()


def test_a_delegate_output_is_refused():
    from executorch.backends.xnnpack.partition.config.gemm_configs import LinearConfig
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
    from executorch.exir import ExecutorchBackendConfig, to_edge_transform_and_lower

    torch.manual_seed(0)
    module, x = DelegatedLinear().eval(), torch.randn(4, 16)
    edge = to_edge_transform_and_lower(
        torch.export.export(module, (x,)), partitioner=[XnnpackPartitioner(configs=[LinearConfig])]
    )
    planner = PlannerPass(solver="bestfit")
    program = edge.to_executorch(ExecutorchBackendConfig(memory_planning_pass=planner))
    [decision] = planner.results["forward"].cat_report.decisions
    assert Refusal.DELEGATE_OUTPUT in decision.reasons
    [[got]] = runtime.run_pte(program.buffer, [("forward", (x,))])
    assert torch.allclose(got, module(x), atol=1e-4)


class OverlappingPrefixes(nn.Module):
    def forward(self, x):
        a, b, c = x.sin(), x.cos(), x.tanh()
        whole = torch.cat([a, b, c])
        left = torch.cat([a, b])
        right = torch.cat([b, c])
        return whole.relu() + 1, left * 2, right * 3


def test_an_alias_that_would_straddle_another_is_refused():
    # Growth allowed: this is about the layout rule, not about the arena policy.
    program, result = lower(
        make("straddle", OverlappingPrefixes(), torch.randn(4, 16)), cat_fusion_allow_growth=True
    )
    by_status = {d.cat: (d.status, d.reasons) for d in result.cat_report.decisions}
    assert sorted(s for s, _ in by_status.values()) == sorted(
        [CatStatus.FUSED, CatStatus.ALIASED, CatStatus.REFUSED]
    )
    [refused] = [r for s, r in by_status.values() if s is CatStatus.REFUSED]
    assert Refusal.ALIAS_NOT_NESTED in refused


class LongLivedSlot(nn.Module):
    """`a` is born early, `b` late, and a big temporary peaks in between: fusing
    reserves b's slot through the peak, so the arena would grow."""

    def forward(self, x, y):
        a = x.sin()
        s = y.exp().cos().sum()
        b = x.cos() * s
        return torch.cat([a, b]).relu()


def test_a_fusion_that_grows_the_arena_is_undone_unless_growth_is_allowed():
    model = make("grow", LongLivedSlot(), torch.randn(4, 16), torch.randn(64, 64))
    program, result = lower(model)
    [decision] = result.cat_report.decisions
    assert decision.reasons == (Refusal.ARENA_GREW,)
    assert result.cat_report.arena_with == result.cat_report.arena_without
    assert kernels(program).count("aten::cat") == 1
    program, result = lower(model, cat_fusion_allow_growth=True)
    report = result.cat_report
    assert statuses(result) == [CatStatus.FUSED]
    assert report.arena_with > report.arena_without
    assert report.lower_bound_with > report.lower_bound_without


def test_fusion_off_keeps_every_cat_and_reports_nothing():
    program, result = lower(zoo.get("cat_seed"), cat_fusion=False)
    assert result.cat_report is None
    assert "aten::cat" in kernels(program)


def test_report_script_prints_one_row_per_model(capsys):
    assert report_main(["--models", "cat_seed", "--solvers", "bestfit", "--check", "--quiet"]) == 0
    out = capsys.readouterr().out
    row = next(line for line in out.splitlines() if "cat_seed" in line)
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[:8] == ["bestfit", "cat_seed", "1", "1", "0", "0", "0", "512"]
    assert "outputs match" in out


def test_under_a_capacity_only_the_fused_plan_fits():
    model = zoo.get("unet")
    _, result = lower(model)
    fused = result.cat_report.arena_with
    assert fused < result.cat_report.arena_without
    program, result = lower(model, capacity=fused)
    assert result.cat_report.arena_without is None
    assert statuses(result) == [CatStatus.FUSED, CatStatus.FUSED]
    assert arena(program) == fused
    with pytest.raises(InfeasibleError, match="capacity"):
        lower(model, capacity=fused, cat_fusion=False)


def test_under_a_capacity_only_the_unfused_plan_fits():
    model = make("grow", LongLivedSlot(), torch.randn(4, 16), torch.randn(64, 64))
    _, result = lower(model, cat_fusion_allow_growth=True)
    report = result.cat_report
    program, result = lower(model, cat_fusion_allow_growth=True, capacity=report.arena_without)
    assert result.cat_report.decisions[0].reasons == (Refusal.ARENA_GREW,)
    assert arena(program) == report.arena_without
