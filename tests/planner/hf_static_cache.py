"""A Llama-style decoder whose KV caches are written the way Hugging Face's `StaticCache.update` writes
them: `index_copy_` along the sequence dim at `cache_position` (or, its fallback, slice assignment
`cache[:, :, cache_position] = states`), the whole cache then read by attention. transformers is not
needed: the module is plain torch, with random weights.

`static_cache_decoder(n_layers, ...)` is a one-method `ZooModel` (decode one token per call, the
caches serialized with their initial zeros by `InitializedMutableBufferPass`), `cache_stack(n)` the
smallest such program: `n` caches written at one position and read whole. `fused_qkv=True` projects
queries, keys and values with one linear and splits its output (as many user decoders do): the slice
no-op lever then removes the split's copy, and its outputs are tensors no instruction names.
"""

from __future__ import annotations

import torch
from executorch.exir.passes.init_mutable_pass import InitializedMutableBufferPass
from torch import nn
from torch.nn import functional as F

from memplan.experiments.zoo import ZooModel


def write_cache(cache: torch.Tensor, position: torch.Tensor, states: torch.Tensor, how: str) -> None:
    """`StaticCache.update`'s write of `states` ([b, heads, 1, d]) at `position` along dim 2."""
    if how == "index_copy":
        cache.index_copy_(2, position, states)
    else:
        cache[:, :, position] = states


class Layer(nn.Module):
    def __init__(
        self, dim: int, heads: int, kv_heads: int, context: int, hidden: int, how: str, fused_qkv: bool
    ) -> None:
        super().__init__()
        self.heads, self.kv_heads, self.head_dim, self.how = heads, kv_heads, dim // heads, how
        self.norm1, self.norm2 = nn.RMSNorm(dim), nn.RMSNorm(dim)
        self.widths = [dim, kv_heads * self.head_dim, kv_heads * self.head_dim]
        self.qkv = nn.Linear(dim, sum(self.widths), bias=False) if fused_qkv else None
        self.q, self.k, self.v = (
            (None, None, None) if fused_qkv else (nn.Linear(dim, w, bias=False) for w in self.widths)
        )
        self.o = nn.Linear(dim, dim, bias=False)
        self.gate = nn.Linear(dim, hidden, bias=False)
        self.up = nn.Linear(dim, hidden, bias=False)
        self.down = nn.Linear(hidden, dim, bias=False)
        self.register_buffer("k_cache", torch.zeros(1, kv_heads, context, self.head_dim))
        self.register_buffer("v_cache", torch.zeros(1, kv_heads, context, self.head_dim))

    def forward(self, h: torch.Tensor, position: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        x = self.norm1(h)
        if self.qkv is not None:
            q, k, v = self.qkv(x).split(self.widths, dim=-1)
        else:
            q, k, v = self.q(x), self.k(x), self.v(x)
        q = q.view(1, 1, self.heads, self.head_dim).transpose(1, 2)
        k = k.view(1, 1, self.kv_heads, self.head_dim).transpose(1, 2)
        v = v.view(1, 1, self.kv_heads, self.head_dim).transpose(1, 2)
        write_cache(self.k_cache, position, k, self.how)
        write_cache(self.v_cache, position, v, self.how)
        repeat = self.heads // self.kv_heads
        keys = self.k_cache.repeat_interleave(repeat, dim=1)
        values = self.v_cache.repeat_interleave(repeat, dim=1)
        attn = F.scaled_dot_product_attention(q, keys, values, attn_mask=mask)
        h = h + self.o(attn.transpose(1, 2).reshape(1, 1, -1))
        x = self.norm2(h)
        return h + self.down(F.silu(self.gate(x)) * self.up(x))


class Decoder(nn.Module):
    """Embedding, `n_layers` attention + MLP layers over static caches, the LM head."""

    def __init__(
        self,
        n_layers: int,
        dim: int,
        heads: int,
        kv_heads: int,
        context: int,
        vocab: int,
        how: str,
        fused_qkv: bool = False,
    ) -> None:
        super().__init__()
        self.context = context
        self.embed = nn.Embedding(vocab, dim)
        self.layers = nn.ModuleList(
            Layer(dim, heads, kv_heads, context, 2 * dim, how, fused_qkv) for _ in range(n_layers)
        )
        self.norm = nn.RMSNorm(dim)
        self.head = nn.Linear(dim, vocab, bias=False)

    def forward(self, token: torch.Tensor, position: torch.Tensor) -> torch.Tensor:
        h = self.embed(token)
        mask = (torch.arange(self.context) <= position).view(1, 1, 1, -1)  # one decode step's causal mask
        for layer in self.layers:
            h = layer(h, position, mask)
        return self.head(self.norm(h))


class CacheStack(nn.Module):
    """`n` caches [1, 2, context, 16], each written at `position` and read whole."""

    def __init__(self, n: int, context: int, how: str) -> None:
        super().__init__()
        self.n, self.how = n, how
        for i in range(n):
            self.register_buffer(f"cache{i}", torch.zeros(1, 2, context, 16))

    def forward(self, x: torch.Tensor, position: torch.Tensor) -> torch.Tensor:
        total = torch.zeros(16)
        for i in range(self.n):
            cache = getattr(self, f"cache{i}")
            write_cache(cache, position, x * (i + 1), self.how)
            total = total + cache.sum((0, 1, 2))
        return total


def _decode_calls(n_calls: int, make_token) -> list:
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        return [("forward", (make_token(), torch.tensor([i]))) for i in range(n_calls)]


def _model(name: str, module: nn.Module, calls: list) -> ZooModel:
    return ZooModel(
        name,
        name,
        {"forward": (module.eval(), calls[0][1])},
        calls,
        backend_config={"passes": [InitializedMutableBufferPass(["cache"])]},
        convert_to_linear=False,
        atol=1e-4,
        rtol=1e-4,
    )


def static_cache_decoder(
    n_layers: int = 2,
    dim: int = 64,
    heads: int = 4,
    kv_heads: int = 2,
    context: int = 16,
    vocab: int = 64,
    how: str = "index_copy",
    n_calls: int = 3,
    fused_qkv: bool = False,
) -> ZooModel:
    """Decode `n_calls` tokens (positions 0, 1, ...) with a fresh random-weight decoder."""
    torch.manual_seed(0)
    module = Decoder(n_layers, dim, heads, kv_heads, context, vocab, how, fused_qkv)
    calls = _decode_calls(n_calls, lambda: torch.randint(0, vocab, (1, 1)))
    fused = "_fused_qkv" if fused_qkv else ""
    return _model(f"hf_static_cache_{n_layers}l_{how}{fused}", module, calls)


def cache_stack(n: int = 8, context: int = 64, how: str = "index_copy", n_calls: int = 3) -> ZooModel:
    calls = _decode_calls(n_calls, lambda: torch.randn(1, 2, 1, 16))
    return _model(f"cache_stack_{n}_{how}", CacheStack(n, context, how), calls)
