"""Random CNNs (tests/planner/random_cnns.py) tiled over the longest region the core accepts from the
input, lowered and run in executorch.runtime over several calls: fp32 (portable kernels) close to the
untiled program at 1e-4, int8 (pt2e, one op per XNNPACK delegate) bit-identical to it.

The default run takes a few seeds; `-m slow` takes many more. Each test fails, naming the seed, when a
generated model yields no region at all (the generator would then test nothing)."""

from __future__ import annotations

import random

import pytest
import torch

from memplan import PlannerPass
from memplan.experiments.zoo import runtime
from memplan.planner.tiling import TilingOptions
from memplan.planner.tiling.rewrite import rewrite
from memplan.planner.tiling.schedule import schedule
from memplan.planner.tiling.search import band_counts
from tests.planner.random_cnns import longest_region, ops_of, random_cnn
from tests.planner.test_tiling_int8 import _lowered as lowered  # XNNPACK per op, or portable
from tests.planner.tiling_models import quantized_program

CALLS = 3
FLOAT_SEEDS = [0, 1]
INT8_SEEDS = [0]
SLOW_FLOAT_SEEDS = list(range(2, 40))
SLOW_INT8_SEEDS = list(range(1, 16))


def banded(program: torch.export.ExportedProgram, seed: int, int8: bool):
    """`program` with its longest region from the input in a seeded number of bands, re-exported."""
    module = program.module()
    region, refused = longest_region(module, int8_end=int8)
    assert region is not None, f"seed {seed}: no region from the input; ends refused: {refused[:5]}"
    height = region.end.meta["val"].shape[2]
    count = random.Random(seed).randint(2, max(2, min(24, height)))
    pieces = schedule(region, count)
    assert pieces is not None, f"seed {seed}: no schedule in {count} bands"
    rewrite(module, region, pieces)
    args, _ = program.example_inputs
    return torch.export.export(module, tuple(args), strict=False), ops_of(region), count


def _program(seed: int, int8: bool, build=random_cnn) -> tuple[torch.export.ExportedProgram, list]:
    """The seed's random CNN (`build(seed)`) exported (int8: quantized by pt2e), and `CALLS` calls of
    random images."""
    model, example = build(seed)
    if int8:
        program = quantized_program(model, example, seed)
    else:
        with torch.no_grad():
            program = torch.export.export(model, example, strict=False)
    generator = torch.Generator().manual_seed(seed)
    calls = [("forward", (torch.randn(example[0].shape, generator=generator),)) for _ in range(CALLS)]
    return program, calls


def _same(got: list, want: list, int8: bool, where: str, tolerance: float = 1e-4) -> None:
    """int8 bit-identical, fp32 within `tolerance`, call by call."""
    for call, (g, w) in enumerate(zip(got, want, strict=True)):
        if int8:
            assert torch.equal(g[0], w[0]), f"{where}, call {call}"
        else:
            torch.testing.assert_close(
                g[0], w[0], atol=tolerance, rtol=tolerance, msg=f"{where}, call {call}"
            )


def check(seed: int, int8: bool) -> None:
    program, calls = _program(seed, int8)
    tiled, ops, count = banded(program, seed, int8)
    # int8: as `PlannerPass(tiling=...)` lowers it, reorder on (the bands' order given back)
    got = runtime.run_pte(lowered(tiled, int8, PlannerPass(alloc_graph_input=False, reorder=int8)), calls)
    want = runtime.run_pte(lowered(program, xnnpack=int8), calls)
    _same(got, want, int8, f"seed {seed}, {count} bands over {ops}")


@pytest.mark.parametrize(
    "seed", FLOAT_SEEDS + [pytest.param(s, marks=pytest.mark.slow) for s in SLOW_FLOAT_SEEDS]
)
def test_random_fp32_cnn_tiled_runs_like_the_untiled_program(seed: int) -> None:
    check(seed, int8=False)


@pytest.mark.parametrize(
    "seed", INT8_SEEDS + [pytest.param(s, marks=pytest.mark.slow) for s in SLOW_INT8_SEEDS]
)
def test_random_int8_cnn_tiled_runs_bit_identical_to_the_untiled_program(seed: int) -> None:
    check(seed, int8=True)


