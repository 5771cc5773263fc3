"""State updated where it lives: which write-back copies go, why the others stay, and that every
program still computes what eager PyTorch computes over consecutive calls in executorch.runtime."""

from __future__ import annotations

import copy
import functools

import pytest
import torch
from helpers.executorch_programs import assert_shared
from torch import nn

from memplan.experiments.bench.state_report import FILLING_ROUNDS, program_arena, state_copies
from memplan.experiments.bench.state_report import main as report_main
from memplan.experiments.zoo import ZooModel, runtime
from memplan.experiments.zoo.lowering import Lowered
from memplan.experiments.zoo.models import hybrid
from memplan.experiments.zoo.models.stateful import multi_method_cache
from memplan.peak_bound import lower_bound
from memplan.planner.levers.refusals import Refusal
from memplan.planner.levers.state_in_place import StateStatus, analyze, is_write_back
from memplan.planner.pass_ import PlannerPass

N_CALLS = 5


def make(name: str, module: nn.Module, make_inputs, n_calls: int = N_CALLS, **kw) -> ZooModel:
    """A one-method model called `n_calls` times with fresh inputs (state evolves between calls)."""
    kw.setdefault("convert_to_linear", False)
    kw.setdefault("backend_config", {})
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        calls = [("forward", make_inputs(i)) for i in range(n_calls)]
    return ZooModel(name, name, {"forward": (module.eval(), calls[0][1])}, calls, **kw)


def lower(model: ZooModel, **options):
    """Lower with best-fit; check every call against eager; return (program, pass)."""
    pass_ = PlannerPass(solver="bestfit", **options)
    program = runtime.lower(model, memory_planning_pass=pass_)
    runtime.check_outputs(model, program.buffer)
    return program, pass_


def decisions(pass_: PlannerPass, method: str = "forward"):
    return list(pass_.results[method].state_report.decisions)


# -- the whole feature on a tiny LLM (default run) ----------------------------------------


def test_tiny_llama_decode_writes_its_kv_caches_in_place_over_five_calls():
    model = hybrid.llama_kv(n_layers=2, dim=32, n_heads=2, n_kv_heads=1, seq_len=8, name="tiny_llama")
    on, pass_on = lower(model)
    off, pass_off = lower(model, state_in_place=False)
    assert state_copies(off) == (4, 4 * 1 * 1 * 8 * 16 * 4)
    assert state_copies(on) == (0, 0)
    report = pass_on.results["forward"].state_report
    assert [d.status for d in report.decisions] == [StateStatus.IN_PLACE] * 4
    assert {d.producer.split("_default")[0] for d in report.decisions} == {"aten_index_put"}
    assert report.copy_bytes_removed == 4 * 512 and report.bytes_copied_per_call == 0
    assert report.instructions_removed == 4
    assert pass_off.results["forward"].state_report is None
    # The new values took the caches' own bytes: they are no longer tensors of their own; nor are the
    # output node's specs of the write-backs, which the emitted program never writes (issue 31).
    result_on, result_off = pass_on.results["forward"], pass_off.results["forward"]
    assert len(result_on.problem.buffers) == len(result_off.problem.buffers) - 4 - 4
    assert not any(b.id.startswith("output") for b in result_on.problem.buffers)
    assert lower_bound(result_on.problem) < lower_bound(result_off.problem)
    assert program_arena(on) < program_arena(off)
    # Every index_put is now called with out= its own input cache (one value in the program).
    index_puts = [args for name, args in calls(on) if name == "aten::index_put"]
    assert len(index_puts) == 4 and all(args[0] == args[-1] for args in index_puts)
    assert all(args[0] != args[-1] for name, args in calls(off) if name == "aten::index_put")
    assert "aten::copy_" not in [name for name, _ in calls(on)]
    # The sweep's columns say the same.
    [row_on], [row_off] = Lowered(on, pass_on, 1.0).rows(), Lowered(off, pass_off, 1.0).rows()
    assert (row_on["state_copies_removed"], row_on["state_copy_removed_bytes"]) == (4, 4 * 512)
    assert (row_off["state_copies_removed"], row_off["state_copy_removed_bytes"]) == (0, 0)


def calls(program) -> list[tuple[str, list[int]]]:
    """(operator name, value ids of its arguments) of every kernel call of the first method."""
    plan = program.executorch_program.execution_plan[0]
    return [
        (plan.operators[i.instr_args.op_index].name, list(i.instr_args.args))
        for i in plan.chains[0].instructions
        if hasattr(i.instr_args, "op_index")
    ]


