"""Shared look of the plots: colours per buffer kind and per solver, and byte-unit axes."""

from __future__ import annotations

import math

from matplotlib.axis import Axis
from matplotlib.ticker import FuncFormatter, Locator

from memplan.problem import BufferKind

# Okabe-Ito colours: distinguishable with the common colour-vision deficiencies.
KIND_COLOURS: dict[BufferKind, str] = {
    BufferKind.ACTIVATION: "#56B4E9",
    BufferKind.GRAPH_INPUT: "#009E73",
    BufferKind.GRAPH_OUTPUT: "#E69F00",
    BufferKind.MUTABLE_STATE: "#CC79A7",
    BufferKind.SUBMODULE: "#F0E442",
    BufferKind.OTHER: "#999999",
}
KIND_NAMES: dict[BufferKind, str] = {
    BufferKind.ACTIVATION: "activation",
    BufferKind.GRAPH_INPUT: "graph input",
    BufferKind.GRAPH_OUTPUT: "graph output",
    BufferKind.MUTABLE_STATE: "mutable / shared state",
    BufferKind.SUBMODULE: "submodule",
    BufferKind.OTHER: "other",
}
ARENA_COLOUR = "#D55E00"
LOWER_BOUND_COLOUR = "#0072B2"

# One colour per solver in every figure (bars, arena lines, curves); names not listed here get a
# colour of their own from `_SPARE_COLOURS`, the same one in every figure of a process.
SOLVER_COLOURS: dict[str, str] = {
    "stock": "#7F7F7F",
    "greedy": "#E69F00",
    "bestfit": "#009E73",
    "skyline": "#CC79A7",
    "cpsat": "#0072B2",
    "milp": "#D55E00",
}
_SPARE_COLOURS = ("#56B4E9", "#F0E442", "#8C564B", "#17BECF", "#BCBD22", "#9467BD", "#000000")
_spare: dict[str, str] = {}


def solver_colour(name: str) -> str:
    """The fixed colour of solver `name` (a series label 'cpsat, alignment=64' uses its solver's)."""
    solver = name.split(",")[0].split(" (")[0].strip()
    if solver in SOLVER_COLOURS:
        return SOLVER_COLOURS[solver]
    if solver not in _spare:
        _spare[solver] = _SPARE_COLOURS[len(_spare) % len(_SPARE_COLOURS)]
    return _spare[solver]


_UNITS = ((1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB"))


def format_bytes(n: float) -> str:
    """`n` bytes in the largest binary unit that keeps it >= 1 (e.g. '1.5 MiB', '640 B')."""
    for scale, unit in _UNITS:
        if abs(n) >= scale:
            return f"{n / scale:.3g} {unit}"
    return f"{n:.0f} B"


class BinaryLocator(Locator):
    """Ticks every 2**k bytes, with k chosen for about `ticks` ticks: 0, 2 KiB, 4 KiB, ...

    Decimal steps would label a KiB axis 1.95 KiB, 3.91 KiB, ...
    """

    def __init__(self, ticks: int = 8) -> None:
        self.ticks = ticks

    def __call__(self) -> list[float]:
        assert self.axis is not None, "matplotlib sets the axis before asking for ticks"
        low, high = self.axis.get_view_interval()
        return self.tick_values(low, high)

    def tick_values(self, vmin: float, vmax: float) -> list[float]:
        low, high = sorted((vmin, vmax))
        step = 2.0 ** max(0, math.ceil(math.log2(max(high - low, 1) / self.ticks)))
        first = math.ceil(low / step)
        return [k * step for k in range(first, math.floor(high / step) + 1)]


def bytes_axis(axis: Axis) -> None:
    """Ticks on powers-of-two multiples, labelled in B / KiB / MiB / GiB."""
    axis.set_major_locator(BinaryLocator())
    axis.set_major_formatter(FuncFormatter(lambda value, _: format_bytes(value)))
