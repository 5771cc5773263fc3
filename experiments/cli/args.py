"""What every benchmark script shares with the CLI: comma lists, the sweep's solver set and defaults,
models as zoo names or program specs, progress bars, and library warnings silenced.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterable, Iterator, Sequence
from typing import TypeVar

from memplan.experiments.sweep.grid import DEFAULT_TIME_LIMIT_S, check_choice, parse_list, parse_switches
from memplan.experiments.zoo.lowering import library_warnings_silenced

T = TypeVar("T")

__all__ = ["add_common", "library_warnings_silenced", "models_of", "progress", "solvers_of", "switch_of"]


def add_common(
    parser: argparse.ArgumentParser, models: Sequence[str] | None = None, cat_fusion: str | None = "on"
) -> None:
    """--models, --solvers, --time-limit, --cat-fusion (unless None) with the sweep's spelling and defaults."""
    parser.add_argument(
        "--models",
        default=",".join(models) if models else None,
        help="comma-separated zoo models, .pt2 files or file.py:factory (default: %(default)s)"
        if models
        else "comma-separated zoo models, .pt2 files or file.py:factory (default: the zoo)",
    )
    parser.add_argument("--solvers", help="comma-separated solvers (default: all registered, as the sweep)")
    parser.add_argument(
        "--time-limit",
        type=float,
        default=DEFAULT_TIME_LIMIT_S,
        help="seconds per solve for time-limited solvers (default: %(default)s)",
    )
    if cat_fusion is not None:
        parser.add_argument("--cat-fusion", default=cat_fusion, help="on or off (default: %(default)s)")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")


def models_of(args: argparse.Namespace) -> list[str]:
    from memplan.experiments import zoo

    return parse_list(args.models, "model") if args.models else zoo.names()


def solvers_of(args: argparse.Namespace) -> list[str]:
    from memplan import solvers

    names = parse_list(args.solvers, "solver") if args.solvers else solvers.available()
    for name in names:
        check_choice("solver", name, solvers.available())
    return names


def switch_of(text: str) -> bool:
    (value,) = parse_switches(text)[:1]
    return value


def progress(items: Iterable[T], total: int, desc: str, quiet: bool = False) -> Iterator[T]:
    """A tqdm bar on stderr over `items` (off with `quiet`)."""
    from tqdm import tqdm

    yield from tqdm(items, total=total, desc=desc, unit="model", disable=quiet or None)
