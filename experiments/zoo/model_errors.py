"""A failure inside the user's own model, told in one line: the model, the method, and the user's frame.

torch.export reports a bug in a model (a channel mismatch, a shape error) as a deep torch traceback;
the line that matters is the user's own, e.g. `broken.py:12 in forward`. A frame is the user's when
its file is outside the standard library, the installed packages (torch, ExecuTorch, ...) and memplan
itself; the innermost such frame of the error chain is named.
"""

from __future__ import annotations

import importlib.util
import os
import sysconfig
import traceback
from functools import cache

from memplan.errors import ModelError

_MEMPLAN_PACKAGES = ("memplan", "memplan.planner", "memplan.solvers", "memplan.viz", "memplan.experiments")


@cache
def _library_folders() -> tuple[str, ...]:
    """Folders whose files are not the user's: the stdlib, site-packages, memplan's own packages."""
    paths = sysconfig.get_paths()
    folders = {paths[key] for key in ("stdlib", "platstdlib", "purelib", "platlib") if key in paths}
    for name in _MEMPLAN_PACKAGES:
        spec = importlib.util.find_spec(name)
        if spec is not None and spec.submodule_search_locations:
            folders.update(spec.submodule_search_locations)
    return tuple(os.path.realpath(folder) + os.sep for folder in folders)


def error_chain(exc: BaseException) -> list[BaseException]:
    """`exc`, its cause (or context), that one's, ...: each once, even in a cycle."""
    chain: list[BaseException] = []
    link: BaseException | None = exc
    while link is not None and all(link is not seen for seen in chain):
        chain.append(link)
        link = link.__cause__ or link.__context__
    return chain


def user_frame(exc: BaseException) -> traceback.FrameSummary | None:
    """The innermost frame of the user's own code in `exc`'s chain (the cause first), or None."""
    for error in reversed(error_chain(exc)):
        for frame in reversed(traceback.extract_tb(error.__traceback__)):
            path = os.path.realpath(frame.filename)
            if not frame.filename.startswith("<") and not path.startswith(_library_folders()):
                return frame
    return None


def where(exc: BaseException) -> str:
    """` at file:line in function (the line)` for the user's frame, or "" when there is none."""
    frame = user_frame(exc)
    if frame is None:
        return ""
    code = f" ({frame.line.strip()})" if frame.line else ""
    return f" at {frame.filename}:{frame.lineno} in {frame.name}{code}"


def export_error(model: str, method: str, exc: BaseException) -> ModelError:
    """The one-line error for `method` of `model` failing in torch.export (raise it `from exc`)."""
    first = next((line for line in str(exc).splitlines() if line.strip()), "")
    return ModelError(
        f"{model}: method {method}: torch.export failed{where(exc)}: {type(exc).__name__}: {first.strip()}"
    )
