"""`PlannerPass.results[m].stock_sizes` is the arena of the program ExecuTorch's own `MemoryPlanningPass`
builds from the same edge program: the write-backs as ExecuTorch emits them even when `state_in_place`
removed them from memplan's program, and the shared-state arena of a two-method program.

Each figure is compared with a real stock build (`to_executorch` with `MemoryPlanningPass`) of a copy of
the same edge program. The models live only here.
"""

from __future__ import annotations

import copy
import warnings

import torch
from executorch.exir import ExecutorchBackendConfig, to_edge
from executorch.exir.passes import MemoryPlanningPass
from torch import nn

from memplan import PlannerPass


class Cache(nn.Module):
    """A KV-cache-like update at `pos` (index_put + write-back copy_), then a read of the whole cache."""

    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(16, 16)
        self.register_buffer("cache", torch.zeros(24, 16))

    def forward(self, x, pos):
        self.cache[pos] = self.proj(x)
        return torch.softmax(self.cache @ x.T, dim=0).sum(0) + torch.relu(self.proj(x)).sum()


class Store(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("state", torch.zeros(8, 32))
        self.register_buffer("count", torch.zeros(8, 4))


class Write(nn.Module):
    def __init__(self, store: Store) -> None:
        super().__init__()
        self.store = store

    def forward(self, x):
        self.store.state.copy_(torch.tanh(x) * 2)
        self.store.count.add_(1)
        return x.sum(dim=0)


class Read(nn.Module):
    def __init__(self, store: Store) -> None:
        super().__init__()
        self.store = store

    def forward(self, y):
        return torch.relu(self.store.state @ y).sum(1, keepdim=True) + self.store.count


def _arenas(edge, planning_pass) -> dict[str, list[int]]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        program = copy.deepcopy(edge).to_executorch(
            ExecutorchBackendConfig(memory_planning_pass=planning_pass)
        )
    return {p.name: list(p.non_const_buffer_sizes) for p in program.executorch_program.execution_plan}


def _edge(methods: dict[str, tuple[nn.Module, tuple]]):
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")
        return to_edge({name: torch.export.export(m, args) for name, (m, args) in methods.items()})


def test_stock_keeps_the_write_backs_state_in_place_removed():
    torch.manual_seed(0)
    edge = _edge({"forward": (Cache().eval(), (torch.randn(1, 16), torch.tensor([3])))})
    stock = _arenas(edge, MemoryPlanningPass())["forward"]
    pass_ = PlannerPass(solver="greedy", cat_fusion=False)  # state in place on: the default
    planned = _arenas(edge, pass_)["forward"]
    result = pass_.results["forward"]
    assert result.state_report is not None and result.state_report.removed, "the case this test guards"
    assert sum(planned) < sum(stock)  # the removed write-back is what greedy saves here
    assert result.stock_sizes == stock


def test_stock_of_a_two_method_program_includes_the_shared_state_arena():
    torch.manual_seed(0)
    store = Store()
    edge = _edge(
        {"write": (Write(store), (torch.randn(8, 32),)), "read": (Read(store), (torch.randn(32, 4),))}
    )
    stock = _arenas(edge, MemoryPlanningPass(share_mutable_buffers=True))
    assert all(len(sizes) == 3 and sizes[2] > 0 for sizes in stock.values()), stock  # the case guarded
    pass_ = PlannerPass(solver="bestfit")
    _arenas(edge, pass_)
    assert {m: r.stock_sizes for m, r in pass_.results.items()} == stock
