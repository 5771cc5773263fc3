"""Tiling (memplan.planner.tiling): windows, rewrite vs eager on generated CNNs, MAC counting by hand,
every refusal, and the options. Runtime checks (portable, XNNPACK) are in test_tiling_runtime.py."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from memplan.errors import UsageError
from memplan.planner.tiling import Refusal, TilingOptions, tile, tiling_options
from memplan.planner.tiling.cost import GraphSteps, arena_tensors, graph_macs, steps_counted_anew, tiled_macs
from memplan.planner.tiling.pointwise import derived_pointwise
from memplan.planner.tiling.region import GraphIndex, bands
from memplan.planner.tiling.rewrite import rewrite
from memplan.planner.tiling.schedule import schedule
from memplan.planner.tiling.search import extra, search
from memplan.planner.tiling.semantics import Window
from memplan.planner.tiling.transients import transient_bytes
from tests.planner.tiling_models import generated_cnn, whole_region


def exported(module: nn.Module, *inputs: torch.Tensor) -> torch.export.ExportedProgram:
    with torch.no_grad():
        return torch.export.export(module.eval(), inputs, strict=False)


def test_window_rows_follow_stride_padding_and_dilation():
    w = Window(kernel=3, stride=2, padding=1, dilation=2)  # span 5
    assert w.input_rows(0, 1) == (-1, 4)
    assert w.input_rows(3, 5) == (5, 12)  # rows 3..4 start at 5 and 7; the last reads up to 7 + 5


def test_bands_cover_the_rows_when_they_do_not_divide_evenly():
    assert bands(11, 3) == [(0, 4), (4, 8), (8, 11)]


@pytest.mark.parametrize(
    "seed", [pytest.param(s, marks=pytest.mark.slow if s >= 5 else ()) for s in range(20)]
)
def test_generated_cnn_tiled_equals_eager(seed):
    """The whole generated CNN in 2, 3 and 5 bands (fewer when it has fewer output rows), halo rows
    computed twice or kept: kept, a float graph's tiled MACs are at most the untiled ones."""
    model, inputs = generated_cnn(seed)
    program = exported(model, *inputs)
    for cache_rows in (False, True):
        for count in (2, 3, 5):
            module = program.module()
            region = whole_region(module)
            base_macs = graph_macs(module.graph)
            pieces = schedule(region, min(count, region.end.meta["val"].shape[2]), cache_rows)
            assert pieces is not None
            macs = tiled_macs(module.graph, region, pieces)
            rewrite(module, region, pieces)
            with torch.no_grad():
                torch.testing.assert_close(module(*inputs), model(*inputs), atol=1e-5, rtol=1e-5)
            cats = sum(n.target is torch.ops.aten.cat.default for n in module.graph.nodes)
            if cache_rows:  # never more (rows no reader needs are not computed at all)
                assert macs <= base_macs
            else:
                assert cats == 1 and macs >= base_macs


