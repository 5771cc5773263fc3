"""More than one region per graph: once a stage is tiled the peak sits elsewhere, the search runs again
on the tiled graph and tiles the next stage with a band count of its own, never crossing the bands
of a region tiled already; programs tiled so run like eager in executorch.runtime."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from memplan import PlannerPass
from memplan.experiments.zoo import programs, runtime
from memplan.planner.tiling import TilingOptions, tile, tile_module
from memplan.planner.tiling.rewrite import BAND
from memplan.planner.tiling.semantics import Refusal

SHAPE = (1, 3, 32, 32)


class SqueezedStages(nn.Module):
    """Two stages at one resolution with a squeeze between them: its mean reads the whole first
    stage's output, so no one region spans both, and each stage holds a peak of its own."""

    def __init__(self) -> None:
        super().__init__()
        self.first = nn.Sequential(
            nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.Conv2d(16, 64, 1), nn.ReLU(), nn.Conv2d(64, 16, 1)
        )
        self.second = nn.Sequential(
            nn.Conv2d(16, 48, 1), nn.ReLU(), nn.Conv2d(48, 48, 3, padding=1, groups=48), nn.Conv2d(48, 8, 1)
        )

    def forward(self, x):
        y = self.first(x)
        y = y * torch.sigmoid(y.mean((2, 3), keepdim=True))
        return self.second(y)


def _model() -> nn.Module:
    torch.manual_seed(0)
    return SqueezedStages().eval()


def _exported() -> torch.export.ExportedProgram:
    with torch.no_grad():
        return torch.export.export(_model(), (torch.randn(SHAPE),), strict=False)


def test_the_second_stage_is_tiled_after_the_first_below_one_region_and_outside_its_bands():
    one = tile(_exported(), TilingOptions(max_regions=1)).report
    module = _exported().module()
    report = tile_module(module, TilingOptions())
    assert one.tiled and len(one.regions) == 1
    assert report.tiled and len(report.regions) == 2, report.summary()
    assert report.peak < one.peak
    first, second = report.regions
    assert second.peak < first.peak  # each region lowered the peak the last one left
    bands = {n.name for n in module.graph.nodes if n.meta.get(BAND)}
    assert second.start not in bands and not bands & set(second.ops)
    assert report.extra_macs <= 0.15


def test_two_regions_tiled_run_like_eager_and_like_the_untiled_program():
    tiled = tile(_exported(), TilingOptions())
    assert len(tiled.report.regions) == 2
    images = [torch.randn(SHAPE) for _ in range(3)]
    calls = [("forward", (image,)) for image in images]

    def run(module: nn.Module) -> list[torch.Tensor]:
        model = programs.from_module(module, (images[0],))
        pte = runtime.lower(model, memory_planning_pass=PlannerPass()).buffer
        return [outputs[0] for outputs in runtime.run_pte(pte, calls)]

    tiled_out, untiled_out = run(tiled.program.module()), run(_model())
    with torch.no_grad():
        eager = [_model()(image) for image in images]
    for got, untiled, want in zip(tiled_out, untiled_out, eager, strict=True):
        torch.testing.assert_close(got, want, atol=1e-4, rtol=1e-4)
        torch.testing.assert_close(got, untiled, atol=1e-4, rtol=1e-4)
    assert not torch.equal(tiled_out[0], tiled_out[1])


@pytest.mark.parametrize("max_regions, tiled", [(1, False), (4, True)])
def test_a_budget_only_two_regions_reach_is_met_with_two_and_refused_with_one(max_regions, tiled):
    both = tile_module(_exported().module(), TilingOptions())
    one = tile_module(_exported().module(), TilingOptions(max_regions=1))
    budget = (both.peak + one.peak) // 2
    module = _exported().module()
    report = tile_module(module, TilingOptions(budget_bytes=budget, max_regions=max_regions))
    assert report.tiled is tiled, report.summary()
    if tiled:
        assert report.peak <= budget and len(report.regions) >= 2
    else:
        assert report.refusal is Refusal.BUDGET_UNREACHABLE
        assert not any(n.meta.get(BAND) for n in module.graph.nodes)  # the graph is left as it was


class TwinStages(nn.Module):
    """Two stages of the same shapes with a channel softmax between them (no region crosses it): both
    hold the same peak, so a region lowers the graph's peak only with the other stage's region."""

    def __init__(self) -> None:
        super().__init__()
        self.first = nn.Sequential(nn.Conv2d(3, 24, 3, padding=1), nn.ReLU(), nn.Conv2d(24, 3, 1))
        self.second = nn.Sequential(nn.Conv2d(3, 24, 3, padding=1), nn.ReLU(), nn.Conv2d(24, 3, 1))

    def forward(self, x):
        return self.second(self.first(x).softmax(1))


def _twins() -> torch.export.ExportedProgram:
    torch.manual_seed(0)
    with torch.no_grad():
        return torch.export.export(TwinStages().eval(), (torch.randn(SHAPE),), strict=False)


def test_two_stages_holding_the_same_peak_are_tiled_one_after_the_other():
    report = tile_module(_twins().module(), TilingOptions())
    assert report.tiled and len(report.regions) == 2, report.summary()
    first, second = report.regions
    assert first.peak == report.base_peak  # the first ties: the other stage still holds the peak
    assert second.peak < report.base_peak and report.peak == second.peak


def test_a_region_that_only_ties_the_peak_is_undone_when_no_second_may_follow():
    module = _twins().module()
    before = [n.name for n in module.graph.nodes]
    report = tile_module(module, TilingOptions(max_regions=1))
    assert not report.tiled and report.refusal is Refusal.NO_GAIN, report.summary()
    assert [n.name for n in module.graph.nodes] == before  # the graph as it was
