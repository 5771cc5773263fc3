"""The package layout holds: one `memplan` namespace, torch-free solvers, private ExecuTorch names in one module.

Each check runs Python in a fresh subprocess from a folder outside the checkout, as a user would.
"""

from __future__ import annotations

import ast
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
LAYERS = ("planner", "solvers", "viz", "experiments")


def run_python(code: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_front_door_from_a_folder_with_its_own_viz_and_experiments(tmp_path: Path) -> None:
    (tmp_path / "viz.py").write_text("MINE = True\n")
    (tmp_path / "experiments").mkdir()
    (tmp_path / "experiments" / "__init__.py").write_text("MINE = True\n")
    done = run_python(
        """
        import viz, experiments
        import memplan, memplan.viz, memplan.experiments.zoo
        assert viz.MINE and experiments.MINE
        assert callable(memplan.viz.gantt)
        assert memplan.__version__ and memplan.__version__ != "0+unknown"
        from memplan import Buffer, Plan, PlannerPass, Problem, solve
        problem = Problem((Buffer("a", 0, 2, 8), Buffer("b", 1, 3, 8)))
        assert solve(problem, "bestfit").arena_size == 16
        assert PlannerPass.__module__ == "memplan.planner.pass_"
        print("ok")
        """,
        tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"


def test_no_generic_top_level_names_installed(tmp_path: Path) -> None:
    done = run_python(
        f"""
        import importlib.util
        found = [n for n in {LAYERS!r} if importlib.util.find_spec(n) is not None]
        print(found)
        """,
        tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


@pytest.mark.parametrize("layer", LAYERS)
def test_a_layer_directory_is_not_importable_under_a_second_name(layer: str) -> None:
    done = run_python(f"import {layer}", REPO)
    assert done.returncode != 0
    assert f"memplan.{layer}" in done.stderr


def test_solvers_and_the_problem_model_never_import_torch(tmp_path: Path) -> None:
    solver_modules = sorted(
        ".".join(p.relative_to(REPO / "solvers").with_suffix("").parts)
        for p in (REPO / "solvers").rglob("*.py")
        if p.stem != "__init__"
    )
    done = run_python(
        f"""
        import importlib, sys
        import memplan
        from memplan import solvers
        from memplan import generate, io, peak_bound, problem, validate
        for name in {solver_modules!r}:
            importlib.import_module("memplan.solvers." + name)
        small = generate.random_problem(12, seed=1)
        for name in solvers.available():
            solvers.solve(small, name, time_limit_s=2)
        heavy = sorted(m for m in sys.modules if m.split(".")[0] in ("torch", "executorch"))
        print(heavy)
        """,
        tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "[]"


def _imports(path: Path) -> list[str]:
    """Every module name `path` imports (absolute imports; `from a import b` gives `a` and `a.b`)."""
    names: list[str] = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.append(node.module)
            names.extend(f"{node.module}.{alias.name}" for alias in node.names)
    return names


MODEL_MODULES = sorted(p for p in (REPO / "memplan").glob("*.py") if p.name != "__init__.py")


def _is_model(name: str) -> bool:
    """True for `memplan.<module>` of the ground floor (not the front door, not a layer above)."""
    parts = name.split(".")
    return parts[0] == "memplan" and len(parts) > 1 and parts[1] not in LAYERS


def test_the_problem_model_imports_nothing_of_memplan_but_itself() -> None:
    for path in MODEL_MODULES:
        outside = [n for n in _imports(path) if n.startswith("memplan") and not _is_model(n)]
        assert not outside, f"memplan/{path.name} imports {outside}"


def test_solvers_import_only_the_problem_model_and_each_other() -> None:
    for path in sorted((REPO / "solvers").rglob("*.py")):
        bad = [
            n
            for n in _imports(path)
            if n.startswith("memplan") and not (_is_model(n) or n.startswith("memplan.solvers"))
        ]
        bad += [n for n in _imports(path) if n.split(".")[0] in ("torch", "executorch")]
        assert not bad, f"{path.name} imports {bad}"


def test_no_import_runs_up_a_floor() -> None:
    """model -> solvers -> planner -> viz -> experiments, read from the AST (imports inside functions
    too); only the front door, memplan/__init__.py, re-exports upper floors (lazily)."""
    from memplan.experiments.source_tree import floor_imports, runs_up

    up = [
        f"{path.relative_to(REPO)}: {source} imports {target}"
        for path, source, target, _ in floor_imports(REPO)
        if runs_up(source, target)
    ]
    assert not up, up
    assert any(
        source == "experiments" and target == "planner" for _, source, target, _ in floor_imports(REPO)
    )


def test_private_executorch_names_only_in_the_compat_module() -> None:
    compat = REPO / "planner" / "compat.py"
    offenders = []
    for path in sorted(REPO.glob("*/**/*.py")):
        if path == compat or ".venv" in path.parts or path.parts[len(REPO.parts)] == "tests":
            continue
        for name in _imports(path):
            if name.split(".")[0] == "executorch" and any(p.startswith("_") for p in name.split(".")):
                offenders.append(f"{path.relative_to(REPO)}: {name}")
    assert not offenders, offenders


def test_version_on_the_command_line(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "memplan.experiments.cli.main", "--version"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("memplan ")


def test_typed_marker_ships_with_the_package() -> None:
    import memplan

    assert (Path(memplan.__file__).parent / "py.typed").is_file()


def test_no_benchmark_script_imports_another() -> None:
    scripts = {p.stem for p in (REPO / "experiments" / "bench").glob("*.py") if "__main__" in p.read_text()}
    for stem in sorted(scripts):
        others = {
            n
            for n in _imports(REPO / "experiments" / "bench" / f"{stem}.py")
            if n.startswith("memplan.experiments.bench.")
        }
        named = {n.split(".")[3] for n in others} & (scripts - {stem})
        assert not named, f"experiments/bench/{stem}.py imports the scripts {sorted(named)}"
