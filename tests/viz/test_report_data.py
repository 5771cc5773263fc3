"""The report's data, figures and verdicts on hand-made plans (no lowering, no browser)."""

from __future__ import annotations

import pytest

from memplan.viz.report import (
    LeverTry,
    MethodReport,
    PlanView,
    ProgramReport,
    TensorInfo,
    diff_programs,
    figures,
    render,
)
from memplan.viz.report.budget import BudgetBank, budget_rows, verdicts


def _plan(
    sizes: dict[str, tuple[int, int, int]], offsets: dict[str, int], label: str = "memplan"
) -> PlanView:
    """Tensors name -> (start, end, bytes), all in mem_id 1 at the given offsets."""
    tensors = {
        n: TensorInfo(n, "op", "4", "float32", b, s, e, "activation") for n, (s, e, b) in sizes.items()
    }
    arena = max(offsets[n] + b for n, (_, _, b) in sizes.items())
    return PlanView(label, tensors, {n: (1, offsets[n]) for n in sizes}, {1: arena}, lower_bound=None)


def _program(plan: PlanView, name: str = "p") -> ProgramReport:
    return ProgramReport(
        name, [MethodReport("forward", [plan], emitted=[0, plan.arena_bytes])], constant_bytes=10
    )


def test_past_the_hover_limit_the_smallest_tensors_are_outlines(monkeypatch) -> None:
    sizes = {f"t{i}": (i, i + 1, 100 * (i + 1)) for i in range(5)}
    plan = _plan(sizes, {n: 0 for n in sizes})
    monkeypatch.setattr(figures, "HOVER_LIMIT", 3)
    fig = figures.arena_figure(MethodReport("forward", [plan]))
    hovered = {row[0] for trace in fig.data if trace.type == "bar" for row in trace.customdata}
    assert hovered == {"t4", "t3", "t2"}  # the largest by bytes x steps
    (outline,) = [t for t in fig.data if t.type == "scatter"]
    assert outline.hoverinfo == "skip" and list(outline.x).count(None) == 2


def test_a_plan_above_its_lower_bound_points_to_an_exact_solver() -> None:
    plan = _plan({"a": (0, 2, 100), "b": (2, 4, 100)}, {"a": 0, "b": 100})  # 200 B where 100 B would do
    plan.lower_bound = 100
    (verdict,) = verdicts(_program(plan), [BudgetBank("sram", 150)])
    assert not verdict.fits and verdict.sentence() == "sram: does not fit by 50 B (50 B)"
    assert "an exact solver" in verdict.change


def test_the_budget_names_what_the_file_does_not_determine() -> None:
    report = _program(_plan({"a": (0, 2, 100)}, {"a": 0}))
    report.methods[0].delegates = ["XnnpackBackend"]
    rows = {r.what: r for r in budget_rows(report)}
    assert rows["planned arena mem_id 1"].bytes == 100
    assert rows["scratch of XnnpackBackend"].bytes is None
    assert rows["runtime temp allocator (kernel scratch)"].bytes is None


def _values(*tensors: tuple[str, str, str, int], name: str) -> ProgramReport:
    """A .pte-like program: tensors (value name, writer, shape, bytes) written one after another."""
    infos = {
        v: TensorInfo(v, op, shape, "float32", nbytes, i, i + 2, "activation")
        for i, (v, op, shape, nbytes) in enumerate(tensors)
    }
    offsets = {v: (1, 0) for v in infos}
    plan = PlanView("this file", infos, offsets, {1: max(t.nbytes for t in infos.values())})
    total = plan.arena_bytes
    return ProgramReport(name, [MethodReport("forward", [plan], emitted=[0, total])], names_nodes=False)


def test_diff_matches_pte_tensors_by_what_computes_them_not_by_value_number() -> None:
    before = _values(
        ("v3", "aten::permute_copy.out", "4x1", 16),
        ("v5", "aten::mm.out", "4x8", 128),
        ("v7", "alias of v5", "4x8", 128),
        ("v9", "aten::relu.out", "4x8", 128),
        name="stock",
    )
    after = _values(  # a new op first renumbers every later value; relu's output doubled
        ("v3", "aten::mm.out", "64x64", 16384),
        ("v5", "aten::permute_copy.out", "4x1", 16),
        ("v7", "aten::mm.out", "4x8", 128),
        ("v9", "alias of v7", "4x8", 128),
        ("v11", "aten::relu.out", "8x8", 256),
        name="memplan",
    )
    found = diff_programs(before, after)
    text = found.text()
    assert found.matched == {"forward": (4, 1, 0)}
    assert "tensor forward/v3 (aten::mm.out): new, 16,384 B; 64x64 float32" in text
    assert (
        "tensor forward/v9 -> v11 (aten::relu.out): grew by 128 B (+100.0%), 128 -> 256 B; shape 4x8 -> 8x8"
        in text
    )
    grew = [line for line in text.splitlines() if line.startswith("tensor") and "grew" in line]
    assert len(grew) == 1  # v3 (permute_copy, 16 B) is not "grown" into v3 (mm, 16,384 B)


def test_diff_never_pairs_tensors_of_different_ops() -> None:
    before = _values(("v1", "aten::permute_copy.out", "4", 4), ("v2", "aten::add.out", "4", 16), name="a")
    after = _values(("v1", "aten::mm.out", "64", 256), ("v2", "aten::add.out", "4", 16), name="b")
    found = diff_programs(before, after)
    tensors = [c.sentence() for c in found.changes if c.kind == "tensor" and c.delta]
    assert sorted(tensors) == [
        "tensor forward/v1 (aten::mm.out): new, 256 B; 64 float32",
        "tensor forward/v1 (aten::permute_copy.out): gone (was 4 B); 4 float32",
    ]


