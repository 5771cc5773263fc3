"""Files `PlannerPass()` writes, read back by `inspect` and re-planned by `replan` (issue 31, item 5).

Every `.pte` memplan writes must be readable: each method's problem derived (no refusal) and the file's
own layout a valid plan of it; its re-planned copy (bestfit, written even when no smaller, so the
rewriting itself is exercised) must give the original's outputs in executorch.runtime over several
rounds of calls. The kinds that were refused before: state written in place across methods (an encoder
filling the caches a decoder reads), fused cats, and XNNPACK delegates whose outputs take the bytes of
a dead tensor. The tiny programs below run by default; every zoo model, built the same way, under
`-m slow` (cat_seed, the fused-cat seed, by default).
"""

from __future__ import annotations

import pytest
import torch
from helpers.executorch_programs import ReadState, StateStore, WriteState
from torch import nn

from memplan import PlannerPass
from memplan.experiments import zoo
from memplan.experiments.zoo import ZooModel, programs, runtime
from memplan.experiments.zoo.models.common import zoo_recipe
from memplan.experiments.zoo.pte_check import ROUNDS, check_same_outputs
from memplan.planner.pte.program import read_program
from memplan.planner.pte.replan import replan
from memplan.validate import validate

FAST_ZOO = ("cat_seed",)


class Block(nn.Module):
    """A pre-norm attention block as Hugging Face's ViT writes it: q/k/v linears, matmuls, GELU MLP."""

    def __init__(self, dim: int = 32, heads: int = 4) -> None:
        super().__init__()
        self.heads, self.head_dim = heads, dim // heads
        self.ln1, self.ln2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.q, self.k, self.v, self.o = (nn.Linear(dim, dim) for _ in range(4))
        self.fc1, self.fc2 = nn.Linear(dim, 4 * dim), nn.Linear(4 * dim, dim)

    def _heads(self, t: torch.Tensor) -> torch.Tensor:
        b, n, _ = t.shape
        return t.view(b, n, self.heads, self.head_dim).permute(0, 2, 1, 3)

    def forward(self, x):
        b, n, d = x.shape
        h = self.ln1(x)
        q, k, v = self._heads(self.q(h)), self._heads(self.k(h)), self._heads(self.v(h))
        a = torch.softmax(q @ k.transpose(-1, -2) / self.head_dim**0.5, -1)
        x = x + self.o((a @ v).permute(0, 2, 1, 3).contiguous().view(b, n, d))
        return x + self.fc2(nn.functional.gelu(self.fc1(self.ln2(x))))


class TinyViT(nn.Module):
    """Patch-embedding conv, a class token, three attention blocks, a final norm and a pooled head.

    At this size XNNPACK's delegate outputs take bytes PlannerPass gave a tensor that is dead by then,
    which the reader used to take for an alias (and refused the file).
    """

    def __init__(self, dim: int = 32, patches: int = 16) -> None:
        super().__init__()
        self.embed = nn.Conv2d(3, dim, 8, 8)
        self.cls = nn.Parameter(torch.randn(1, 1, dim))
        self.pos = nn.Parameter(torch.randn(1, patches + 1, dim))
        self.blocks = nn.Sequential(Block(dim), Block(dim), Block(dim))
        self.norm = nn.LayerNorm(dim)
        self.pool = nn.Linear(dim, dim)

    def forward(self, x):
        p = self.embed(x).flatten(2).transpose(1, 2)
        h = self.norm(self.blocks(torch.cat([self.cls.expand(x.shape[0], -1, -1), p], 1) + self.pos))
        return h, torch.tanh(self.pool(h[:, 0]))


def _two_methods() -> ZooModel:
    """`write` computes the shared state's new value, which state in place writes where `read` finds it."""
    store = StateStore()
    methods = {
        "write": (WriteState(store), (torch.randn(4, 8),)),
        "read": (ReadState(store), (torch.randn(8, 3),)),
    }
    return programs.from_module(methods, name="two_methods", **zoo_recipe(const_prop=False))


def _tiny(name: str) -> ZooModel:
    torch.manual_seed(0)
    if name == "two_methods_state_in_place":
        return _two_methods()
    x = torch.randn(1, 3, 32, 32)
    return programs.from_module(TinyViT(), (x,), name=name, partitioner="xnnpack", atol=1e-3, rtol=1e-3)


def assert_round_trip(model: ZooModel) -> None:
    data = runtime.lower(model, memory_planning_pass=PlannerPass(**model.memory_planning_config)).buffer
    methods = read_program(data).methods
    for method in methods.values():
        assert method.cannot == [], (method.name, method.cannot)
        assert method.problem is not None and method.layout is not None
        assert validate(method.problem, method.layout) == []
    result = replan(data, "bestfit", require_saving=False)
    kept = [m.kept_because for m in result.methods if m.plan is None]
    assert all("found nothing smaller" in why for why in kept), kept  # kept only where bestfit's is larger
    assert check_same_outputs(data, result.data, isolated=False) == ROUNDS * len(methods)


@pytest.mark.parametrize("name", ["two_methods_state_in_place", "vit_xnnpack"])
def test_a_tiny_file_planner_pass_wrote_is_read_replanned_and_runs_identically(name):
    assert_round_trip(_tiny(name))


def test_the_state_written_in_place_by_the_other_method_is_state_in_both():
    model = _two_methods()
    data = runtime.lower(model, memory_planning_pass=PlannerPass(**model.memory_planning_config)).buffer
    methods = read_program(data).methods
    state = {
        m: {(t.mem_id, t.offset, t.nbytes) for t in methods[m].tensors if t.role == "state"} for m in methods
    }
    assert state["write"] and state["write"] == state["read"]  # one buffer, at one place, state in both
    assert any("written by" in t.writer for t in methods["write"].tensors if t.role == "state")


@pytest.mark.parametrize(
    "name", [n if n in FAST_ZOO else pytest.param(n, marks=pytest.mark.slow) for n in zoo.names()]
)
def test_every_zoo_file_planner_pass_wrote_is_read_replanned_and_runs_identically(name):
    assert_round_trip(zoo.get(name))