# -- what must be refused, with its reason ---------------------------------------------------


class ReadAfterUpdate(nn.Module):
    """The new value is computed before the old one is read for the last time."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("state", torch.zeros(4, 8))

    def forward(self, x):
        new = x * 2 + 1
        old_sum = self.state.sum(0)
        self.state.copy_(new)
        return old_sum * 3


class Where(nn.Module):
    """`where` reads the state as its new value is written: not a kernel known to be alias-safe."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("state", torch.zeros(32, 32))

    def forward(self, x):
        self.state.copy_(torch.where(x[:32] > 0, self.state, x[:32]))
        h = torch.relu(x @ x.T)  # [64, 64]: larger than the state
        h = torch.sigmoid(h @ h) * 2
        return h.sum(0) + self.state.sum(0).repeat(2)


class DtypeChange(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("state", torch.zeros(4, 8))

    def forward(self, x):
        y = self.state * 2
        self.state.copy_((self.state + x).to(torch.float16))  # copy_ converts back to float32
        return y


class ReturnsTheState(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("state", torch.zeros(4, 8))

    def forward(self, x):
        self.state.add_(x)
        return self.state


class StateFromInput(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("state", torch.zeros(4, 8))

    def forward(self, x):
        y = self.state * 2
        self.state.copy_(x)
        return y


class CondState(nn.Module):
    """A submodule (planned on its own) computes the new value."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("state", torch.zeros(4, 8))

    def forward(self, x):
        new = torch.cond(x.sum() > 0, lambda s, x: s + x, lambda s, x: s - x, (self.state, x))
        self.state.copy_(new)
        return self.state * 2


def inputs_4x8(i: int) -> tuple:
    return (torch.randn(4, 8),)


REFUSED = {
    "old_value_read_later": (ReadAfterUpdate(), inputs_4x8, {Refusal.OLD_VALUE_READ_LATER}),
    "kernel_not_alias_safe": (
        Where(),
        lambda i: (torch.randn(64, 32),),
        {Refusal.KERNEL_NOT_ALIAS_SAFE},
    ),
    "dtype_change": (DtypeChange(), inputs_4x8, {Refusal.DTYPE_MISMATCH}),
    "control_flow_output": (CondState(), inputs_4x8, {Refusal.CONTROL_FLOW_OUTPUT}),
    "graph_output": (ReturnsTheState(), inputs_4x8, {Refusal.NEW_VALUE_IS_GRAPH_OUTPUT}),
    "value_is_an_input": (StateFromInput(), inputs_4x8, {Refusal.NEW_VALUE_IS_INPUT}),
}


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_unsafe_write_backs_are_refused_with_their_reason_and_still_run(case):
    module, inputs, reasons = REFUSED[case]
    model = make(case, module, inputs)
    program, pass_ = lower(model)  # five calls, each reading what the previous one wrote
    found = decisions(pass_)
    assert found and all(d.status is not StateStatus.IN_PLACE for d in found)
    assert reasons <= {r for d in found for r in d.reasons}, [d.detail for d in found]
    assert all(d.detail for d in found), "every refusal names its nodes"
    assert state_copies(program)[0] == len(found), "no write-back is ever dropped"
    assert pass_.results["forward"].state_report.copy_bytes_removed == 0


def test_a_copy_that_stays_moves_up_and_the_arena_shrinks():
    model = make("where", Where(), lambda i: (torch.randn(64, 32),))
    on, pass_on = lower(model)
    off, pass_off = lower(model, state_in_place=False)
    [d] = decisions(pass_on)
    assert d.status is StateStatus.MOVED and d.moved_after == "aten_where_self"
    assert d.redirected, "the later read of the new value reads the state instead"
    nodes = [n.name for n in on.exported_program().graph_module.graph.nodes]
    assert nodes.index(d.copy) == nodes.index("aten_where_self") + 1
    # The 4 KiB new value no longer lives through the 16 KiB activations after it.
    bound_on = lower_bound(pass_on.results["forward"].problem)
    bound_off = lower_bound(pass_off.results["forward"].problem)
    assert bound_on == bound_off - 32 * 32 * 4
    assert program_arena(on) < program_arena(off)
    assert state_copies(on) == state_copies(off) == (1, 4096)


class ReadBeforeTheProducer(nn.Module):
    """roll (not alias-safe) reads the state, but before the op that writes the new value starts."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("state", torch.zeros(8, 4))

    def forward(self, x):
        self.state.copy_(torch.roll(self.state, 1, 0) + x)
        return (self.state * 2).sum(0)


def test_readers_before_the_producer_do_not_block_it():
    model = make("read_before", ReadBeforeTheProducer(), lambda i: (torch.randn(8, 4),))
    program, pass_ = lower(model)
    [d] = decisions(pass_)
    assert d.status is StateStatus.IN_PLACE and d.producer.startswith("aten_add")
    assert state_copies(program) == (0, 0)


class LinearState(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(8, 8)
        self.register_buffer("state", torch.zeros(4, 8))

    def forward(self, x):
        self.state.copy_(self.lin(x + self.state))
        return self.state.sum(0)


def test_a_delegate_output_keeps_its_copy():
    model = make("delegate", LinearState(), inputs_4x8, partitioner="xnnpack", atol=1e-3, rtol=1e-3)
    program, pass_ = lower(model)
    [d] = decisions(pass_)
    assert d.status is not StateStatus.IN_PLACE
    assert d.reasons == (Refusal.DELEGATE_OUTPUT,), d.detail
    assert "delegate" in d.detail
    assert state_copies(program) == (1, 128)


def test_switch_off_keeps_every_copy_and_reports_nothing():
    model = make("read_before_off", ReadBeforeTheProducer(), lambda i: (torch.randn(8, 4),))
    program, pass_ = lower(model, state_in_place=False)
    assert pass_.results["forward"].state_report is None
    assert state_copies(program) == (1, 128)


# -- state shared across methods ---------------------------------------------------------------------


class Memory(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("memory", torch.zeros(4, 8))


class Bump(nn.Module):
    def __init__(self, store: Memory) -> None:
        super().__init__()
        self.store = store

    def forward(self, x):
        self.store.memory.add_(x)
        return x.sum().reshape(1)


class Gate(nn.Module):
    """Updates the shared state out of place: `where` reads it as the new value is written."""

    def __init__(self, store: Memory) -> None:
        super().__init__()
        self.store = store

    def forward(self, x):
        self.store.memory.copy_(torch.where(x > 0, self.store.memory, x))
        return x.sum().reshape(1)


class Recall(nn.Module):
    def __init__(self, store: Memory) -> None:
        super().__init__()
        self.store = store

    def forward(self):
        return self.store.memory * 1


def gated_memory() -> ZooModel:
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        store = Memory()
        xs = [torch.randn(4, 8) for _ in range(4)]
    methods = {
        "bump": (Bump(store), (xs[0],)),
        "gate": (Gate(store), (xs[1],)),
        "recall": (Recall(store), ()),
    }
    calls = [
        ("bump", (xs[0],)),
        ("recall", ()),
        ("gate", (xs[1],)),
        ("recall", ()),
        ("bump", (xs[2],)),
        ("gate", (xs[3],)),
        ("recall", ()),
    ]
    return ZooModel(
        "gated_memory",
        "bump / gate / recall sharing one buffer",
        methods,
        calls,
        backend_config={},
        shared_state=True,
        memory_planning_config={"share_mutable_buffers": True},
        convert_to_linear=False,
    )


@pytest.mark.parametrize("form", ["single", "dict"])
def test_shared_state_one_method_updates_in_place_the_other_out_of_place(form):
    model = gated_memory()
    pass_ = (
        PlannerPass(solver="bestfit")
        if form == "single"
        else {m: PlannerPass(solver="bestfit") for m in model.methods}
    )
    program = runtime.lower(model, memory_planning_pass=pass_)
    runtime.check_outputs(model, program.buffer)  # seven calls across the three methods
    assert_shared(program, {"store.memory"})
    results = pass_.results if form == "single" else {m: p.results[m] for m, p in pass_.items()}
    [bump] = results["bump"].state_report.decisions
    [gate] = results["gate"].state_report.decisions
    assert bump.status is StateStatus.IN_PLACE
    assert gate.status is not StateStatus.IN_PLACE and gate.reasons == (Refusal.KERNEL_NOT_ALIAS_SAFE,)
    assert state_copies(program) == (1, 128)


# -- the benchmark programs: five or more consecutive calls each -----------------------------------


@pytest.mark.slow
@pytest.mark.parametrize(
    "build",
    [
        hybrid.llama_kv,
        hybrid.qwen35_hybrid,
        hybrid.lfm2_hybrid,
        functools.partial(multi_method_cache, FILLING_ROUNDS),
    ],
)
def test_benchmark_programs_match_eager_over_consecutive_calls_with_every_copy_removed(build):
    model = build()
    assert len(model.calls) >= 5
    on, pass_on = lower(model)
    off, _ = lower(model, state_in_place=False)
    assert state_copies(off)[0] > 0 and state_copies(on) == (0, 0)
    assert program_arena(on) < program_arena(off)
    for result in pass_on.results.values():
        assert all(d.status is StateStatus.IN_PLACE for d in result.state_report.decisions)


@pytest.mark.slow
def test_report_script_prints_one_row_per_program(capsys):
    assert report_main(["--solvers", "bestfit", "--no-1b"]) == 0
    out = capsys.readouterr().out
    for name in ("llama_kv", "qwen35_hybrid", "lfm2_hybrid", "multi_method_cache"):
        assert f"| {name} |" in out


class MutatesItsInput(nn.Module):
    def forward(self, x):
        x.mul_(2)
        return x + 1


def test_a_mutated_user_input_keeps_its_copy():
    """ExecuTorch also returns the mutated input, so eager is compared with the program's first output."""
    model = make("user_input", MutatesItsInput(), inputs_4x8)
    pass_ = PlannerPass(solver="bestfit")
    program = runtime.lower(model, memory_planning_pass=pass_)
    [d] = decisions(pass_)
    assert d.status is StateStatus.KEPT and d.reasons == (Refusal.USER_INPUT_MUTATION,)
    assert state_copies(program) == (1, 128)
    got = runtime.run_pte(program.buffer, model.calls)
    want = runtime.eager_outputs(model)
    assert all(torch.allclose(g[-1], w[0]) for g, w in zip(got, want))


# -- reasons no exported program reaches: the analysis on edited planning graphs -------------------


class TwoStates(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("a", torch.zeros(4, 8))
        self.register_buffer("b", torch.zeros(4, 8))

    def forward(self, x):
        self.a.add_(x)
        self.b.add_(x * 2)
        return x.sum(0)


class GraphRecorder(PlannerPass):
    """Keeps the graph and signature planning receives, before anything rewrites them."""

    def run(self, graph_module, graph_signature=None):
        self.graph = copy.deepcopy(graph_module)
        self._set_alloc_node_spec(self.graph)  # as PlannerPass.run does before deciding
        self.signature = graph_signature
        return super().run(graph_module, graph_signature)


def planning_graph(module: nn.Module):
    model = make("two_states", module, inputs_4x8, n_calls=1)
    recorder = GraphRecorder(solver="bestfit", state_in_place=False)
    runtime.lower(model, memory_planning_pass=recorder)
    copies = [n for n in recorder.graph.graph.nodes if is_write_back(n)]
    return recorder.graph, recorder.signature, copies


def test_a_value_written_back_into_two_buffers_is_refused_for_both():
    gm, signature, (copy_a, copy_b) = planning_graph(TwoStates())
    assert [d.status for d in analyze(gm, signature)] == [StateStatus.IN_PLACE] * 2
    copy_b.replace_input_with(copy_b.args[1], copy_a.args[1])  # b gets a's new value too
    found = analyze(gm, signature)
    assert [d.status for d in found] != [StateStatus.IN_PLACE] * 2
    assert all(Refusal.NEW_VALUE_SHARED in d.reasons for d in found)
    assert copy_b.name in found[0].detail and copy_a.name in found[1].detail


def test_state_another_op_writes_in_place_is_refused():
    gm, signature, (copy_a, _) = planning_graph(TwoStates())
    state = copy_a.args[0]
    with gm.graph.inserting_before(copy_a):
        writer = gm.graph.call_function(torch.ops.aten.mul_.Scalar, (state, 2.0))
    [a, b] = analyze(gm, signature)
    assert a.status is StateStatus.KEPT and Refusal.STATE_WRITTEN_IN_PLACE in a.reasons
    assert f"{writer.name} writes a in place" in a.detail
    assert b.status is StateStatus.IN_PLACE


def test_unplanned_state_is_refused():
    gm, signature, _ = planning_graph(TwoStates())
    found = analyze(gm, signature, state_planned=False)
    assert all(d.reasons == (Refusal.STATE_NOT_PLANNED,) for d in found)
    assert all(d.status is StateStatus.KEPT for d in found)
