"""The shape of the source tree: files per folder, the largest files, long functions, imports between floors.

    python -m memplan.experiments.bench.tree_shape [--repo .] [--long 80] [--largest 10]

Reads the repository's Python files as text (nothing is imported or run); floors and imports between
them as experiments.source_tree reads them (an import inside a function body counts too, shown in its
own column; the front door, `memplan/__init__.py`, is its own row).
"""

from __future__ import annotations

import argparse
import ast
from collections import Counter
from pathlib import Path

from memplan.experiments.markdown import StreamedTable
from memplan.experiments.source_tree import FLOORS, FRONT_DOOR, floor_imports, runs_up, source_files


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
