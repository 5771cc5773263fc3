"""The cyclic garbage collector paused while a heuristic builds objects by the 100,000.

Every few hundred new tuples Python's collector runs, and its full passes
walk every object alive, the problem's buffers included: on
`layered_problem(100_000)` that was three quarters of `units_of`'s time.
What best-fit builds holds no reference cycles, so nothing waits on a
collection; the collector's previous state is restored on the way out.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def gc_paused() -> Iterator[None]:
    """Run the body with automatic garbage collection off (unless it already was)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
