"""Llama (executorch.examples.models.llama) with random weights, shaped the way `export_llama` exports it."""

from __future__ import annotations

import torch
from torch import nn

from memplan.experiments.zoo.models.common import ZooModel, seeded, zoo_recipe


def llama_args(
    n_layers: int = 2,
    dim: int = 64,
    n_heads: int = 4,
    seq_len: int = 32,
    kv_cache: bool = True,
    vocab_size: int = 128,
    n_kv_heads: int | None = None,
):
    """ModelArgs the way export_llama sets them for a static-shape export
    (Llama2Model: max_batch_size=1, use_kv_cache, enable_dynamic_shape=False,
    use_sdpa_with_kv_cache_op=False i.e. the portable KVCache + SDPA modules)."""
    from executorch.examples.models.llama.model_args import ModelArgs

    return ModelArgs(
        dim=dim,
        n_layers=n_layers,
        n_heads=n_heads,
        n_kv_heads=n_kv_heads,
        vocab_size=vocab_size,
        multiple_of=32,
        max_batch_size=1,
        max_seq_len=seq_len,
        max_context_len=seq_len,
        use_kv_cache=kv_cache,
        use_sdpa_with_kv_cache_op=False,
        enable_dynamic_shape=False,
        generate_full_logits=False,
    )


def build_transformer(args) -> nn.Module:
    from executorch.examples.models.llama.llama_transformer import construct_transformer

    model = construct_transformer(args).eval()
    # RMSNorm weights initialise to ones; perturb them so norms are exercised.
    with torch.no_grad():
        for n, p in model.named_parameters():
            if n.endswith("norm.weight"):
                p.uniform_(0.8, 1.2)
    return model


def llama(
    n_layers: int = 2,
    dim: int = 64,
    n_heads: int = 4,
    seq_len: int = 32,
    prefill_tokens: int = 8,
    kv_cache: bool = True,
    *,
    vocab_size: int = 128,
    n_calls: int | None = None,
    partitioner: str | None = None,
    name: str | None = None,
) -> ZooModel:
    """ExecuTorch's Llama ``Transformer`` with random weights.

    kv_cache=True mirrors ``export_llama --use_kv_cache --disable_dynamic_shape``:
    inputs are ``(tokens[1, prefill_tokens], {"input_pos": arange(pos, pos+T)})``
    and every layer holds mutable ``k_cache``/``v_cache`` buffers of shape
    ``[1, n_heads, seq_len, head_dim]`` updated with index_put_. The call
    sequence runs consecutive chunks (pos 0, T, 2T, ...) so later calls read
    what earlier calls wrote into the caches. prefill_tokens=1 is decode.

    kv_cache=False runs the full ``prefill_tokens``-long sequence with no state
    (export_llama without --use_kv_cache); seq_len is then the max context.
    """
    if prefill_tokens > seq_len:
        raise ValueError("prefill_tokens must be <= seq_len")
    with seeded():
        args = llama_args(n_layers, dim, n_heads, seq_len, kv_cache, vocab_size)
        model = build_transformer(args)
        T = prefill_tokens
        if kv_cache:
            max_chunks = seq_len // T
            n = n_calls if n_calls is not None else min(3 if T == 1 else 2, max_chunks)
            if n > max_chunks:
                raise ValueError("n_calls * prefill_tokens exceeds seq_len")

            def inp(pos: int) -> tuple:
                tokens = torch.randint(0, vocab_size, (1, T), dtype=torch.long)
                return (tokens, {"input_pos": torch.arange(pos, pos + T, dtype=torch.long)})

            example = inp(0)
            calls = [("forward", example)] + [("forward", inp(i * T)) for i in range(1, n)]
            kind = "decode" if T == 1 else f"prefill {T} tokens"
            desc = (
                f"Llama transformer ({n_layers} layers, dim {dim}, {n_heads} heads, "
                f"ctx {seq_len}), KV cache, {kind} per call"
            )
            tags: tuple[str, ...] = ("llm", "stateful")
        else:
            n = n_calls if n_calls is not None else 2

            def tokens() -> tuple:
                return (torch.randint(0, vocab_size, (1, T), dtype=torch.long),)

            example = tokens()
            calls = [("forward", example)] + [("forward", tokens()) for _ in range(1, n)]
            desc = (
                f"Llama transformer ({n_layers} layers, dim {dim}, {n_heads} heads), "
                f"no KV cache, full {T}-token sequence"
            )
            tags = ("llm",)
    if name is None:
        name = f"llama_L{n_layers}_d{dim}_h{n_heads}_s{seq_len}_t{T}_{'kv' if kv_cache else 'nokv'}"
        if partitioner:
            name += f"_{partitioner}"
    if partitioner:
        desc += f", delegated to {partitioner.upper()}"
        tags = tags + (partitioner,)
    return ZooModel(
        name,
        desc,
        {"forward": (model, example)},
        calls,
        partitioner=partitioner,
        atol=1e-3,
        rtol=1e-3,
        tags=tags,
        **zoo_recipe(),
    )
