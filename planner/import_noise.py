"""Two log lines the libraries print on every import, which say nothing about the user's program.

torchao logs "Failed to load .../_C_*.so" for GPU kernels a CPU build cannot load, and torch logs a
deprecation warning when torchao registers its `KernelPreference` enum with pytree. Both come on
every `memplan` command and in every notebook's first cell. Only those two messages are dropped;
every other warning of those loggers still shows.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

_NOISE: dict[str, Callable[[str], bool]] = {
    "torchao": lambda message: message.startswith("Failed to load ") and ".so" in message,
    "torch.utils._pytree": lambda message: "KernelPreference" in message and "Enum subclass" in message,
}


class _DropKnownNoise(logging.Filter):
    def __init__(self, is_noise: Callable[[str], bool]) -> None:
        super().__init__()
        self.is_noise = is_noise

    def filter(self, record: logging.LogRecord) -> bool:
        return not self.is_noise(record.getMessage())


def silence() -> None:
    """Drop the two messages (idempotent); call before torch and torchao are imported."""
    for name, is_noise in _NOISE.items():
        logger = logging.getLogger(name)
        if not any(isinstance(f, _DropKnownNoise) for f in logger.filters):
            logger.addFilter(_DropKnownNoise(is_noise))
