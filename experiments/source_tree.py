"""The source tree's floors and the imports between them, read from the files' syntax (nothing imported).

A floor is a top-level directory (`memplan/` the problem model, then `solvers/`, `planner/`, `viz/`,
`experiments/`); an import of `memplan.<layer>...` lands on that layer's floor, any other `memplan...` on
the model's. An import inside a function body counts too (it runs all the same). The front door,
`memplan/__init__.py`, re-exports every floor lazily and stands above them all. Used by the layout test
and by the `bench.tree_shape` script.
"""

from __future__ import annotations

import ast
from pathlib import Path

FLOORS = ("memplan", "solvers", "planner", "viz", "experiments")
SOURCE_FLOORS = FLOORS  # tests/ and notebooks/ are not part of the installed package
FRONT_DOOR = "front door"  # memplan/__init__.py: lazy re-exports of every floor, above them all


def floor_of_file(repo: Path, path: Path) -> str:
    """The floor a source file stands on (the front door apart)."""
    relative = path.relative_to(repo)
    return FRONT_DOOR if relative == Path("memplan/__init__.py") else relative.parts[0]


def front_door_names(repo: Path) -> dict[str, str]:
    """Name -> module of every lazy re-export of the front door (its `_LAZY` table)."""
    for node in ast.walk(ast.parse((repo / "memplan" / "__init__.py").read_text())):
        if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "_LAZY" for t in node.targets):
            return {name: module for name, (module, _) in ast.literal_eval(node.value).items()}
    return {}


def floor_of_module(module: str, front_door: dict[str, str]) -> str | None:
    """The floor an absolute `memplan...` module (or front-door name) lives on; None outside memplan."""
    parts = module.split(".")
    if parts[0] != "memplan":
        return None
    if len(parts) == 2 and parts[1] in front_door:  # `from memplan import PlannerPass`
        parts = front_door[parts[1]].split(".")
    if len(parts) > 1 and parts[1] in FLOORS[1:]:
        return parts[1]
    return "memplan"


def imported_modules(tree: ast.AST) -> list[tuple[str, bool]]:
    """(module, inside a function) for every absolute import; `from memplan.x import y` also yields
    `memplan.x.y`, so importing a submodule by name lands on its floor."""
    found: list[tuple[str, bool]] = []

    def visit(node: ast.AST, lazy: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.Import):
                found.extend((alias.name, lazy) for alias in child.names)
            elif isinstance(child, ast.ImportFrom) and child.module and child.level == 0:
                found.append((child.module, lazy))
                found.extend((f"{child.module}.{alias.name}", lazy) for alias in child.names)
            visit(child, lazy or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)))

    visit(tree, False)
    return found


def source_files(repo: Path) -> list[Path]:
    return sorted(p for floor in SOURCE_FLOORS for p in (repo / floor).rglob("*.py"))


def floor_imports(repo: Path) -> list[tuple[Path, str, str, bool]]:
    """(file, its floor, floor imported, inside a function) for every import of another floor."""
    front_door = front_door_names(repo)
    rows = set()
    for path in source_files(repo):
        floor = floor_of_file(repo, path)
        for module, lazy in imported_modules(ast.parse(path.read_text())):
            target = floor_of_module(module, front_door)
            if target is not None and target != floor:
                rows.add((path, floor, target, lazy))
    return sorted(rows)


def runs_up(source: str, target: str) -> bool:
    """True when `source` imports from a floor above it (the front door stands above every floor)."""
    return source != FRONT_DOOR and FLOORS.index(target) > FLOORS.index(source)
