"""Each kernel that `planner.levers.state_in_place.kernels` lets write over its own input, run that way.

For every (op, argument) pair in `ALIAS_SAFE_ARGS` a tiny stateful program
makes that op produce the state's new value while reading the old one
through that argument. With state in place the kernel is called with `out`
= that argument (one value in the emitted program), the write-back copy is
gone, and the program matches eager PyTorch over five calls in which the
state evolves (its initial value is serialized, so products do not start
from zero).
"""

from __future__ import annotations

import pytest
import torch
from executorch.exir.passes.init_mutable_pass import InitializedMutableBufferPass
from torch import nn

from memplan.experiments.bench.state_report import state_copies
from memplan.experiments.zoo import ZooModel, runtime
from memplan.planner.levers.state_in_place import ALIAS_SAFE_ARGS, StateStatus
from memplan.planner.pass_ import PlannerPass


class Update(nn.Module):
    """state <- update(state, x); returns a function of the new state."""

    def __init__(self, update, shape=(4, 8)) -> None:
        super().__init__()
        self.update = update
        self.register_buffer(
            "state", torch.linspace(0.5, 1.5, int(torch.tensor(shape).prod())).reshape(shape)
        )

    def forward(self, x, pos):
        self.update(self.state, x, pos)
        return self.state.sum(0) * 2


def index_put(state, x, pos):
    state[:, pos] = x[:, :1] * 3


def slice_scatter(state, x, pos):
    state[1:3] = x[1:3] + 1


CASES = {
    ("aten.index_put.out", "self"): index_put,
    ("aten.slice_scatter.out", "self"): slice_scatter,
    ("aten.add.out", "self"): lambda s, x, p: s.add_(x[:1]),  # the other operand broadcasts
    ("aten.add.out", "other"): lambda s, x, p: s.copy_(x + s),
    ("aten.sub.out", "self"): lambda s, x, p: s.sub_(x),
    ("aten.sub.out", "other"): lambda s, x, p: s.copy_(x[:1] - s),
    ("aten.mul.out", "self"): lambda s, x, p: s.mul_(x.sigmoid() + 0.5),
    ("aten.mul.out", "other"): lambda s, x, p: s.copy_((x.cos() + 0.5) * s),
}


def test_every_alias_safe_kernel_argument_has_a_runtime_test():
    table = {(str(op), arg) for op, args in ALIAS_SAFE_ARGS.items() for arg in args}
    assert table == set(CASES)


def model(name: str, update) -> ZooModel:
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        calls = [("forward", (torch.randn(4, 8), torch.tensor([i]))) for i in range(5)]
    return ZooModel(
        name,
        name,
        {"forward": (Update(update).eval(), calls[0][1])},
        calls,
        backend_config={"passes": [InitializedMutableBufferPass(["state"])]},
        convert_to_linear=False,
    )


@pytest.mark.parametrize("case", sorted(CASES), ids=lambda c: f"{c[0]}-{c[1]}")
def test_kernel_writes_the_state_over_the_argument_it_reads(case):
    op_name, arg = case
    m = model(f"{op_name}-{arg}", CASES[case])
    pass_ = PlannerPass(solver="bestfit")
    program = runtime.lower(m, memory_planning_pass=pass_)
    runtime.check_outputs(m, program.buffer)  # five calls, the state evolving
    [d] = pass_.results["forward"].state_report.decisions
    assert d.status is StateStatus.IN_PLACE, d.detail
    assert state_copies(program) == (0, 0)
    # The producer is that op, called with out= the very value it reads as `arg`.
    plan = program.executorch_program.execution_plan[0]
    op = next(op for op in ALIAS_SAFE_ARGS if str(op) == op_name)
    names = [a.name for a in op._schema.arguments]
    kernel = "aten::" + op_name.split(".")[1]
    calls = [
        list(i.instr_args.args)
        for i in plan.chains[0].instructions
        if hasattr(i.instr_args, "op_index") and plan.operators[i.instr_args.op_index].name == kernel
    ]
    assert any(args[names.index(arg)] == args[-1] for args in calls), (kernel, calls)
    # Without it, the same program keeps its copy and the op writes a tensor of its own.
    stock = runtime.lower(m, memory_planning_pass=PlannerPass(solver="bestfit", state_in_place=False))
    assert state_copies(stock)[0] == 1
