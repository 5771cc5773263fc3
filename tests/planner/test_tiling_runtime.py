"""Tiled programs in executorch.runtime: generated CNNs cut into bands match eager PyTorch and the
untiled program (portable kernels and XNNPACK), and `plan_model(tiling=...)` plans below the untiled
graph's lower bound."""

from __future__ import annotations

import dataclasses

import pytest
import torch
from torch import nn

import memplan
from memplan import PlannerPass
from memplan.experiments.zoo import programs, runtime
from memplan.experiments.zoo.tiled import tiled_model
from memplan.planner.tiling import TilingOptions
from memplan.planner.tiling.rewrite import rewrite
from memplan.planner.tiling.schedule import schedule
from tests.planner.tiling_models import Expand, generated_cnn, whole_region

ATOL = RTOL = 1e-4  # float32: the bands sum the same products in another order only inside XNNPACK


def _tiled_and_plain(seed: int, count: int, partitioner: str | None):
    model, inputs = generated_cnn(seed)
    with torch.no_grad():
        module = torch.export.export(model, inputs, strict=False).module()
    region = whole_region(module)
    pieces = schedule(region, min(count, region.end.meta["val"].shape[2]))
    assert pieces is not None
    rewrite(module, region, pieces)
    plain = programs.from_module(
        model, inputs, name=f"cnn{seed}", partitioner=partitioner, atol=ATOL, rtol=RTOL
    )
    tiled = programs.from_module(module, inputs, name=f"cnn{seed}_tiled", partitioner=partitioner)
    return plain, tiled


@pytest.mark.parametrize(
    "seed, count, partitioner",
    [
        (1, 3, None),
        pytest.param(2, 2, "xnnpack", marks=pytest.mark.slow),  # ~60 s on a loaded machine
        pytest.param(3, 5, None, marks=pytest.mark.slow),
        pytest.param(4, 4, "xnnpack", marks=pytest.mark.slow),
        pytest.param(6, 3, None, marks=pytest.mark.slow),
        pytest.param(7, 2, "xnnpack", marks=pytest.mark.slow),
    ],
)
def test_generated_cnn_in_bands_runs_like_eager_and_like_the_untiled_program(seed, count, partitioner):
    plain, tiled = _tiled_and_plain(seed, count, partitioner)
    tiled_out = runtime.run_pte(runtime.lower(tiled, memory_planning_pass=PlannerPass()).buffer, plain.calls)
    plain_out = runtime.run_pte(runtime.lower(plain, memory_planning_pass=PlannerPass()).buffer, plain.calls)
    runtime.compare_outputs(plain, tiled_out, runtime.eager_outputs(plain))
    runtime.compare_outputs(plain, tiled_out, plain_out)


def test_plan_model_with_tiling_plans_below_the_untiled_bound_and_matches_eager():
    torch.manual_seed(0)
    module, x = Expand().eval(), (torch.randn(1, 3, 40, 40),)
    untiled = memplan.plan_model(module, "bestfit", example_inputs=x, stock=False)
    tiled = memplan.plan_model(
        module, "bestfit", example_inputs=x, tiling=TilingOptions(), check=True, stock=False
    )
    report = tiled.results["forward"].tiling
    assert report.tiled and report.extra_macs <= 0.15
    assert "tiling: tiled" in tiled.results["forward"].note
    bound = int(untiled.summary["lower_bound_bytes"][0])
    assert int(tiled.summary["arena_bytes"][0]) < bound
    assert tiled.matches_eager is True


def test_a_pass_with_tiling_says_when_the_program_was_not_tiled():
    torch.manual_seed(0)
    model = programs.from_module(Expand().eval(), (torch.randn(1, 3, 16, 16),))
    planner = PlannerPass(tiling=True)
    runtime.lower(model, memory_planning_pass=planner)
    assert planner.results["forward"].tiling is None
    assert "tiling: not applied" in planner.results["forward"].note


class HardswishStage(nn.Module):
    """A MobileNetV3 stem: conv s2 -> BN -> hardswish -> depthwise conv -> hardswish -> 1x1 conv.

    Torch does not tag `aten.hardswish` pointwise; tiling crosses it only because its decomposition is
    derived pointwise (planner/tiling/pointwise.py).
    """

    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 16, 3, 2, 1, bias=False), nn.BatchNorm2d(16), nn.Hardswish())
        self.dw = nn.Sequential(nn.Conv2d(16, 16, 3, 1, 1, groups=16), nn.Hardswish())
        self.project = nn.Conv2d(16, 8, 1)

    def forward(self, x):
        return self.project(self.dw(self.stem(x)))


def test_a_mobilenet_v3_stage_is_tiled_across_hardswish_and_runs_like_eager():
    torch.manual_seed(0)
    module = HardswishStage().eval()
    module.stem[1].running_mean.uniform_(-0.2, 0.2)
    module.stem[1].running_var.uniform_(0.5, 1.5)
    size = (1, 3, 96, 96)
    model = dataclasses.replace(
        programs.from_module(module, (torch.randn(size),), name="hardswish_stage", atol=ATOL, rtol=RTOL),
        calls=[("forward", (torch.randn(size),)) for _ in range(3)],
    )
    untiled = memplan.plan_model(model, "bestfit", stock=False)
    tiler = PlannerPass(tiling=TilingOptions())
    tiled = tiled_model(model, tiler)
    report = tiler.tiling_reports["forward"]
    assert report.tiled and report.extra_macs <= 0.15
    assert {"hardswish", "hardswish_1"} <= set(report.ops), report.summary()
    program = runtime.lower(tiled, memory_planning_pass=PlannerPass())
    outputs = runtime.run_pte(program.buffer, model.calls)
    runtime.compare_outputs(model, outputs, runtime.eager_outputs(model))
    bound = int(untiled.summary["lower_bound_bytes"][0])
    assert sum(runtime.stock_arena_bytes(program)["forward"]) < bound