class HandCounted(nn.Module):
    """conv 3->8 k3 s2 p1, depthwise k3 p1, pointwise 8->4, linear 256->10 on 1x3x16x16."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, 2, 1)
        self.dw = nn.Conv2d(8, 8, 3, 1, 1, groups=8)
        self.pw = nn.Conv2d(8, 4, 1)
        self.fc = nn.Linear(256, 10)

    def forward(self, x):
        return self.fc(self.pw(torch.relu(self.dw(torch.relu(self.conv(x))))).flatten(1))


def test_macs_counted_from_the_graph_equal_a_hand_count():
    module = exported(HandCounted(), torch.randn(1, 3, 16, 16)).module()
    conv, dw, pw, fc = 8 * 8 * 8 * 27, 8 * 8 * 8 * 9, 4 * 8 * 8 * 8, 10 * 256
    assert graph_macs(module.graph) == conv + dw + pw + fc == 23_040
    graph = module.graph
    start = next(n for n in graph.nodes if n.op == "placeholder")
    end = next(n for n in graph.nodes if n.name == "conv2d_2")
    index = GraphIndex(graph)
    region = index.region(start, end, index.descendants(start))
    pieces = schedule(region, 2, cache_rows=False)
    # Output rows [0,4) and [4,8): the depthwise conv reads rows [0,5) and [3,8) of the first conv's
    # output, so the first conv computes 5 rows per band instead of 4.
    assert tiled_macs(graph, region, pieces) == 2 * (8 * 5 * 8 * 27) + dw + pw + fc
    # Rows kept: the second band reads rows 3 and 4 kept from the first, which computed [0, 5).
    assert tiled_macs(graph, region, schedule(region, 2)) == conv + dw + pw + fc


# -- refusals: each reason, on the smallest graph that shows it ------------------------------------


def _region(module: nn.Module, *inputs: torch.Tensor):
    """The region from the first input to the first value the graph returns, or why it is refused."""
    graph = exported(module, *inputs).module().graph
    start = next(n for n in graph.nodes if n.op == "placeholder")
    end = next(n for n in graph.nodes if n.op == "output").args[0][0]
    index = GraphIndex(graph)
    return index.region(start, end, index.descendants(start))


class Then(nn.Module):
    def __init__(self, *layers: nn.Module) -> None:
        super().__init__()
        self.layers = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), *layers, nn.Conv2d(4, 4, 1))

    def forward(self, x):
        return self.layers(x)


X = torch.randn(1, 3, 12, 12)


@pytest.mark.parametrize(
    "layer, reason",
    [
        (nn.ConvTranspose2d(4, 4, 2, 2), Refusal.TRANSPOSED_CONV),
        (nn.MaxPool2d(3, 2, ceil_mode=True), Refusal.CEIL_MODE),
        (nn.Conv2d(4, 4, 3, padding="same"), Refusal.STRING_PADDING),
        (nn.AvgPool2d(3, 1, 1, count_include_pad=False), Refusal.PAD_EXCLUDED_FROM_AVERAGE),
        (nn.Softmax(dim=2), Refusal.UNKNOWN_SPATIAL_OP),
        (nn.Upsample(scale_factor=2), Refusal.UNKNOWN_SPATIAL_OP),
    ],
    ids=lambda v: v.value if isinstance(v, Refusal) else type(v).__name__,
)
def test_an_op_whose_rows_cannot_be_derived_ends_the_region(layer, reason):
    assert _region(Then(layer), X) is reason


A = torch.ops.aten
T = torch.empty(1, 4, 6, 6)


@pytest.mark.parametrize(
    "op, args, pointwise",
    [
        (A.hardswish.default, (T,), True),  # no Tag.pointwise: x * clamp(x + 3, 0, 6) / 6
        (A.hardsigmoid.default, (T,), True),
        (A._softmax.default, (T, 2, False), False),  # amax and sum over H
        (A._softmax.default, (T, 1, False), False),  # over C: still a reduction, refused
        (A.upsample_nearest2d.vec, (T, None, [2.0, 2.0]), False),  # arange and _unsafe_index
        (A.mean.dim, (T, [2, 3], True), False),
    ],
    ids=lambda v: str(v) if isinstance(v, torch._ops.OpOverload) else None,
)
def test_pointwise_is_derived_from_the_decomposition(op, args, pointwise):
    assert derived_pointwise(op, args) is pointwise


@pytest.mark.parametrize("layer", [nn.Hardswish(), nn.Hardsigmoid()], ids=lambda v: type(v).__name__)
def test_a_region_crosses_an_op_derived_pointwise_and_its_bands_equal_eager(layer):
    assert torch.Tag.pointwise not in A.hardswish.default.tags  # else hardswish shows nothing here
    model = Then(layer).eval()
    module = exported(model, X).module()
    region = whole_region(module)
    assert len(region.nodes) == 3
    rewrite(module, region, schedule(region, 3))
    with torch.no_grad():
        torch.testing.assert_close(module(X), model(X), atol=1e-5, rtol=1e-5)


class Flat(nn.Module):
    def forward(self, x):
        return torch.relu(x.flatten(2))


def test_a_tensor_that_is_not_nchw_is_refused():
    assert _region(Flat(), X) is Refusal.NOT_4D


class Escapes(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a, self.b = nn.Conv2d(3, 4, 3, padding=1), nn.Conv2d(4, 4, 3, padding=1)

    def forward(self, x):
        y = self.a(x)
        return self.b(y), y


def test_an_intermediate_read_outside_the_region_is_refused():
    assert _region(Escapes(), X) is Refusal.ESCAPING_INTERMEDIATE


class TwoImages(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 3, 3, padding=1)

    def forward(self, x, y):
        return torch.relu(self.conv(x) + y)


def test_a_second_full_size_activation_entering_the_region_is_refused():
    assert _region(TwoImages(), X, X.clone()) is Refusal.SPATIAL_INPUT_FROM_OUTSIDE


class PerChannel(nn.Module):
    """A per-channel constant broadcast along H is not an activation entering the region."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.scale = nn.Parameter(torch.rand(4, 1, 1))

    def forward(self, x):
        return torch.relu(self.conv(x) * self.scale)


