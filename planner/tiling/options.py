"""The tiling lever's options, in one frozen object (`PlannerPass(tiling=...)`, `plan_model`, `--tiling`)."""

from __future__ import annotations

from dataclasses import dataclass

from executorch.exir.tensor import ALIGNMENT

from memplan.errors import UsageError
from memplan.planner.tiling.partitioned import Partitioned


@dataclass(frozen=True)
class TilingOptions:
    """How far tiling may go.

    `max_extra_macs`: the most extra multiply-accumulates tiling may add, as a fraction of the untiled
    graph's (halo rows are computed by two bands). `budget_bytes`: when given, the fewest patches whose
    peak fits it (within the MAC limit) instead of the smallest peak. `max_patches`: the most row
    bands (or channel groups) tried. `max_regions`: the most regions tiled one after the other, each where the graph's
    peak sits once the last is tiled (a high-resolution stage wants many bands, a deep one few). `cache_rows`: rows two bands share are computed once and kept for the next band
    (a slice carried over, a cat joining it to the new rows) instead of computed by both. What the cost counts follows the lowering: `input_in_arena` False when the caller
    passes the input (`alloc_graph_input=False`); `int8_kernels` True when a quantized graph's
    dequantize -> op -> quantize triples become one int8 kernel each (XNNPACK), so the floats
    between its int8 tensors never reach the arena (False for portable kernels, which hold them);
    `elementwise_in_place` True when the pass writes an elementwise kernel's output over an input it
    reads last (`PlannerPass(elementwise_in_place=...)`, on with tiling); `partitioned`, when the
    partitioners are known (`PlannerPass.tile(..., partitioner=...)`, `memplan run`), what they do to
    the untiled program, read off it (`planner.tiling.partitioned`), which `int8_kernels` then
    stands in for no longer. `alignment`: each tensor's bytes in the arena are rounded up to it (the
    pass's, ExecuTorch's 16 by default), which counts where a region makes many small tensors. `recompute_shared_chains`: where a
    float chain is read by a reduction over H and W and by another op (a squeeze-and-excitation's
    mean and its gating), also try the graph with the chain computed again for the reduction
    (`shared_chains`), so each reader's region is one the search can cut; the smaller peak is kept.
    """

    max_extra_macs: float = 0.15
    budget_bytes: int | None = None
    max_patches: int = 64
    max_regions: int = 32
    cache_rows: bool = True
    input_in_arena: bool = True
    int8_kernels: bool = True
    elementwise_in_place: bool = True
    partitioned: Partitioned | None = None
    alignment: int = ALIGNMENT
    recompute_shared_chains: bool = True

    def __post_init__(self) -> None:
        if not self.max_extra_macs >= 0:
            raise UsageError(f"max_extra_macs must be a fraction >= 0, got {self.max_extra_macs!r}")
        if self.budget_bytes is not None and self.budget_bytes <= 0:
            raise UsageError(f"budget_bytes must be positive, got {self.budget_bytes!r}")
        if self.max_regions < 1:
            raise UsageError(f"max_regions must be at least 1, got {self.max_regions!r}")
        if self.alignment < 1:
            raise UsageError(f"alignment must be at least 1, got {self.alignment!r}")
        if self.max_patches < 2:
            raise UsageError(f"max_patches must be at least 2, got {self.max_patches!r}")


def tiling_options(tiling: bool | TilingOptions | None) -> TilingOptions | None:
    """`tiling=True` means the default options; False/None: off."""
    if tiling is True:
        return TilingOptions()
    if tiling is False or tiling is None:
        return None
    if isinstance(tiling, TilingOptions):
        return tiling
    raise UsageError(f"tiling must be True, False or a TilingOptions, got {type(tiling).__name__}")
