"""Stateful multi-method programs: methods of one shared module reading and writing the same buffers."""

from __future__ import annotations

import math

import torch
from torch import nn

from memplan.errors import UsageError
from memplan.experiments.zoo.models.common import ZooModel, seeded, zoo_recipe


class CacheStore(nn.Module):
    """Shared state: k_cache/v_cache buffers [1, H, S, D] plus a projection
    used by the read method."""

    def __init__(self, n_heads: int = 2, max_len: int = 16, head_dim: int = 8) -> None:
        super().__init__()
        self.n_heads, self.max_len, self.head_dim = n_heads, max_len, head_dim
        self.register_buffer("k_cache", torch.zeros(1, n_heads, max_len, head_dim))
        self.register_buffer("v_cache", torch.zeros(1, n_heads, max_len, head_dim))
        self.out_proj = nn.Linear(n_heads * head_dim, n_heads * head_dim)


class SetCache(nn.Module):
    """set_cache(k, v, input_pos): k_cache[:, :, input_pos] = k (index_put_)."""

    def __init__(self, store: CacheStore) -> None:
        super().__init__()
        self.store = store

    def forward(self, k, v, input_pos):
        self.store.k_cache[:, :, input_pos] = k
        self.store.v_cache[:, :, input_pos] = v
        # A small output so the method has a user output to compare.
        return k.sum() + v.sum()


class GetCache(nn.Module):
    """get_cache() -> copies of both buffers."""

    def __init__(self, store: CacheStore) -> None:
        super().__init__()
        self.store = store

    def forward(self):
        return self.store.k_cache.clone(), self.store.v_cache.clone()


class Attend(nn.Module):
    """attend(q): softmax(q k^T / sqrt(d)) v over the whole cache, projected."""

    def __init__(self, store: CacheStore) -> None:
        super().__init__()
        self.store = store

    def forward(self, q):
        s = self.store
        scores = q @ s.k_cache.transpose(-1, -2) / math.sqrt(s.head_dim)
        a = torch.softmax(scores, dim=-1) @ s.v_cache  # [1, H, Tq, D]
        a = a.transpose(1, 2).reshape(1, q.shape[2], s.n_heads * s.head_dim)
        return s.out_proj(a)


def multi_method_cache(rounds: int = 2) -> ZooModel:
    """Calls in `rounds` rounds: set_cache writes the next 4 positions, then get_cache and attend read
    (in turn first), so each read follows a write and the other read; 4 rounds fill the cache."""
    with seeded():
        store = CacheStore()
        H, D = store.n_heads, store.head_dim
        T = 4
        if not 1 <= rounds <= store.max_len // T:
            raise UsageError(f"rounds must be 1 to {store.max_len // T} (the cache holds {store.max_len})")

        def kv():
            return (torch.randn(1, H, T, D), torch.randn(1, H, T, D))

        set_ex = kv() + (torch.arange(T),)
        methods = {
            "set_cache": (SetCache(store).eval(), set_ex),
            "get_cache": (GetCache(store).eval(), ()),
            "attend": (Attend(store).eval(), (torch.randn(1, H, 2, D),)),
        }
        calls: list[tuple[str, tuple]] = []
        for r in range(rounds):
            write = set_ex if r == 0 else kv() + (torch.arange(r * T, (r + 1) * T),)
            reads = [("get_cache", ()), ("attend", (torch.randn(1, H, 2, D),))]
            calls += [("set_cache", write), *(reads if r % 2 == 0 else reads[::-1])]
    return ZooModel(
        "multi_method_cache",
        "Stateful 3-method program (set_cache / get_cache / attend) sharing k_cache/v_cache buffers by FQN",
        methods,
        calls,
        memory_planning_config={"share_mutable_buffers": True},
        **zoo_recipe(const_prop=False),  # no const prop: it would fold the read-only buffer reads
        shared_state=True,
        tags=("stateful", "multi_method"),
    )


class CrossAttnState(nn.Module):
    def __init__(self, dim: int = 32, n_heads: int = 2, enc_len: int = 12) -> None:
        super().__init__()
        self.dim, self.n_heads, self.enc_len = dim, n_heads, enc_len
        self.head_dim = dim // n_heads
        self.enc = nn.Sequential(nn.Linear(dim, 2 * dim), nn.GELU(), nn.Linear(2 * dim, dim))
        self.wk = nn.Linear(dim, dim, bias=False)
        self.wv = nn.Linear(dim, dim, bias=False)
        self.wq = nn.Linear(dim, dim, bias=False)
        self.wo = nn.Linear(dim, dim, bias=False)
        self.ffn = nn.Sequential(nn.Linear(dim, 2 * dim), nn.SiLU(), nn.Linear(2 * dim, dim))
        shape = (1, n_heads, enc_len, self.head_dim)
        self.register_buffer("cross_k", torch.zeros(shape))
        self.register_buffer("cross_v", torch.zeros(shape))


class Encoder(nn.Module):
    """encoder(x [1, S_enc, dim]): fills the cross-attention cache."""

    def __init__(self, st: CrossAttnState) -> None:
        super().__init__()
        self.st = st

    def forward(self, x):
        st = self.st
        h = x + st.enc(x)
        k = st.wk(h).view(1, st.enc_len, st.n_heads, st.head_dim).transpose(1, 2)
        v = st.wv(h).view(1, st.enc_len, st.n_heads, st.head_dim).transpose(1, 2)
        st.cross_k.copy_(k)
        st.cross_v.copy_(v)
        return h.mean(dim=1)


class Decoder(nn.Module):
    """decoder(y [1, T, dim]): cross-attends over the cache filled by encoder."""

    def __init__(self, st: CrossAttnState) -> None:
        super().__init__()
        self.st = st

    def forward(self, y):
        st = self.st
        T = y.shape[1]
        q = st.wq(y).view(1, T, st.n_heads, st.head_dim).transpose(1, 2)
        a = torch.nn.functional.scaled_dot_product_attention(q, st.cross_k, st.cross_v)
        h = y + st.wo(a.transpose(1, 2).reshape(1, T, st.dim))
        return h + st.ffn(h)


def encoder_decoder_cache() -> ZooModel:
    with seeded():
        st = CrossAttnState()
        x = lambda: (torch.randn(1, st.enc_len, st.dim),)  # noqa: E731
        y = lambda: (torch.randn(1, 3, st.dim),)  # noqa: E731
        ex_x, ex_y = x(), y()
        methods = {"encoder": (Encoder(st).eval(), ex_x), "decoder": (Decoder(st).eval(), ex_y)}
        calls = [
            ("encoder", ex_x),
            ("decoder", ex_y),
            ("decoder", y()),
            ("encoder", x()),
            ("decoder", y()),
        ]
    return ZooModel(
        "encoder_decoder_cache",
        "Encoder fills cross-attention k/v cache buffers, decoder reads them (2 methods sharing state)",
        methods,
        calls,
        memory_planning_config={"share_mutable_buffers": True},
        **zoo_recipe(const_prop=False),  # no const prop: it would fold the read-only buffer reads
        shared_state=True,
        tags=("stateful", "multi_method"),
    )