def test_diff_reports_growth_by_name() -> None:
    before = _program(_plan({"a": (0, 2, 100), "b": (1, 3, 50)}, {"a": 0, "b": 100}), "before")
    after = _program(_plan({"a": (0, 2, 100), "b": (1, 3, 80)}, {"a": 0, "b": 100}), "after")
    found = diff_programs(before, after)
    assert "tensor forward/b (op): grew by 30 B (+60.0%), 50 -> 80 B" in found.text()
    assert found.worst_growth == pytest.approx(30 / 150)


def test_the_page_inlines_plotlys_basic_bundle_once_at_plotly_pys_version() -> None:
    import plotly.offline

    from memplan.viz.report import plotlyjs, render

    # A plotly upgrade needs the matching plotly.js-basic-dist-min in viz/report/assets (else pages
    # fall back to the full 4.8 MB bundle).
    assert plotlyjs.bundle_version() == plotly.offline.get_plotlyjs_version()
    page = render(_program(_plan({"a": (0, 2, 100), "b": (1, 3, 50)}, {"a": 0, "b": 100})))
    assert page.count(plotlyjs.library()) == 1 and plotlyjs.library() == plotlyjs.BUNDLE.read_text()
    assert page.count("Plotly.newPlot") == 2  # the arena chart and the live-bytes profile
    assert len(page) < len(plotly.offline.get_plotlyjs()) / 3


def test_equal_arenas_share_one_line_and_label_in_the_live_bytes_chart() -> None:
    sizes = {"a": (0, 2, 100), "b": (1, 3, 50)}
    ours, stock = _plan(sizes, {"a": 0, "b": 100}, "memplan"), _plan(sizes, {"a": 50, "b": 0}, "stock")
    fig = figures.profile_figure(MethodReport("forward", [ours, stock]))
    labels = [a.text for a in fig.layout.annotations if a.text.startswith("arena")]
    assert labels == ["arena memplan = stock: 150 B"]
    bigger = _plan(sizes, {"a": 0, "b": 150}, "stock")
    fig = figures.profile_figure(MethodReport("forward", [ours, bigger]))
    labels = [a.text for a in fig.layout.annotations if a.text.startswith("arena")]
    assert labels == ["arena memplan: 150 B", "arena stock: 200 B"]


def _tried(*tries: LeverTry) -> ProgramReport:
    report = _program(_plan({"a": (0, 2, 100), "b": (1, 3, 100)}, {"a": 0, "b": 100}))  # 200 B
    report.tries = list(tries)
    return report


def test_a_measured_lever_that_fits_is_the_smallest_change_and_the_page_lists_every_try() -> None:
    report = _tried(
        LeverTry("--const-prop", "fold constants", "bestfit", 200, 100),
        LeverTry("--tiling", "bands", "bestfit", 200, 140),
        LeverTry("--convert-linear", "linear", "bestfit", 200, failed="RuntimeError: cannot lower"),
    )
    sram, _ = verdicts(report, [BudgetBank("sram", 150), BudgetBank("dram", 1000)])
    assert not sram.fits
    assert sram.change.startswith(
        "--const-prop (fold constants): measured, the program's arenas drop from 200 to 100 B"
    )
    page = render(report, [BudgetBank("sram", 150), BudgetBank("dram", 1000)])
    rows = page[page.index("<table class='tries'>") :]
    assert rows.index("--const-prop") < rows.index("--tiling") < rows.index("--convert-linear")
    assert "saves 100 B (50.0%)" in rows and "saves 60 B (30.0%)" in rows
    assert "failed: RuntimeError: cannot lower" in rows


def test_without_a_lever_that_fits_the_verdict_names_the_best_one_tried() -> None:
    report = _tried(
        LeverTry("--tiling", "bands", "bestfit", 200, 180), LeverTry("--const-prop", "c", "bestfit", 200, 200)
    )
    (sram,) = verdicts(report, [BudgetBank("sram", 150)])
    assert sram.change.endswith("; of the levers tried, --tiling saves the most, 200 -> 180 B: not enough")
    (sram,) = verdicts(_tried(LeverTry("--tiling", "bands", "bestfit", 200, 200)), [BudgetBank("sram", 150)])
    assert sram.change.endswith("; no lever or lowering memplan tried saves bytes")


def test_a_weight_transpose_at_the_peak_names_the_lowering_measured_to_remove_it() -> None:
    from memplan.viz.report.explain import peak_rows

    tensors = {
        "w_t": TensorInfo("w_t", "permute_copy.out", "64x192", "float32", 300, 0, 2, "activation"),
        "h": TensorInfo("h", "mm.out", "1x192", "float32", 100, 0, 2, "activation"),
    }
    plan = PlanView("memplan", tensors, {"w_t": (1, 0), "h": (1, 300)}, {1: 400})
    method = MethodReport("forward", [plan])
    tries = [
        LeverTry("--tiling", "bands", "bestfit", 400, 400),
        LeverTry("--const-prop", "fold", "bestfit", 400, 100),
    ]
    _, _, rows = peak_rows(method, tries=tries)
    said = {r.tensor.name: r.actions for r in rows}
    assert said["w_t"][0].startswith("no lever applies")
    assert said["w_t"][1] == (
        "a transpose copy: if it is a weight's, --const-prop removes such copies; measured for the whole"
        " program: 400 -> 100 B with bestfit (see the levers not used)"
    )
    assert len(said["h"]) == 1  # an mm output is not a transpose
    _, _, rows = peak_rows(method)  # nothing measured: nothing claimed
    assert len(rows[0].actions) == 1
