"""Lines other libraries print that say nothing to a memplan user, dropped at the command line's edge.

torchao logs "Failed to load .../_C_mxfp8...so" for kernels of GPUs this machine does not have (and
torch's pytree a deprecation line on the same import); the ExecuTorch runtime's C++ writes
`[cpuinfo_utils.cpp]` lines straight to file descriptor 2. The library never hides them (a notebook
or script sees everything); only `memplan` on the command line sends its standard error through
`filtered_stderr`, which passes every other line on unchanged.
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
import threading
from collections.abc import Iterator

NOISE = re.compile(
    rb"Failed to load \S*torchao\S*_C_"
    rb"|\[cpuinfo_utils\.cpp(:\d+)?\]"
    rb"|_pytree\.py:\d+\] <enum 'KernelPreference'> is an Enum subclass"
)
JOIN_TIMEOUT_S = 5.0  # a child process still holding the pipe does not keep memplan from exiting


def is_noise(line: bytes) -> bool:
    return NOISE.search(line) is not None


@contextlib.contextmanager
def filtered_stderr() -> Iterator[None]:
    """File descriptor 2 through a pipe whose reader drops `NOISE` lines (nothing to do where descriptor 2
    is closed). Python's own `sys.stderr`, when replaced in-process (pytest's capsys), is left alone."""
    try:
        sys.stderr.flush()
        original = os.dup(2)
    except (OSError, ValueError, AttributeError):
        yield
        return
    read, write = os.pipe()
    os.dup2(write, 2)
    os.close(write)
    pump = threading.Thread(target=_pump, args=(read, os.dup(original)), daemon=True)
    pump.start()
    try:
        yield
    finally:
        with contextlib.suppress(Exception):
            sys.stderr.flush()
        os.dup2(original, 2)  # the pipe's last writer (in this process) closes: the pump sees the end
        os.close(original)
        pump.join(JOIN_TIMEOUT_S)


def _pump(read: int, write: int) -> None:
    with os.fdopen(read, "rb") as source, os.fdopen(write, "wb", buffering=0) as target:
        for line in source:
            if not is_noise(line):
                target.write(line)