def test_a_broadcast_per_channel_operand_stays_legal():
    region = _region(PerChannel(), X)
    assert not isinstance(region, Refusal) and len(region.nodes) == 3


class Expand(nn.Module):
    """3 -> 32 channels at full resolution, then back to 2: the peak is the expanded pair."""

    def __init__(self) -> None:
        super().__init__()
        self.a, self.b = nn.Conv2d(3, 32, 3, padding=1), nn.Conv2d(32, 2, 3, padding=1)

    def forward(self, x):
        return self.b(torch.relu(self.a(x)))


def test_search_tiles_within_the_mac_limit_and_lowers_the_peak():
    found = search(exported(Expand(), torch.randn(1, 3, 32, 32)).module().graph, TilingOptions())
    assert found.refusal is None and found.chosen is not None
    assert found.chosen.peak < found.base_peak
    assert extra(found.chosen.macs, found.base_macs) <= 0.15


class ConvConv(nn.Module):
    """Two 3x3 convolutions and nothing between: a band's halo rows are always recomputed MACs."""

    def __init__(self) -> None:
        super().__init__()
        self.a, self.b = nn.Conv2d(3, 32, 3, padding=1), nn.Conv2d(32, 2, 3, padding=1)

    def forward(self, x):
        return self.b(self.a(x))


def test_no_extra_macs_allowed_is_refused_as_mac_limit():
    recompute = TilingOptions(0.0, cache_rows=False)
    found = search(exported(ConvConv(), torch.randn(1, 3, 32, 32)).module().graph, recompute)
    assert found.chosen is None and found.refusal is Refusal.MAC_LIMIT
    assert found.best_over_limit is not None and found.best_over_limit.peak < found.base_peak
    report = tile(exported(ConvConv(), torch.randn(1, 3, 32, 32)), recompute).report
    assert not report.tiled and report.refusal is Refusal.MAC_LIMIT
    assert f"it would reach {found.best_over_limit.peak:,} B" in report.summary()
    # Kept rows are not computed again: the same graph tiles with no extra MACs at all.
    kept = tile(exported(ConvConv(), torch.randn(1, 3, 32, 32)), TilingOptions(0.0)).report
    assert kept.tiled and kept.extra_macs == 0 and kept.peak < kept.base_peak


def test_a_budget_below_any_tiling_is_refused_and_one_above_the_peak_tiles_nothing():
    graph = exported(Expand(), torch.randn(1, 3, 32, 32)).module().graph
    assert search(graph, TilingOptions(budget_bytes=1)).refusal is Refusal.BUDGET_UNREACHABLE
    fits = search(graph, TilingOptions(budget_bytes=10**9))
    assert fits.chosen is None and fits.refusal is None


def test_a_budget_takes_the_fewest_bands_that_fit():
    graph = exported(Expand(), torch.randn(1, 3, 32, 32)).module().graph
    smallest = search(graph, TilingOptions(max_extra_macs=1.0)).chosen
    assert smallest is not None
    budget = (smallest.peak + search(graph, TilingOptions()).base_peak) // 2
    chosen = search(graph, TilingOptions(max_extra_macs=1.0, budget_bytes=budget)).chosen
    assert chosen is not None and chosen.peak <= budget and chosen.patches <= smallest.patches


class Wide(nn.Module):
    """Three 7x7 convolutions on 6 rows: every band needs every row, so tiling only adds copies."""

    def __init__(self) -> None:
        super().__init__()
        self.layers = nn.Sequential(
            nn.Conv2d(4, 16, 7, padding=3),
            nn.ReLU(),
            nn.Conv2d(16, 16, 7, padding=3),
            nn.ReLU(),
            nn.Conv2d(16, 1, 7, padding=3),
        )

    def forward(self, x):
        return self.layers(x)


def test_a_region_whose_bands_need_every_row_is_refused_as_no_gain():
    found = search(
        exported(Wide(), torch.randn(1, 4, 6, 6)).module().graph, TilingOptions(max_extra_macs=100)
    )
    assert found.chosen is None and found.refusal is Refusal.NO_GAIN


