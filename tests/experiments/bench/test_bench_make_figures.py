"""The docs figures: the zoom on close arenas, and the figures drawn for a tiny zoo model."""

from __future__ import annotations

from memplan import viz
from memplan.experiments.bench import make_figures
from memplan.plan import Plan
from memplan.problem import Buffer, Problem


def plan_of(arena: int, solver: str) -> Plan:
    return Plan(offsets={}, arena_sizes={0: arena}, solver=solver)


def test_zoom_only_when_two_arenas_nearly_coincide() -> None:
    problem = Problem((Buffer("a", 0, 40, 1000), Buffer("b", 10, 20, 500)))  # peak 1500 over [10, 20)
    far = {"x": plan_of(1500, "x"), "y": plan_of(2000, "y")}
    assert viz.peak_window(problem, far) is None
    near = {"x": plan_of(1500, "x"), "y": plan_of(1510, "y"), "z": plan_of(3000, "z")}
    (x0, x1), (y0, y1) = viz.peak_window(problem, near)
    assert x0 < 10 < x1
    assert y0 < 1500 and 1510 < y1 < 3000  # both close arenas inside, the far one out


def test_figures_of_a_tiny_model(tmp_path, monkeypatch) -> None:
    solvers = make_figures.solver_figure("cat_seed", ["greedy", "bestfit"])
    titles = [ax.get_title() for ax in solvers.axes]
    assert titles == ["greedy: arena 1 KiB = lower bound", "bestfit: arena 1 KiB = lower bound"]
    fusion = make_figures.cat_fusion_figure("cat_seed", solver="bestfit")
    assert fusion.axes[1].get_title().startswith("cat fusion on (groups: 1, 512 B of copies removed)")
    profile = make_figures.profile_figure("cat_seed", ["greedy", "bestfit"])  # equal arenas: zoomed
    assert len(profile.axes) == 2 and profile.axes[1].get_title() == "around the peak"

    monkeypatch.setattr(make_figures, "FIGURES", {"tiny.png": lambda: fusion})
    monkeypatch.setattr(make_figures, "NUMBERS", [("cat_seed", "bestfit", True)])
    assert make_figures.main(["--out", str(tmp_path)]) == 0
    assert (tmp_path / "tiny.png").read_bytes().startswith(b"\x89PNG")
