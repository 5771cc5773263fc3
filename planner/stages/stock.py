"""What ExecuTorch's own pass would have emitted: `MethodResult.stock_sizes`, for comparison.

Without a memory map, memplan's byte-exact replica of ExecuTorch's greedy
(solvers.heuristics.greedy), computed on first use; under one, ExecuTorch's BankedGreedy
itself, run now (it needs the specs unplanned). A graph lever (state in
place) changes the graph ExecuTorch would plan, so its figure is taken before
the rewrite (`before_rewrite`).
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import torch
from torch.export.exported_program import ExportGraphSignature

from memplan import solvers
from memplan.planner.graph.extract import Extraction, forget_lifetimes
from memplan.planner.memory.bank_maps import stock_sizes as banked_stock_sizes
from memplan.planner.memory.bank_maps import with_memory_map
from memplan.planner.stages.constrain import Flags, extracted, in_form
from memplan.planner.stages.shared_state import SharedLayout
from memplan.planner.stages.solver import Algorithm

Stock = Callable[[], list[int]]


def stock_of(
    ex: Extraction,
    graph_module: torch.fx.GraphModule,
    signature: ExportGraphSignature | None,
    algorithm: Algorithm,
    alignment: int,
) -> Stock:
    """What computes the stock figure of `ex`: lazily, except ExecuTorch's BankedGreedy."""
    if algorithm.memory_map is None:
        return functools.partial(_greedy_sizes, ex)
    banked = banked_stock_sizes(algorithm.memory_map, alignment, ex, graph_module, signature)
    return functools.partial(list, [0, *banked[1:]] if banked else [])


def before_rewrite(
    graph_module: torch.fx.GraphModule,
    signature: ExportGraphSignature | None,
    algorithm: Algorithm,
    alignment: int,
    flags: Flags,
) -> Stock:
    """The stock figure of the graph as it is now (before a graph lever rewrites it); `flags` are
    (alloc_graph_input, alloc_graph_output, alloc_mutable_buffers). The graph's lifetimes are
    forgotten after, as ExecuTorch's lifetime analysis only ever widens them."""
    before = extracted(graph_module, signature, alignment, flags)
    if algorithm.memory_map is not None:
        before = with_memory_map(before, graph_module, algorithm.memory_map, alignment)
    stock = stock_of(in_form(before, algorithm), graph_module, signature, algorithm, alignment)
    forget_lifetimes(graph_module)
    return stock


def with_shared_state_arena(stock: Stock, layout: Callable[[], SharedLayout | None]) -> list[int]:
    """`stock()`, plus the arena of state shared across methods (as `share_mutable_buffers` lays it
    out; `layout` is read when the figure is asked for, after every method is planned)."""
    sizes = list(stock())
    shared = layout()
    if shared is not None and sizes:
        sizes += [0] * (shared.pool - len(sizes)) + [shared.arena]
    return sizes


def _greedy_sizes(ex: Extraction) -> list[int]:
    """`non_const_buffer_sizes` ExecuTorch's greedy gives the extracted tensors (its replica, solvers.heuristics.greedy;
    `fallback` lays it out above the submodules' reservation, as ExecuTorch does)."""
    return ex.pool_sizes(dict(solvers.solve(ex.problem, "greedy", fallback=True).arena_sizes))