def test_legal_regions_that_cannot_hold_the_peak_are_no_gain_not_the_commonest_refusal():
    """The U-Net's skips read its full-resolution stages at the end: no region around them is legal."""
    from memplan.experiments.zoo.models.concat import UNet

    torch.manual_seed(0)
    found = search(exported(UNet(), torch.randn(1, 3, 32, 32)).module().graph, TilingOptions())
    assert found.chosen is None and found.refusal is Refusal.NO_GAIN
    assert found.legal_regions > 0 and found.regions_refused[Refusal.TRANSPOSED_CONV] > 0


class Mlp(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a, self.b = nn.Linear(16, 64), nn.Linear(64, 4)

    def forward(self, x):
        return self.b(torch.relu(self.a(x)))


def test_a_graph_without_images_has_no_region():
    found = search(exported(Mlp(), torch.randn(2, 16)).module().graph, TilingOptions())
    assert found.chosen is None and found.refusal is Refusal.NO_REGION


def test_tile_reexports_and_counts_the_tiled_program():
    x = torch.randn(1, 3, 32, 32)
    model = Expand().eval()
    tiled = tile(exported(model, x))
    with torch.no_grad():
        torch.testing.assert_close(tiled.program.module()(x), model(x), atol=1e-5, rtol=1e-5)
    report = tiled.report
    assert report.tiled and report.patches >= 2 and report.peak < report.base_peak
    assert report.extra_macs <= 0  # halo rows kept, not computed again
    assert report.macs == graph_macs(tiled.program.graph)
    recomputed = tile(exported(model, x), TilingOptions(cache_rows=False)).report
    assert recomputed.tiled and 0 < recomputed.extra_macs <= 0.15


def test_options_are_checked():
    assert tiling_options(True) == TilingOptions()
    assert tiling_options(False) is None
    with pytest.raises(UsageError, match="max_extra_macs"):
        TilingOptions(max_extra_macs=-0.1)
    with pytest.raises(UsageError, match="budget_bytes"):
        TilingOptions(budget_bytes=0)
    with pytest.raises(UsageError, match="tiling must be"):
        tiling_options("yes")  # type: ignore[arg-type]


class HardswishThenRelu(nn.Module):
    def forward(self, x):
        return torch.relu(nn.functional.hardswish(x))


def test_the_cost_counts_the_intermediates_of_an_op_to_edge_decomposes():
    """hardswish becomes add, clamp, clamp, mul, div in to_edge: two of its intermediates are live at
    once beside its input and output; relu stays one kernel."""
    module = exported(HardswishThenRelu(), torch.randn(1, 4, 6, 6)).module()
    nodes = {n.name: n for n in module.graph.nodes}
    assert transient_bytes(nodes["hardswish"]) == 2 * 4 * 36 * 4
    assert transient_bytes(nodes["relu"]) == 0


def test_a_resnet_whose_skip_reads_lag_two_windows_tiles_and_equals_eager():
    """ResNet-8's skip reads rows two windows behind the branch: at 12 bands one band reads none of a
    block input's early rows and the next reads them again, so rows are kept for every later band, not
    only the next (the sweep's resnet8 row failed on that)."""
    from memplan.experiments.zoo import catalog

    model, example = catalog.get("resnet8").methods["forward"]
    with torch.no_grad():
        program = torch.export.export(model, example)
        tiled = tile(program, TilingOptions())
        assert tiled.report.tiled and tiled.report.extra_macs == 0, tiled.report.summary()
        x = torch.randn(example[0].shape)
        torch.testing.assert_close(tiled.program.module()(x), program.module()(x), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_steps_spliced_from_the_untiled_graph_equal_stepssteps_counted_anew_for_every_legal_region(seed):
    model, inputs = generated_cnn(seed)
    graph = exported(model, *inputs).module().graph
    counted = GraphSteps(graph, arena_tensors(graph, TilingOptions(input_in_arena=False)))
    index = GraphIndex(graph)
    regions = [
        region
        for start in index.nodes
        if start.op in ("placeholder", "call_function")
        and len(getattr(start.meta.get("val"), "shape", ())) == 4
        for end in index.nodes
        if not isinstance(region := index.region(start, end, index.descendants(start)), Refusal)
    ]
    assert len(regions) > 5
    for region in regions:
        pieces = schedule(region, 3)
        if pieces is None:
            continue
        assert counted.tiled(region, pieces) == steps_counted_anew(graph, region, pieces, counted.held)
