"""What reordering did to one method: `pass_.results[method].reorder_report`."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ReorderReport:
    """The instructions moved, and the method's live-bytes lower bound before and after.

    `kept` is False when the new order was undone (its bound grew, or nothing could move); `why`
    then says which.
    """

    moved: tuple[str, ...]
    bound_before: int
    bound_after: int
    kept: bool
    why: str = ""

    @property
    def instructions_moved(self) -> int:
        """Instructions the method now runs at another place (0 when the order was undone)."""
        return len(self.moved) if self.kept else 0

    def summary(self) -> str:
        if self.kept:
            return (
                f"reorder: {len(self.moved)} instructions moved;"
                f" lower bound {self.bound_before:,} -> {self.bound_after:,} B"
            )
        return f"reorder: order kept ({self.why})"
