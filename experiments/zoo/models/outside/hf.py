"""transformers' own models with random weights (the `hf` extra): Llama decoding against a static cache,
and ViT on XNNPACK. Nothing is downloaded."""

from __future__ import annotations

import os

import torch
from torch import nn

from memplan.experiments.zoo.models.common import ZooModel, seeded, single_method
from memplan.experiments.zoo.models.outside.state import initialized_state

# ---------------------------------------------------------------- (2, 3) Hugging Face Llama, static cache


class _DecodeStep(nn.Module):
    """transformers' `TorchExportableModuleWithStaticCache` called with positional inputs."""

    def __init__(self, inner: nn.Module) -> None:
        super().__init__()
        self.inner = inner

    def forward(self, input_ids, cache_position):
        return self.inner(input_ids=input_ids, cache_position=cache_position)


def hf_llama(n_layers: int, context: int = 128, n_calls: int = 3) -> ZooModel:
    """transformers' Llama (`AutoConfig.for_model("llama")`, dim 128, 4 heads / 2 KV heads, random
    weights) decoding one token against a `StaticCache` of `context` positions, wrapped by
    transformers' own ExecuTorch module (`TorchExportableModuleWithStaticCache`: the caches become
    buffers). That module exports only with `strict=True` here (non-strict tracing ends in
    "expected compiled_fn to be GraphModule"), so it is exported once so, and the exported module,
    the same graph run by PyTorch, is what the zoo re-exports and the eager reference."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # random weights only: nothing may be downloaded
    import transformers
    from transformers.integrations.executorch import TorchExportableModuleWithStaticCache

    config = transformers.AutoConfig.for_model(
        "llama",
        vocab_size=128,
        hidden_size=128,
        intermediate_size=256,
        num_hidden_layers=n_layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=32,
        max_position_embeddings=context,
    )
    with seeded():
        model = transformers.AutoModelForCausalLM.from_config(config).eval()
        model.generation_config = transformers.GenerationConfig(
            use_cache=True,
            cache_implementation="static",
            cache_config={"batch_size": 1, "max_cache_len": context},
        )
        step = _DecodeStep(TorchExportableModuleWithStaticCache(model, batch_size=1, max_cache_len=context))
        calls = [("forward", (torch.randint(0, 128, (1, 1)), torch.tensor([i]))) for i in range(n_calls)]
    with torch.no_grad():
        exported = torch.export.export(step.eval(), calls[0][1], strict=True).module()
    name = f"hf_llama_{n_layers}l"
    return ZooModel(
        name,
        f"transformers Llama, {n_layers} layers, static cache of {context}, decode",
        {"forward": (exported, calls[0][1])},
        calls,
        backend_config=initialized_state("cache"),
    )


# ---------------------------------------------------------------- (6) ViT on XNNPACK


class _Hidden(nn.Module):
    """A transformers encoder's outputs as a plain tuple."""

    def __init__(self, inner: nn.Module) -> None:
        super().__init__()
        self.inner = inner

    def forward(self, pixel_values):
        out = self.inner(pixel_values=pixel_values)
        return out.last_hidden_state, out.pooler_output


def hf_vit() -> ZooModel:
    """transformers' ViT (ViTConfig: 32x32 images, patches of 8, dim 32, 3 layers), XNNPACK-lowered."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import transformers

    config = transformers.ViTConfig(
        image_size=32,
        patch_size=8,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=3,
        num_attention_heads=2,
    )
    with seeded():
        module = _Hidden(transformers.ViTModel(config).eval())
        return single_method(
            "hf_vit_xnnpack",
            "transformers ViT, 3 layers, XNNPACK",
            module,
            lambda: (torch.randn(1, 3, 32, 32),),
            partitioner="xnnpack",
            atol=1e-3,
            rtol=1e-3,
        )
