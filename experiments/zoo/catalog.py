"""The model zoo's catalog: every entry by name, built on demand by `get`.

Every entry is built lazily with a fixed seed (random weights, no
checkpoints), so two calls to ``get(name)`` give numerically identical models
and inputs. The builders live in `memplan.experiments.zoo.models` (one module per
family); a `ZooModel` is what each entry returns.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from memplan.errors import UsageError
from memplan.experiments.zoo.models.common import ZooModel
from memplan.experiments.zoo.models.concat import concat_model
from memplan.experiments.zoo.models.hybrid import lfm2_hybrid, qwen35_hybrid
from memplan.experiments.zoo.models.llama import llama
from memplan.experiments.zoo.models.mlperf import mlperf
from memplan.experiments.zoo.models.recurrent import lstm
from memplan.experiments.zoo.models.stateful import encoder_decoder_cache, multi_method_cache

__all__ = ["UnknownModelError", "ZooModel", "get", "names"]

# Default Llama config for the zoo (small: dim 64, 2 layers, 4 heads, vocab 128, ctx 32).
_LLAMA_SMALL: dict[str, Any] = dict(n_layers=2, dim=64, n_heads=4, seq_len=32)
# Hybrids for the zoo: 2 state-space-like layers + 1 full attention, dim 64, ctx 32, 3 decode calls.
_HYBRID_SMALL: dict[str, Any] = dict(dim=64, n_heads=4, seq_len=32, n_calls=3)

_REGISTRY: dict[str, Callable[[], ZooModel]] = {
    "ds_cnn": lambda: mlperf("ds_cnn"),
    "resnet8": lambda: mlperf("resnet8"),
    "mobilenet_v1_025": lambda: mlperf("mobilenet_v1_025"),
    "deep_autoencoder": lambda: mlperf("deep_autoencoder"),
    "llama_decode": lambda: llama(**_LLAMA_SMALL, prefill_tokens=1, kv_cache=True, name="llama_decode"),
    "llama_prefill": lambda: llama(**_LLAMA_SMALL, prefill_tokens=8, kv_cache=True, name="llama_prefill"),
    "llama_nokv": lambda: llama(**_LLAMA_SMALL, prefill_tokens=16, kv_cache=False, name="llama_nokv"),
    "cat_seed": lambda: concat_model("cat_seed"),
    "unet": lambda: concat_model("unet"),
    "densenet_block": lambda: concat_model("densenet_block"),
    "lstm": lstm,
    "qwen35_hybrid_decode": lambda: qwen35_hybrid(
        linear_layers=2, **_HYBRID_SMALL, name="qwen35_hybrid_decode"
    ),
    "lfm2_hybrid_decode": lambda: lfm2_hybrid(conv_layers=2, **_HYBRID_SMALL, name="lfm2_hybrid_decode"),
    "multi_method_cache": multi_method_cache,
    "encoder_decoder_cache": encoder_decoder_cache,
    "ds_cnn_xnnpack": lambda: mlperf("ds_cnn", partitioner="xnnpack"),
    "mobilenet_v1_025_xnnpack": lambda: mlperf("mobilenet_v1_025", partitioner="xnnpack"),
    "llama_decode_xnnpack": lambda: llama(
        **_LLAMA_SMALL, prefill_tokens=1, kv_cache=True, partitioner="xnnpack", name="llama_decode_xnnpack"
    ),
}


def names() -> list[str]:
    return list(_REGISTRY)


class UnknownModelError(UsageError, KeyError):
    """`name` is not a zoo model (a KeyError too: the zoo is looked up like a mapping)."""

    def __str__(self) -> str:  # KeyError's default str() repr-quotes the message
        return str(self.args[0])


def get(name: str) -> ZooModel:
    try:
        builder = _REGISTRY[name]
    except KeyError:
        raise UnknownModelError(f"unknown zoo model {name!r}; valid names: {', '.join(names())}") from None
    return builder()
