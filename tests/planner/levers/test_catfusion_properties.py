"""Property tests: random chains of cats and elementwise ops (nested cats,
repeated inputs, the graph input, graph outputs among the inputs, widths that
break alignment) planned with cat fusion by every solver still validate and
run to the eager result in executorch.runtime."""

from __future__ import annotations

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from torch import nn

from memplan import solvers
from memplan.experiments.zoo import ZooModel, runtime
from memplan.experiments.zoo.models.common import zoo_recipe
from memplan.planner.levers.cat.decisions import CatStatus
from memplan.planner.pass_ import PlannerPass
from memplan.validate import validate

UNARY = {"sin": torch.sin, "cos": torch.cos, "relu": torch.relu, "sigmoid": torch.sigmoid, "neg": torch.neg}


class Program(nn.Module):
    """Runs a drawn op list on x; tensor 0 is x, op i makes tensor i + 1."""

    def __init__(self, ops: list[tuple], outputs: list[int]) -> None:
        super().__init__()
        self.ops = ops
        self.outputs = outputs

    def forward(self, x):
        t = [x]
        for op in self.ops:
            if op[0] == "unary":
                t.append(UNARY[op[1]](t[op[2]]))
            elif op[0] == "cat":
                t.append(torch.cat([t[i] for i in op[1]]))
            else:  # "mix": combine tensors of different shapes
                t.append(t[op[1]] * torch.sigmoid(t[op[2]].mean()))
        return tuple(t[i] for i in self.outputs)


@st.composite
def programs(draw: st.DrawFn) -> tuple[int, int, list[tuple], list[int]]:
    """(width, rows of x, ops, output indices), with at least one cat."""
    width = draw(st.sampled_from([3, 4, 8]))  # 3 floats = 12 bytes: offsets that break 16-byte alignment
    rows = [draw(st.integers(1, 3))]
    ops: list[tuple] = []
    kinds = draw(st.lists(st.sampled_from(["unary", "cat", "mix"]), min_size=2, max_size=7))
    if "cat" not in kinds:
        kinds[-1] = "cat"
    for kind in kinds:
        pick = st.integers(0, len(rows) - 1)
        if kind == "unary":
            src = draw(pick)
            ops.append(("unary", draw(st.sampled_from(sorted(UNARY))), src))
            rows.append(rows[src])
        elif kind == "cat":
            srcs = draw(st.lists(pick, min_size=1, max_size=3))
            ops.append(("cat", srcs))
            rows.append(sum(rows[i] for i in srcs))
        else:
            a, b = draw(pick), draw(pick)
            ops.append(("mix", a, b))
            rows.append(rows[a])
    last = len(rows) - 1
    extra = draw(st.lists(st.integers(1, last), max_size=2))
    outputs = list(dict.fromkeys([last, *extra]))  # never the bare input, never twice
    return width, rows[0], ops, outputs


def check_all_solvers(program: tuple, partial: bool, relax: bool) -> None:
    width, rows, ops, outputs = program
    x = torch.randn(rows, width)
    methods = {"forward": (Program(ops, outputs), (x,))}
    model = ZooModel(
        "random", "random cat chain", methods, [("forward", (x,))], **zoo_recipe(convert_linear=False)
    )
    for solver in solvers.available():
        planner = PlannerPass(
            solver=solver, time_limit_s=2.0, cat_fusion_partial=partial, cat_fusion_relax_alignment=relax
        )
        program_ = runtime.lower(model, memory_planning_pass=planner)
        runtime.check_outputs(model, program_.buffer)
        result = planner.results["forward"]
        assert not validate(result.problem, result.plan), solver
        report = result.cat_report
        assert report.arena_with <= report.arena_without, solver
        plan = program_.executorch_program.execution_plan[0]
        calls = [i.instr_args for i in plan.chains[0].instructions if hasattr(i.instr_args, "op_index")]
        names = [plan.operators[call.op_index].name for call in calls]
        kept = sum(d.status is CatStatus.REFUSED for d in report.decisions)
        copies = sum(i.placement == "copy" for d in report.decisions for i in d.inputs)
        assert names.count("aten::cat") == kept, solver
        assert names.count("aten::clone") == copies, solver


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(programs())
def test_random_cat_chains_run_correctly_with_every_solver(program):
    check_all_solvers(program, partial=False, relax=False)


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(programs(), st.booleans())
def test_random_cat_chains_with_partial_fusion_run_correctly_with_every_solver(program, relax):
    check_all_solvers(program, partial=True, relax=relax)


@pytest.mark.slow
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(programs(), st.booleans(), st.booleans())
def test_many_random_cat_chains_run_correctly_with_every_solver(program, partial, relax):
    check_all_solvers(program, partial=partial, relax=relax)
