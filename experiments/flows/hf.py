"""transformers' `ExecutorchExporter` on tiny random-weight architectures, with memplan and with the stock pass.

Each `Architecture` is a model type, its Auto class, a configuration small enough to export in seconds
(`AutoConfig.for_model`, random weights: nothing is downloaded) and its inputs. `export` runs memplan's
exporter (memplan.planner.substitute.hf) with `build_stock=True`, so one export gives both programs from
the same edge program; `compare` runs both in `executorch.runtime` through transformers' own runner,
call after call, and says whether every output is bit-identical.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from memplan.experiments.flows.outputs import identical, identical_and_finite

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # random weights only: nothing may be downloaded

TEXT = {
    "vocab_size": 64,
    "max_position_embeddings": 32,
    "pad_token_id": 0,
    "bos_token_id": 1,
    "eos_token_id": 2,
}
DECODER = {
    **TEXT,
    "hidden_size": 16,
    "intermediate_size": 32,
    "num_hidden_layers": 1,
    "num_attention_heads": 2,
    "num_key_value_heads": 1,
    "head_dim": 8,
}
ENCODER = {
    **TEXT,
    "hidden_size": 16,
    "intermediate_size": 32,
    "num_hidden_layers": 1,
    "num_attention_heads": 2,
}
SEQ2SEQ = {
    **TEXT,
    "d_model": 16,
    "encoder_layers": 1,
    "decoder_layers": 1,
    "encoder_attention_heads": 2,
    "decoder_attention_heads": 2,
    "encoder_ffn_dim": 32,
    "decoder_ffn_dim": 32,
}
VISION = {
    "image_size": 32,
    "patch_size": 8,
    "hidden_size": 16,
    "intermediate_size": 32,
    "num_hidden_layers": 1,
    "num_attention_heads": 2,
}
STAGES = {"hidden_sizes": [8, 16], "depths": [1, 1], "embedding_size": 8}
VISION_TEXT = {
    "text_config": {**ENCODER, "projection_dim": 16},
    "vision_config": {**VISION, "projection_dim": 16},
    "projection_dim": 16,
}


def tokens(length: int = 8) -> Callable[[Any], dict[str, Any]]:
    return lambda config: {"input_ids": torch.randint(0, 64, (1, length))}


def seq2seq(config: Any) -> dict[str, Any]:
    return {"input_ids": torch.randint(0, 64, (1, 8)), "decoder_input_ids": torch.randint(0, 64, (1, 4))}


def pixels(config: Any) -> dict[str, Any]:
    return {"pixel_values": torch.randn(1, 3, 32, 32)}


def waveform(config: Any) -> dict[str, Any]:
    return {"input_values": torch.randn(1, 800)}


def mel(config: Any) -> dict[str, Any]:
    return {
        "input_features": torch.randn(1, config.num_mel_bins, 2 * config.max_source_positions),
        "decoder_input_ids": torch.randint(0, 64, (1, 4)),
    }


def text_and_pixels(config: Any) -> dict[str, Any]:
    return {"input_ids": torch.randint(0, 64, (1, 8)), "pixel_values": torch.randn(1, 3, 32, 32)}


def static_cache(config: Any) -> dict[str, Any]:
    """A decode step against a `StaticCache` the caller holds (transformers' exported decode form)."""
    from transformers import StaticCache

    return {
        "input_ids": torch.randint(0, 64, (1, 1)),
        "past_key_values": StaticCache(config=config, max_cache_len=16),
        "cache_position": torch.tensor([3]),
        "use_cache": True,
    }


@dataclass(frozen=True)
class Architecture:
    """One tiny transformers architecture: how to build it and what to feed it."""

    name: str
    model_type: str
    kind: str  # decoder, encoder, encoder-decoder, vision, audio, multimodal
    auto: str  # the transformers Auto class
    config: dict[str, Any]
    inputs: Callable[[Any], dict[str, Any]] = field(default=tokens())

    def build(self) -> tuple[Any, dict[str, Any]]:
        import transformers

        config = transformers.AutoConfig.for_model(self.model_type, **self.config)
        torch.manual_seed(0)
        model = getattr(transformers, self.auto).from_config(config).eval()
        torch.manual_seed(1)
        return model, self.inputs(config)


def _decoder(name: str, **extra: Any) -> Architecture:
    return Architecture(name, name, "decoder", "AutoModelForCausalLM", {**DECODER, **extra})


ARCHITECTURES: dict[str, Architecture] = {
    a.name: a
    for a in [
        _decoder("llama"),
        Architecture("llama_static_cache", "llama", "decoder", "AutoModelForCausalLM", DECODER, static_cache),
        _decoder("qwen2"),
        Architecture("qwen2_static_cache", "qwen2", "decoder", "AutoModelForCausalLM", DECODER, static_cache),
        _decoder("qwen3"),
        _decoder("mistral"),
        _decoder("gemma"),
        _decoder("gemma2"),
        _decoder("phi3"),
        _decoder("olmo"),
        _decoder("granite"),
        _decoder("stablelm"),
        _decoder("starcoder2"),
        _decoder("smollm3"),
        _decoder("gpt_neox"),
        _decoder("gpt2", n_embd=16, n_layer=1, n_head=2, n_positions=32),
        _decoder("opt", ffn_dim=32, word_embed_proj_dim=16),
        Architecture("bert", "bert", "encoder", "AutoModel", ENCODER),
        Architecture(
            "roberta", "roberta", "encoder", "AutoModel", {**ENCODER, "max_position_embeddings": 40}
        ),
        Architecture(
            "distilbert",
            "distilbert",
            "encoder",
            "AutoModel",
            {**TEXT, "dim": 16, "hidden_dim": 32, "n_layers": 1, "n_heads": 2},
        ),
        Architecture("albert", "albert", "encoder", "AutoModel", {**ENCODER, "embedding_size": 16}),
        Architecture("electra", "electra", "encoder", "AutoModel", {**ENCODER, "embedding_size": 16}),
        Architecture("bart", "bart", "encoder-decoder", "AutoModelForSeq2SeqLM", SEQ2SEQ, seq2seq),
        Architecture(
            "t5",
            "t5",
            "encoder-decoder",
            "AutoModelForSeq2SeqLM",
            {
                **TEXT,
                "d_model": 16,
                "d_ff": 32,
                "d_kv": 8,
                "num_layers": 1,
                "num_decoder_layers": 1,
                "num_heads": 2,
            },
            seq2seq,
        ),
        Architecture("vit", "vit", "vision", "AutoModel", VISION, pixels),
        Architecture("deit", "deit", "vision", "AutoModel", VISION, pixels),
        Architecture("resnet", "resnet", "vision", "AutoModel", STAGES, pixels),
        Architecture(
            "wav2vec2",
            "wav2vec2",
            "audio",
            "AutoModel",
            {
                **ENCODER,
                "conv_dim": (8, 8),
                "conv_stride": (5, 2),
                "conv_kernel": (10, 3),
                "num_conv_pos_embeddings": 16,
                "num_conv_pos_embedding_groups": 2,
            },
            waveform,
        ),
        Architecture(
            "whisper",
            "whisper",
            "audio",
            "AutoModelForSpeechSeq2Seq",
            {
                **SEQ2SEQ,
                "num_mel_bins": 8,
                "max_source_positions": 16,
                "max_target_positions": 16,
                "decoder_start_token_id": 1,
            },
            mel,
        ),
        Architecture("clip", "clip", "multimodal", "AutoModel", VISION_TEXT, text_and_pixels),
        Architecture("siglip", "siglip", "multimodal", "AutoModel", VISION_TEXT, text_and_pixels),
    ]
}

DEFAULT_RUN = ("llama_static_cache", "bert", "vit", "whisper")
"""A representative handful: a decoder against a static cache, an encoder, vision, audio encoder-decoder."""


@dataclass
class Outcome:
    """One architecture through the exporter on one backend, with memplan and with the stock pass."""

    architecture: Architecture
    backend: str
    program: Any = None  # memplan.planner.substitute.ProgramResult
    metadata: Any = None  # transformers' ExportMetadata of the exported component
    inputs: dict[str, Any] = field(default_factory=dict)
    error: str = ""  # why it did not export (with or without memplan)
    seconds: float = 0.0
    calls: int = 3  # calls `compare` makes: as many as the program can take (see export_for_generation)


def export(architecture: Architecture, backend: str, solver: str = "cpsat", **options: Any) -> Outcome:
    """Export with memplan's exporter, the stock program built beside it; an error is recorded, not raised."""
    from memplan.planner.substitute import hf

    hf.register_portable_backend()
    from transformers.exporters.configs import ExecutorchConfig

    outcome = Outcome(architecture, backend)
    start = time.perf_counter()
    try:
        model, inputs = architecture.build()
        outcome.inputs = inputs
        exporter = hf.exporter_class()(solver, build_stock=True, **options)
        exported = exporter.export(model, _copied(inputs), ExecutorchConfig(backend=backend))
        (outcome.program,) = exporter.programs
        outcome.metadata = exported.components["model"].metadata
    except Exception as e:  # the architecture does not export through transformers' exporter
        outcome.error = (
            f"{type(e).__name__}: {str(e).strip().splitlines()[0][:160] if str(e).strip() else ''}"
        )
    outcome.seconds = time.perf_counter() - start
    return outcome


def compare(outcome: Outcome, calls: int | None = None) -> bool:
    """True if memplan's program and the stock program give bit-identical, finite outputs over `calls`
    calls (default: `outcome.calls`), each program fed its own copy of the same inputs every call.

    State lives where ExecuTorch's Python binding puts it, the same way for both programs: a cache input
    the graph mutates is copied into the program when its inputs are planned (the default), so every call
    starts from the caller's cache; with `alloc_graph_input=False` (the generate path) the binding points
    the mutated input at its own output storage, which the next call reads: the state advances from
    zeros, call after call, and the caller's cache is neither read nor written."""
    from transformers.exporters.runners.runner_executorch import ExecutorchModelRunner

    mine = ExecutorchModelRunner.from_program(outcome.program.program, outcome.metadata)
    theirs = ExecutorchModelRunner.from_program(outcome.program.stock_program, outcome.metadata)
    mine_inputs, their_inputs = _copied(outcome.inputs), _copied(outcome.inputs)
    for _ in range(outcome.calls if calls is None else calls):
        if not identical_and_finite(_leaves(mine(**mine_inputs)), _leaves(theirs(**their_inputs))):
            return False
    mine_after, theirs_after = _leaves(mine_inputs), _leaves(their_inputs)  # caches the calls wrote
    return len(mine_after) == len(theirs_after) and all(map(identical, mine_after, theirs_after))


def _copied(inputs: dict[str, Any]) -> dict[str, Any]:
    import copy

    return copy.deepcopy(inputs)


def _leaves(value: Any) -> list[Any]:
    """The tensors of a model output or input dict (caches included), in order."""
    import torch.utils._pytree as pytree

    if hasattr(value, "to_tuple"):
        value = value.to_tuple()
    if hasattr(value, "layers"):  # a transformers Cache
        value = [(getattr(layer, "keys", None), getattr(layer, "values", None)) for layer in value.layers]
    if isinstance(value, dict):
        return [t for v in value.values() for t in _leaves(v)]
    if isinstance(value, (list, tuple)):
        return [t for v in value for t in _leaves(v)]
    return [t for t in pytree.tree_leaves(value) if isinstance(t, torch.Tensor)]


PROMPT_TOKENS = 6
CACHE_TOKENS = 16  # the static cache of the generate path


def export_for_generation(
    architecture: Architecture, backend: str, solver: str = "cpsat", **options: Any
) -> list[Outcome]:
    """The generate path: transformers decomposes `generate` into prefill and decode (a static cache the
    caller holds between them) and exports each as its own program; one Outcome per component, its
    inputs those transformers captured for it. Each call of the prefill program writes its prompt into
    the cache after the last (the position counter is state), so a `CACHE_TOKENS` cache takes
    `CACHE_TOKENS // PROMPT_TOKENS` calls; the next one indexes past the cache and fails with
    ExecuTorch's InvalidArgument (0x12) in `index_put`, with the stock pass as with memplan's, as eager
    fails with an IndexError."""
    from transformers import GenerationConfig
    from transformers.exporters.configs import ExecutorchConfig
    from transformers.exporters.utils import decompose_for_generation

    from memplan.planner.substitute import hf

    hf.register_portable_backend()
    model, _ = architecture.build()
    prompt = {
        "input_ids": torch.randint(0, 64, (1, PROMPT_TOKENS)),
        "attention_mask": torch.ones(1, PROMPT_TOKENS, dtype=torch.long),
    }
    generation = GenerationConfig(
        cache_implementation="static", max_cache_len=CACHE_TOKENS, max_new_tokens=2, do_sample=False
    )
    stages = decompose_for_generation(model, _copied(prompt), generation_config=generation)
    exporter = hf.exporter_class()(solver, build_stock=True, **options)
    start = time.perf_counter()
    exported = exporter.export_for_generation(
        model,
        prompt,
        ExecutorchConfig(backend=backend, alloc_graph_input=False),
        generation_config=generation,
    )
    seconds = time.perf_counter() - start
    calls = {"prefill": CACHE_TOKENS // PROMPT_TOKENS}
    return [
        Outcome(
            architecture,
            backend,
            program,
            exported.components[name].metadata,
            stages[name][1],
            "",
            seconds,
            calls.get(name, 3),
        )
        for name, program in zip(exported.components, exporter.programs)
    ]
