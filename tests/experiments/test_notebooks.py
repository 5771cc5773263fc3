"""The notebooks run top to bottom on small inputs and draw their figures.

Each notebook is executed by nbclient in a kernel running this interpreter
(a kernel spec written to a temporary folder, so a fresh venv needs nothing
registered), with its "parameters" cell overridden by an injected cell, as
papermill does.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import nbformat
import pytest
from ipykernel.kernelspec import write_kernel_spec
from jupyter_client.kernelspec import KernelSpecManager
from jupyter_client.manager import AsyncKernelManager
from nbclient import NotebookClient

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"
KERNEL = "memplan-test"
TIMEOUT_S = 300  # per cell; the whole file takes well under a minute


@pytest.fixture(scope="module")
def kernel_specs(tmp_path_factory: pytest.TempPathFactory) -> KernelSpecManager:
    """A kernel spec whose argv is this interpreter, in a folder only these tests search."""
    folder = tmp_path_factory.mktemp("kernels")
    write_kernel_spec(folder / KERNEL, overrides={"display_name": "memplan tests"})
    spec = json.loads((folder / KERNEL / "kernel.json").read_text())
    assert spec["argv"][0] == sys.executable
    return KernelSpecManager(kernel_dirs=[str(folder)])


def inject(nb: nbformat.NotebookNode, values: dict) -> None:
    """Insert a cell assigning `values` right after the cell tagged "parameters"."""
    (index,) = [i for i, c in enumerate(nb.cells) if "parameters" in c.metadata.get("tags", [])]
    source = "\n".join(f"{name} = {value!r}" for name, value in values.items())
    nb.cells.insert(index + 1, nbformat.v4.new_code_cell(source, metadata={"tags": ["injected-parameters"]}))


def execute(name: str, values: dict, specs: KernelSpecManager, workdir: Path) -> nbformat.NotebookNode:
    nb = nbformat.read(NOTEBOOKS / name, as_version=4)
    inject(nb, values)
    km = AsyncKernelManager(kernel_name=KERNEL, kernel_spec_manager=specs)
    NotebookClient(nb, km=km, timeout=TIMEOUT_S, resources={"metadata": {"path": str(workdir)}}).execute()
    return nb


def outputs(nb: nbformat.NotebookNode) -> list[dict]:
    return [out for cell in nb.cells if cell.cell_type == "code" for out in cell.outputs]


def images(nb: nbformat.NotebookNode) -> list[dict]:
    return [out for out in outputs(nb) if "image/png" in out.get("data", {})]


def text(nb: nbformat.NotebookNode) -> str:
    parts = []
    for out in outputs(nb):
        parts.append(out.get("text", ""))
        parts.append(out.get("data", {}).get("text/plain", ""))
        parts.append(out.get("data", {}).get("text/html", ""))
        parts.append(out.get("data", {}).get("text/markdown", ""))
    return "\n".join(parts)


def test_committed_notebooks_carry_no_outputs() -> None:
    for path in sorted(NOTEBOOKS.glob("*.ipynb")):
        nb = nbformat.read(path, as_version=4)
        nbformat.validate(nb)
        stale = [
            i for i, c in enumerate(nb.cells) if c.cell_type == "code" and (c.outputs or c.execution_count)
        ]
        assert not stale, f"{path.name}: cells {stale} carry outputs; strip them before committing"


def test_plan_visualization_draws_all_four_figures(kernel_specs: KernelSpecManager, tmp_path: Path) -> None:
    values = {
        "SOLVER_MODEL": "cat_seed",
        "SOLVERS": ["greedy", "bestfit", "cpsat"],
        "FUSION_MODEL": "cat_seed",
        "STATE_MODEL": "multi_method_cache",
        "TIME_LIMIT_S": 2.0,
    }
    nb = execute("plan_visualization.ipynb", values, kernel_specs, tmp_path)
    assert not [o for o in outputs(nb) if o.output_type == "error"]
    # solvers side by side, fusion off/on, the methods with shared state, the profile, kinds + fragmentation
    assert len(images(nb)) == 5
    shown = text(nb)
    assert "store.k_cache" in shown and "set_cache" in shown and "attend" in shown
    assert "fusion off" in shown and "fusion on" in shown  # the fusion cell's table
    assert "matches eager: True" in shown  # the notebook's own model, planned and run
    (planned,) = [
        o["data"]["text/html"]
        for o in outputs(nb)
        if "class='memplan'" in o.get("data", {}).get("text/html", "")
    ]
    assert "<svg" in planned and "forward: live bytes, peak" in planned and "ExecuTorch (stock)" in planned
    assert len(planned) < 50_000  # inline SVG, no plotly in the repr
    plotly = [o for o in outputs(nb) if "application/vnd.plotly.v1+json" in o.get("data", {})]
    assert len(plotly) == 2  # the interactive arena chart and profile, inline
    arena = plotly[0]["data"]["application/vnd.plotly.v1+json"]
    hovered = {row[0] for trace in arena["data"] for row in trace.get("customdata") or []}
    assert "aten_cat_default" in hovered  # the cat output is a box with its hover data
    assert (tmp_path / "three_branch_report.html").stat().st_size > 1_000_000  # plotly.js inlined
    assert "sram: fits" in shown


def test_sweep_analysis_runs_a_tiny_sweep_and_plots_it(
    kernel_specs: KernelSpecManager, tmp_path: Path
) -> None:
    out = tmp_path / "sweep"
    values = {
        "RESULTS_DIR": None,
        "MODELS": ["cat_seed"],
        "SOLVERS": ["greedy", "bestfit"],
        "JOBS": 1,
        "SWEEP_OUT": str(out),
    }
    nb = execute("sweep_analysis.ipynb", values, kernel_specs, tmp_path)
    assert not [o for o in outputs(nb) if o.output_type == "error"]
    assert len(images(nb)) == 2  # viz.compare and the saving chart
    shown = text(nb)
    assert "2 rows, one per method, solver and settings, from" in shown and "no failed runs" in shown
    assert "geometric mean" in shown
    assert "arena / lower bound, geometric mean" in shown and "<svg" in shown  # load_results' own HTML
    assert (out / "runs.jsonl").exists()  # the sweep went where it was told


def test_writing_sweep_outputs_leaves_the_plot_backend_alone(tmp_path: Path) -> None:
    """A notebook that runs a sweep must still show its own figures afterwards."""
    import matplotlib
    import pandas as pd

    from memplan.experiments.sweep import report

    rows = pd.DataFrame(
        [("m", "forward", "greedy", 120, 100, False, None)],
        columns=["model", "method", "solver", "arena_bytes", "lower_bound_bytes", "proven_optimal", "error"],
    )
    before = matplotlib.get_backend()
    matplotlib.use("svg")  # stands in for a notebook's inline backend (any backend but Agg)
    try:
        report._plot(rows, tmp_path / report.PLOT_FILE)
        assert matplotlib.get_backend() == "svg"
    finally:
        matplotlib.use(before)
    assert (tmp_path / report.PLOT_FILE).read_bytes().startswith(b"\x89PNG")


@pytest.mark.slow
def test_sweep_analysis_reads_a_finished_sweep_folder(
    kernel_specs: KernelSpecManager, tmp_path: Path
) -> None:
    from memplan.experiments.sweep import run as sweep

    out = tmp_path / "done"
    df = sweep.sweep(out=out, models=["cat_seed"], solvers=["greedy"], jobs=1, progress=False)
    nb = execute("sweep_analysis.ipynb", {"RESULTS_DIR": str(out)}, kernel_specs, tmp_path)
    assert not [o for o in outputs(nb) if o.output_type == "error"]
    assert f"{len(df)} rows from {out}" in text(nb)
    assert len(images(nb)) == 2
