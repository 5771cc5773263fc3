"""What Cadence's compiler needs from Python that Python 3.11 lacks."""

from __future__ import annotations

import typing

import typing_extensions


def cadence_passes_importable() -> None:
    """Cadence's graph passes (fuse_ops, imported by its compiler) import `typing.override`, new in
    Python 3.12; on 3.11 the same decorator comes from typing_extensions. Call before importing them."""
    if not hasattr(typing, "override"):
        typing.override = typing_extensions.override  # type: ignore[attr-defined]
