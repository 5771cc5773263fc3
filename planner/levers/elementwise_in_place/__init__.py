"""An elementwise instruction writes its result over an input that dies there: one buffer, not two.

The op computing `y = relu6(x)` needs `x` and `y` live at once only if something reads `x` later.
When it is `x`'s last reader, `y` can take `x`'s bytes: element i of `y` is computed from element i
of `x` alone, so writing it over `x[i]` destroys nothing still needed (XLA's heap simulator shares an
operand's buffer with an elementwise user the same way). In an int8 program lowered one op per
XNNPACK delegate every ReLU6 and residual add is its own instruction with its own output, so the
arena's peak is often a convolution's output beside its ReLU6's: this lever halves it.

`elementwise` decides from what the instruction computes (the ops' `pointwise` tag, or a delegate's
original graph), `analysis` which instructions may share and why the others may not (named
`Refusal`s), `rewrite` gives the result the input's TensorSpec (the emitter then gives both one
value, the planner one buffer), `report` counts it, `lever` is the lever protocol's face.
"""

from __future__ import annotations

from memplan.planner.levers.elementwise_in_place.analysis import InPlace, analyze
from memplan.planner.levers.elementwise_in_place.report import InPlaceReport

__all__ = ["InPlace", "InPlaceReport", "analyze"]
