"""The shape of the source tree: files per folder, the largest files, long functions, imports between floors.

    python -m memplan.experiments.bench.structure [--repo .] [--long 80] [--largest 10]

Reads the repository's Python files as text (nothing is imported or run). A floor is a top-level
directory (`memplan/` the problem model, then `solvers/`, `planner/`, `viz/`, `experiments/`); an import
of `memplan.<layer>...` lands on that layer's floor, any other `memplan...` on the model's. An import
inside a function body counts too (it runs all the same), shown in its own column. The front door,
`memplan/__init__.py`, re-exports every floor lazily and is its own row.
"""

from __future__ import annotations

import argparse
import ast
from collections import Counter
from pathlib import Path

from memplan.experiments.cli.tables import StreamedTable

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


def long_functions(repo: Path, limit: int) -> list[tuple[int, str]]:
    """(lines, path:function) of every function longer than `limit` lines."""
    rows = []
    for path in source_files(repo):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.end_lineno:
                length = node.end_lineno - node.lineno + 1
                if length > limit:
                    rows.append((length, f"{path.relative_to(repo)}:{node.name}"))
    return sorted(rows, reverse=True)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repo", type=Path, default=Path("."))
    parser.add_argument("--long", type=int, default=80, help="a long function has more lines than this")
    parser.add_argument("--largest", type=int, default=10, help="how many of the largest files to list")
    args = parser.parse_args(argv)
    repo = args.repo.resolve()

    folders = StreamedTable(["folder", ".py files", "lines"])
    for folder in sorted({p.parent for p in repo.rglob("*.py") if ".venv" not in p.parts}):
        files = list(folder.glob("*.py"))
        lines = sum(len(p.read_text().splitlines()) for p in files)
        folders.row([str(folder.relative_to(repo)) or ".", len(files), lines])

    sizes = sorted(
        ((len(p.read_text().splitlines()), str(p.relative_to(repo))) for p in source_files(repo)),
        reverse=True,
    )
    print()
    largest = StreamedTable(["largest files", "lines"])
    for lines, name in sizes[: args.largest]:
        largest.row([name, lines])

    print()
    long = StreamedTable([f"functions over {args.long} lines", "lines"])
    for lines, name in long_functions(repo, args.long):
        long.row([name, lines])

    print()
    columns = ["from floor", "to floor", "files importing at top level", "files importing inside functions"]
    graph = StreamedTable([*columns, "direction"])
    edges = Counter((source, target, lazy) for _, source, target, lazy in floor_imports(repo))
    order = (FRONT_DOOR, *FLOORS)
    for source, target in sorted(
        {(s, t) for s, t, _ in edges}, key=lambda e: (order.index(e[0]), order.index(e[1]))
    ):
        graph.row(
            [
                source,
                target,
                edges[(source, target, False)],
                edges[(source, target, True)],
                "UP" if runs_up(source, target) else "down",
            ]
        )


if __name__ == "__main__":
    main()
