"""The flags every benchmark script shares with the CLI, spelled and defaulted once.

Lists are comma-separated (`--solvers bestfit,cpsat`); there is one `--time-limit`, whose default
is the solver layer's (`memplan.solvers.DEFAULT_TIME_LIMIT_S`) unless a script gives a measured
reason for another, in its help; models are zoo names or program specs; solvers default to every
registered one, as in the sweep. A bad list item ends the script with one argparse error line.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TypeVar

from memplan.errors import UsageError
from memplan.experiments.checks import check_choice, parse_list, parse_switches
from memplan.experiments.zoo.lowering import library_warnings_silenced
from memplan.solvers import DEFAULT_TIME_LIMIT_S

T = TypeVar("T")

__all__ = [
    "add_common",
    "add_list",
    "add_models",
    "add_solvers",
    "add_time_limit",
    "comma_list",
    "library_warnings_silenced",
    "models_of",
    "progress",
    "solvers_of",
    "switch_of",
]

MODELS_HELP = "comma-separated zoo models, .pt2 files or path/file.py:factory"


def add_time_limit(
    parser: argparse.ArgumentParser, default: float = DEFAULT_TIME_LIMIT_S, why: str = ""
) -> None:
    """`--time-limit` in seconds per solve; a default other than the solver layer's needs its `why`."""
    if default != DEFAULT_TIME_LIMIT_S and not why:
        raise ValueError(
            f"--time-limit default {default} differs from the solvers' {DEFAULT_TIME_LIMIT_S}: say why"
        )
    reason = f"; {why}" if why else ""
    parser.add_argument(
        "--time-limit",
        type=float,
        default=default,
        help=f"seconds per solve for time-limited solvers (default: %(default)s{reason})",
    )


def add_models(parser: argparse.ArgumentParser, default: Sequence[str] | None = None) -> None:
    """`--models` as a comma list, read by `models_of` (default: the given names, else the whole zoo)."""
    parser.add_argument(
        "--models",
        default=",".join(default) if default else None,
        help=f"{MODELS_HELP} (default: %(default)s)" if default else f"{MODELS_HELP} (default: the zoo)",
    )


def add_solvers(parser: argparse.ArgumentParser, default: Sequence[str] | None = None) -> None:
    """`--solvers`, a comma list of registered solvers (default: the given names, else None: every one,
    as `solvers_of` reads it)."""
    from memplan import solvers

    parser.add_argument(
        "--solvers",
        type=comma_list("solver", choices=solvers.available()),
        default=",".join(default) if default else None,
        help="comma-separated solvers (default: %(default)s)"
        if default
        else "comma-separated solvers (default: all registered, as the sweep)",
    )


def add_common(
    parser: argparse.ArgumentParser,
    models: Sequence[str] | None = None,
    cat_fusion: str | None = "on",
    solvers: Sequence[str] | None = None,
) -> None:
    """--models, --solvers, --time-limit, --cat-fusion (unless None), --quiet with the sweep's spelling and defaults."""
    add_models(parser, models)
    add_solvers(parser, solvers)
    add_time_limit(parser)
    if cat_fusion is not None:
        parser.add_argument("--cat-fusion", default=cat_fusion, help="on or off (default: %(default)s)")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")


def comma_list(
    kind: str, convert: Callable[[str], object] = str, choices: Sequence[str] | None = None, hint: str = ""
) -> Callable[[str], list]:
    """An argparse `type`: 'a,b' -> [convert('a'), convert('b')], each one of `choices` if given
    (else the error names the valid ones, then `hint`)."""

    def parse(text: str) -> list:
        try:
            items = parse_list(text, kind, convert)
            for item in items:
                if choices is not None:
                    check_choice(kind, str(item), choices, hint)
        except UsageError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
        return items

    parse.__name__ = f"{kind} list"
    return parse


def add_list(
    parser: argparse.ArgumentParser,
    flag: str,
    default: Iterable[object],
    kind: str,
    help: str,
    convert: Callable[[str], object] = str,
    choices: Sequence[str] | None = None,
    hint: str = "",
) -> None:
    """A comma-list flag (`--sizes 1000,10000`), parsed and checked by `comma_list`."""
    parser.add_argument(
        flag,
        type=comma_list(kind, convert, choices, hint),
        default=",".join(map(str, default)),
        help=f"{help} (default: %(default)s)",
    )


def models_of(args: argparse.Namespace) -> list[str]:
    from memplan.experiments import zoo

    return parse_list(args.models, "model") if args.models else zoo.names()


def solvers_of(args: argparse.Namespace) -> list[str]:
    """The solvers of `--solvers`, or every registered one when it is not given."""
    from memplan import solvers

    return solvers.available() if args.solvers is None else args.solvers


def switch_of(text: str) -> bool:
    (value,) = parse_switches(text)[:1]
    return value


def progress(items: Iterable[T], total: int, desc: str, quiet: bool = False) -> Iterator[T]:
    """A tqdm bar on stderr over `items` (off with `quiet`); where stderr is no terminal (CI logs,
    nohup), where tqdm draws nothing, one line per item instead."""
    import sys

    from tqdm import tqdm

    if quiet or sys.stderr.isatty():
        yield from tqdm(items, total=total, desc=desc, unit="model", disable=quiet or None)
        return
    for done, item in enumerate(items, start=1):
        print(f"{desc}: {done}/{total} {item}", file=sys.stderr, flush=True)
        yield item
