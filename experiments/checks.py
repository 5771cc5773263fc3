"""Values checked alike wherever they come in (`memplan.plan_model`, the sweep, the CLI, the scripts).

A bad value raises `UsageError` naming it and the valid choices, before any work starts.
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from pathlib import Path

from memplan.errors import SolverOptionError, UsageError
from memplan.solvers import checked_time_limit

PT2_SUFFIX = ".pt2"
MODEL_HINT = "; or give a .pt2 file or path/file.py:factory"


def check_choice(kind: str, value: str, valid: Sequence[str], hint: str = "") -> None:
    """Raise UsageError naming `value`, the closest valid name and the valid choices unless it is one of them."""
    if value not in valid:
        raise UsageError(
            f"unknown {kind} {value!r}{did_you_mean(value, valid)}; choose from: {', '.join(valid)}{hint}"
        )


def did_you_mean(value: str, choices: Sequence[str]) -> str:
    """' (did you mean 'x'?)' for the closest choice, or ''."""
    close = difflib.get_close_matches(value, list(choices), n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


def check_alignment(alignment: int) -> None:
    if alignment < 1 or alignment & (alignment - 1):
        raise UsageError(f"alignment must be a power of two (1, 2, 4, ..., 16, ...), got {alignment}")


def check_time_limit(time_limit_s: float) -> None:
    """`solvers.checked_time_limit` (the one rule), refused as a setting: `UsageError`."""
    try:
        checked_time_limit("time limit", time_limit_s)
    except SolverOptionError:
        raise UsageError(f"time limit must be a positive number of seconds, got {time_limit_s}") from None


def parse_list(text: str, kind: str, convert=str) -> list:
    """'a,b' -> ['a', 'b'] through `convert`; a bad item raises UsageError."""
    items = [t.strip() for t in text.split(",") if t.strip()]
    try:
        return [convert(t) for t in items]
    except (ValueError, KeyError):
        raise UsageError(f"bad {kind} list {text!r}") from None


def parse_switches(text: str, what: str = "cat fusion") -> list[bool]:
    """'on,off' -> [True, False]; `what` names the setting in the error."""
    words = {"on": True, "off": False, "true": True, "false": False, "yes": True, "no": False}
    items = [t.strip().lower() for t in text.split(",") if t.strip()]
    bad = [t for t in items if t not in words]
    if bad or not items:
        raise UsageError(f"{what} must be a list of on/off, got {text!r}")
    return list(dict.fromkeys(words[t] for t in items))


def prepare_out(out: str | Path) -> Path:
    """The output folder, created and proven writable."""
    folder = Path(out)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        probe = folder / ".memplan-write-test"
        probe.write_text("")
        probe.unlink()
    except OSError as exc:
        raise UsageError(f"cannot write to output folder {str(folder)!r}: {exc.strerror or exc}") from None
    return folder


def check_model(spec: str) -> None:
    """A zoo name, or a `.pt2` / `path/file.py:factory` whose file is a regular file."""
    from memplan.experiments import zoo

    if not (spec.endswith(PT2_SUFFIX) or ".py:" in spec):
        check_choice("model", spec, zoo.names(), hint=MODEL_HINT)
    else:
        check_regular_file(Path(spec.rsplit(":", 1)[0] if ".py:" in spec else spec), f" (model {spec!r})")


def check_regular_file(path: Path, where: str = "", error: type[UsageError] = UsageError) -> None:
    """`error` unless `path` is a regular file: a missing path, a folder and a FIFO or device (which would
    block or never end) are each named as what they are, before anything reads them."""
    import stat

    try:
        mode = path.stat().st_mode
    except OSError:
        raise error(f"no such file {str(path)!r}{where}") from None
    if stat.S_ISDIR(mode):
        raise error(f"{str(path)!r} is a folder, not a file{where}")
    if not stat.S_ISREG(mode):
        raise error(f"{str(path)!r} is not a regular file (a FIFO, socket or device){where}")