@pytest.mark.parametrize("seed", range(40))
def test_random_fp32_cnn_in_every_band_count_of_the_ladder_equals_the_untiled_graph_in_eager(
    seed: int,
) -> None:
    """Every band count the search may try (2, 3, 4, 6, ... up to the region's height), rows kept from
    band to band: the rewritten module, in eager, equals the untiled one (a residual's reads lag a
    window's, so a later band may need rows an earlier one kept)."""
    model, example = random_cnn(seed)
    with torch.no_grad():
        program = torch.export.export(model, example, strict=False)
        want = program.module()(*example)
        region, refused = longest_region(program.module())
        assert region is not None, f"seed {seed}: no region from the input; ends refused: {refused[:5]}"
        tried = 0
        for count in band_counts(min(64, region.start.meta["val"].shape[2])):
            module = program.module()
            region, _ = longest_region(module)
            pieces = schedule(region, count)
            if pieces is None:
                continue
            rewrite(module, region, pieces)
            module.recompile()
            torch.testing.assert_close(
                module(*example), want, atol=1e-5, rtol=1e-5, msg=f"seed {seed}, {count} bands"
            )
            tried += 1
    assert tried, f"seed {seed}: no band count scheduled"


def test_the_generator_covers_what_the_issue_lists() -> None:
    """Over the default and slow seeds together: strides, dilation, groups, depthwise, odd sizes,
    pools, residuals, cats, hardswish (so a green run has exercised each where the core bands it)."""
    seen: set[str] = set()
    for seed in FLOAT_SEEDS + SLOW_FLOAT_SEEDS:
        model, (image,) = random_cnn(seed)
        seen |= {"odd size"} if image.shape[2] % 2 or image.shape[3] % 2 else set()
        for m in model.modules():
            if isinstance(m, torch.nn.Conv2d):
                seen |= {"stride 2"} if m.stride[0] == 2 else set()
                seen |= {"dilation"} if m.dilation[0] > 1 else set()
                seen |= {"depthwise"} if m.groups == m.in_channels > 1 else set()
                seen |= {"grouped"} if 1 < m.groups < m.in_channels else set()
            seen |= {type(m).__name__} & {"MaxPool2d", "AvgPool2d", "Hardswish"}
            if getattr(m, "residual", False):
                seen.add("residual")
            if getattr(m, "branch", None) is not None:
                seen.add("cat")
    assert seen >= {"odd size", "stride 2", "dilation", "depthwise", "grouped", "MaxPool2d", "AvgPool2d",
                    "Hardswish", "residual", "cat"}, seen  # fmt: skip


SEARCHED_SEEDS = [(6, False), (15, False)]  # generated CNNs whose search tiles two regions
SLOW_SEARCHED_SEEDS = [(s, False) for s in (0, 2, 4, 5, 9, 12)] + [(s, True) for s in (3, 5, 8, 9, 12)]


@pytest.mark.parametrize(
    "seed, int8", SEARCHED_SEEDS + [pytest.param(*s, marks=pytest.mark.slow) for s in SLOW_SEARCHED_SEEDS]
)
def test_random_cnn_tiled_by_the_search_runs_like_the_untiled_program(seed: int, int8: bool) -> None:
    """The search's own choice, every region it tiles one after the other (the checks above cut one
    region by hand), as `PlannerPass.tile` does it: the caller's input, few bands to lower quickly."""
    program, calls = _program(seed, int8)
    tiler = PlannerPass(alloc_graph_input=False, tiling=TilingOptions(max_patches=8))
    tiled = tiler.tile(program)
    report = tiler.tiling_reports["forward"]
    assert report.tiled, f"seed {seed}: {report.summary()}"
    if (seed, int8) in SEARCHED_SEEDS:
        assert len(report.regions) >= 2, f"seed {seed}: {report.summary()}"
    got = runtime.run_pte(lowered(tiled, int8, tiler), calls)
    want = runtime.run_pte(lowered(program, xnnpack=int8), calls)
    _same(got, want, int8, f"seed {seed}: {report.summary()}")
