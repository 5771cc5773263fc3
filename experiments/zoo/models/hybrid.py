"""Decode programs whose state ExecuTorch writes back every call: Llama and two hybrids.

All three are ExecuTorch's own model code (`executorch.examples.models.llama`
`construct_transformer`), random weights, fp32, one token per call at
positions 0, 1, 2, ... so each call reads what the earlier ones wrote:

* `llama_kv`: every layer a KV cache (`k_cache`/`v_cache`, updated by `index_put`).
* `qwen35_hybrid`: Qwen3.5-style, `layer_types` of Gated DeltaNet
  `linear_attention` layers (`conv_state`, `recurrent_state`, reset and updated
  through `slice_scatter`) and one `full_attention` layer with a KV cache.
* `lfm2_hybrid`: LFM2-style, short-convolution `conv` layers
  (`examples/models/lfm2`, one `conv_state` each, updated from a `cat`) and one
  `full_attention` layer.
"""

from __future__ import annotations

import dataclasses

import torch

from memplan.experiments.zoo.models.common import ZooModel, seeded, zoo_recipe
from memplan.experiments.zoo.models.llama import build_transformer, llama_args

VOCAB = 128


def decode_model(
    name: str,
    description: str,
    *,
    layer_types: list[str] | None,
    n_layers: int,
    dim: int,
    n_heads: int,
    n_kv_heads: int | None = None,
    seq_len: int = 32,
    hidden_dim: int | None = None,
    n_calls: int = 5,
    vocab_size: int = VOCAB,
) -> ZooModel:
    """One-token decode calls at positions 0..n_calls-1 of a `construct_transformer` model."""
    if n_calls > seq_len:
        raise ValueError(f"{name}: {n_calls} decode calls do not fit a context of {seq_len}")
    with seeded():
        args = llama_args(n_layers, dim, n_heads, seq_len, True, vocab_size, n_kv_heads)
        args = dataclasses.replace(args, layer_types=layer_types, hidden_dim=hidden_dim)
        model = build_transformer(args)
        calls = [
            ("forward", (torch.randint(0, vocab_size, (1, 1)), {"input_pos": torch.tensor([pos])}))
            for pos in range(n_calls)
        ]
    return ZooModel(
        name,
        description,
        {"forward": (model, calls[0][1])},
        calls,
        atol=1e-3,
        rtol=1e-3,
        tags=("llm", "stateful"),
        **zoo_recipe(),
    )


def llama_kv(
    n_layers: int = 4, dim: int = 128, n_heads: int = 4, n_kv_heads: int = 2, seq_len: int = 32, **kw
) -> ZooModel:
    return decode_model(
        kw.pop("name", "llama_kv"),
        f"Llama decode ({n_layers} layers, dim {dim}, {n_kv_heads} KV heads, ctx {seq_len}), KV cache",
        layer_types=None,
        n_layers=n_layers,
        dim=dim,
        n_heads=n_heads,
        n_kv_heads=n_kv_heads,
        seq_len=seq_len,
        **kw,
    )


def qwen35_hybrid(
    linear_layers: int = 3, dim: int = 128, n_heads: int = 4, seq_len: int = 32, **kw
) -> ZooModel:
    types = ["linear_attention"] * linear_layers + ["full_attention"]
    return decode_model(
        kw.pop("name", "qwen35_hybrid"),
        f"Qwen3.5-style hybrid decode: {linear_layers} Gated DeltaNet layers + 1 full attention"
        f" (dim {dim}, ctx {seq_len})",
        layer_types=types,
        n_layers=len(types),
        dim=dim,
        n_heads=n_heads,
        seq_len=seq_len,
        **kw,
    )


def lfm2_hybrid(conv_layers: int = 3, dim: int = 128, n_heads: int = 4, seq_len: int = 32, **kw) -> ZooModel:
    types = ["conv"] * conv_layers + ["full_attention"]
    return decode_model(
        kw.pop("name", "lfm2_hybrid"),
        f"LFM2-style hybrid decode: {conv_layers} short-conv layers + 1 full attention (dim {dim}, ctx {seq_len})",
        layer_types=types,
        n_layers=len(types),
        dim=dim,
        n_heads=n_heads,
        seq_len=seq_len,
        **kw,
    )


def llama_3_2_1b_shapes(n_layers: int = 2, n_calls: int = 5) -> ZooModel:
    """Llama-3.2-1B's attention and cache shapes (dim 2048, 32 heads, 8 KV heads, head dim 64,
    FFN 8192, context 2048, fp32) with fewer layers and a small vocabulary (the state does not
    depend on it): each layer holds 2 x 4 MiB of KV cache."""
    return llama_kv(
        n_layers=n_layers,
        dim=2048,
        n_heads=32,
        n_kv_heads=8,
        seq_len=2048,
        hidden_dim=8192,
        n_calls=n_calls,
        name=f"llama_3_2_1b_shapes_L{n_layers}",
    )
