"""Programs whose shapes or control flow are unusual: a sequence length that varies up to a maximum,
chunk/split/narrow glued back with cat, `torch.cond`, and zero-size tensors."""

from __future__ import annotations

import torch
from torch import nn
from torch.export import Dim

from memplan.experiments.zoo.models.common import ZooModel, seeded, single_method

# ---------------------------------------------------------------- (7) dynamic sequence length


class SequenceEncoder(nn.Module):
    """One pre-norm attention + MLP block over a sequence of any length up to the export's maximum."""

    def __init__(self, dim: int = 32, heads: int = 4) -> None:
        super().__init__()
        self.heads, self.head_dim = heads, dim // heads
        self.norm1, self.norm2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.qkv, self.o = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 2 * dim), nn.GELU(), nn.Linear(2 * dim, dim))

    def forward(self, x):
        b, n, d = x.shape
        q, k, v = self.qkv(self.norm1(x)).view(b, n, 3, self.heads, self.head_dim).permute(2, 0, 3, 1, 4)
        a = torch.softmax(q @ k.transpose(-1, -2) * self.head_dim**-0.5, -1) @ v
        x = x + self.o(a.transpose(1, 2).reshape(b, n, d))
        return x + self.mlp(self.norm2(x))


def dynamic_sequence() -> ZooModel:
    with seeded():
        lengths = (16, 40, 64, 3)
        calls = [("forward", (torch.randn(1, n, 32),)) for n in lengths]
        return ZooModel(
            "dynamic_sequence",
            "attention block, sequence length Dim(max=64)",
            {"forward": (SequenceEncoder().eval(), calls[0][1])},
            calls,
            dynamic_shapes={"forward": ({1: Dim("seq", min=2, max=64)},)},
        )


# ---------------------------------------------------------------- (8) chunk / split / narrow + cat


class SplitMerge(nn.Module):
    """Channels cut with `chunk`, `split` and `narrow`, worked on, and glued back with `cat`."""

    def __init__(self, width: int = 16) -> None:
        super().__init__()
        self.proj = nn.Linear(width, width)
        self.mix = nn.Linear(width, width)

    def forward(self, x):  # [1, 24, 16]
        a, b, c = x.chunk(3, dim=1)
        p, q = torch.split(self.proj(x), [10, 14], dim=1)
        y = torch.cat([torch.relu(a), b * 2, torch.sigmoid(c)], 1)
        z = torch.cat([q, p], 1) + y
        head, tail = z.narrow(1, 0, 12), z.narrow(1, 12, 12)
        return torch.cat([self.mix(tail), head.tanh()], 1), x.narrow(2, 4, 8).sum(2)


def split_merge() -> ZooModel:
    with seeded():
        return single_method(
            "chunk_split_narrow_cat",
            "chunk, split, narrow and cat",
            SplitMerge(),
            lambda: (torch.randn(1, 24, 16),),
        )


# ---------------------------------------------------------------- (9) torch.cond


class Gated(nn.Module):
    """A wide or a narrow path, chosen per call by `torch.cond` on the input's sign."""

    def __init__(self, dim: int = 32) -> None:
        super().__init__()
        self.pre = nn.Linear(dim, dim)
        self.wide = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))
        self.narrow = nn.Linear(dim, dim)

    def forward(self, x):
        h = torch.relu(self.pre(x))
        chosen = torch.cond(x.sum() > 0, lambda h: self.wide(h), lambda h: self.narrow(h).sin(), (h,))
        return chosen + h


def cond_gate() -> ZooModel:
    with seeded():
        x = torch.randn(4, 32).abs()
        model = single_method("torch_cond", "torch.cond between two paths", Gated(), lambda: (x,))
    model.calls = [("forward", (x,)), ("forward", (-x,)), ("forward", (x * 0.5,))]  # both branches
    return model


# ---------------------------------------------------------------- (11) zero-size tensors


class ZeroSized(nn.Module):
    """Empty slices, a zero-row batch and their reductions next to ordinary tensors."""

    def __init__(self, dim: int = 16) -> None:
        super().__init__()
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):  # [8, 16]
        empty = x[:, 5:5]  # [8, 0]
        none = self.proj(x[8:])  # [0, 16]
        glued = torch.cat([x, empty * 2, x[:, :0]], 1)
        rows = torch.cat([none.relu(), self.proj(glued)], 0)
        return rows, empty.sum(1) + 1, none.sum(0)


def zero_size() -> ZooModel:
    with seeded():
        return single_method(
            "zero_size", "zero-size tensors among ordinary ones", ZeroSized(), lambda: (torch.randn(8, 16),)
        )


# The order; names are the `--models` of experiments/bench/outside_models.py.
