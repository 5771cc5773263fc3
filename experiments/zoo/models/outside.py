"""Programs of the kinds a new user brings, not shaped for memplan (issue 31's trial of 11 models).

Each builder returns a `ZooModel` with random weights and a call sequence of several calls, lowered
as a user would lower it: plain `to_edge` (or XNNPACK), none of the zoo's recipe. `MODELS` lists them
in the issue's order; `experiments/bench/outside_models.py` plans each with `PlannerPass()`, the stock
pass and `memplan replan`. Transformers' models (`hf_llama`, `hf_vit`) need the `hf` extra.
"""

from __future__ import annotations

import os
from collections.abc import Callable

import torch
from executorch.exir.passes.init_mutable_pass import InitializedMutableBufferPass
from torch import nn
from torch.export import Dim
from torch.nn import functional as F

from memplan.experiments.zoo.models.common import ZooModel, randomize_batchnorm, seeded, single_method
from memplan.experiments.zoo.models.stateful import CrossAttnState, Encoder

STATE = "state_"  # the buffers serialized with their initial zeros (InitializedMutableBufferPass)


def _initialized_state(*patterns: str) -> dict:
    """The backend config that writes the named buffers' initial values into the program, so the first
    call starts from eager's zeros rather than whatever the arena held."""
    return {"passes": [InitializedMutableBufferPass(list(patterns))]}


# ---------------------------------------------------------------- (1) BART-like encoder-decoder


class BartState(CrossAttnState):
    """`CrossAttnState` (the encoder's cross-attention cache) plus the decoder's self-attention cache."""

    def __init__(self, dim: int = 32, n_heads: int = 2, enc_len: int = 12, context: int = 8) -> None:
        super().__init__(dim, n_heads, enc_len)
        self.context = context
        self.self_qkv = nn.Linear(dim, 3 * dim, bias=False)
        self.self_o = nn.Linear(dim, dim, bias=False)
        shape = (1, n_heads, context, self.head_dim)
        self.register_buffer("self_k", torch.zeros(shape))
        self.register_buffer("self_v", torch.zeros(shape))


class BartEncode(Encoder):
    """encode(x): fills the cross-attention cache (the zoo's `Encoder`) and starts a new sequence by
    clearing the self-attention cache."""

    def forward(self, x):
        self.st.self_k.zero_()
        self.st.self_v.zero_()
        return super().forward(x)


class BartDecode(nn.Module):
    """decode(y [1, 1, dim], position [1]): writes its key and value into the self-attention cache at
    `position`, attends over it (causal), then over the cross-attention cache `encode` filled."""

    def __init__(self, st: BartState) -> None:
        super().__init__()
        self.st = st

    def forward(self, y, position):
        st = self.st
        q, k, v = st.self_qkv(y).view(1, 1, 3, st.n_heads, st.head_dim).permute(2, 0, 3, 1, 4).unbind(0)
        st.self_k.index_copy_(2, position, k)
        st.self_v.index_copy_(2, position, v)
        mask = (torch.arange(st.context) <= position).view(1, 1, 1, -1)
        a = F.scaled_dot_product_attention(q, st.self_k, st.self_v, attn_mask=mask)
        h = y + st.self_o(a.transpose(1, 2).reshape(1, 1, st.dim))
        q = st.wq(h).view(1, 1, st.n_heads, st.head_dim).transpose(1, 2)
        c = F.scaled_dot_product_attention(q, st.cross_k, st.cross_v)
        h = h + st.wo(c.transpose(1, 2).reshape(1, 1, st.dim))
        return h + st.ffn(h)


def bart_like() -> ZooModel:
    with seeded():
        st = BartState()
        source = lambda: (torch.randn(1, st.enc_len, st.dim),)  # noqa: E731
        step = lambda i: (torch.randn(1, 1, st.dim), torch.tensor([i]))  # noqa: E731
        methods = {"encode": (BartEncode(st).eval(), source()), "decode": (BartDecode(st).eval(), step(0))}
        calls = [("encode", source())] + [("decode", step(i)) for i in range(3)]
        calls += [("encode", source())] + [("decode", step(i)) for i in range(2)]
    return ZooModel(
        "bart_like",
        "encode fills cross-attention caches, decode writes a self-attention cache; both buffers shared",
        methods,
        calls,
        memory_planning_config={"share_mutable_buffers": True},
        shared_state=True,
    )


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
        backend_config=_initialized_state("cache"),
    )


# ---------------------------------------------------------------- (4) U-Net of Inception blocks


def _conv(cin: int, cout: int, kernel: int = 1) -> nn.Sequential:
    return nn.Sequential(nn.Conv2d(cin, cout, kernel, padding=kernel // 2), nn.BatchNorm2d(cout), nn.ReLU())


class Inception(nn.Module):
    """Four branches (1x1; 1x1-3x3; 1x1-3x3-3x3; pool-1x1) concatenated along channels."""

    def __init__(self, cin: int, cout: int) -> None:
        super().__init__()
        b = cout // 4
        self.one = _conv(cin, b)
        self.three = nn.Sequential(_conv(cin, b), _conv(b, b, 3))
        self.five = nn.Sequential(_conv(cin, b), _conv(b, b, 3), _conv(b, b, 3))
        self.pool = nn.Sequential(nn.MaxPool2d(3, 1, 1), _conv(cin, b))

    def forward(self, x):
        return torch.cat([self.one(x), self.three(x), self.five(x), self.pool(x)], 1)


class InceptionUNet(nn.Module):
    """Two levels down, two up; every stage an Inception block, skips concatenated."""

    def __init__(self, base: int = 16) -> None:
        super().__init__()
        c1, c2, c3 = base, 2 * base, 4 * base
        self.enc1, self.enc2, self.mid = Inception(3, c1), Inception(c1, c2), Inception(c2, c3)
        self.up2, self.dec2 = nn.ConvTranspose2d(c3, c2, 2, 2), Inception(2 * c2, c2)
        self.up1, self.dec1 = nn.ConvTranspose2d(c2, c1, 2, 2), Inception(2 * c1, c1)
        self.head = nn.Conv2d(c1, 2, 1)

    def forward(self, x):
        e1 = self.enc1(x)
        e2 = self.enc2(F.max_pool2d(e1, 2))
        m = self.mid(F.max_pool2d(e2, 2))
        d2 = self.dec2(torch.cat([self.up2(m), e2], 1))
        return self.head(self.dec1(torch.cat([self.up1(d2), e1], 1)))


def inception_unet() -> ZooModel:
    with seeded():
        module = randomize_batchnorm(InceptionUNet())
        return single_method(
            "inception_unet", "U-Net of Inception blocks", module, lambda: (torch.randn(1, 3, 32, 32),)
        )


# ---------------------------------------------------------------- (5) recurrent state


class RecurrentStep(nn.Module):
    """One streaming step of a GRU cell, an LSTM cell and a short depthwise causal conv (LFM2-like),
    each keeping its state in buffers between calls."""

    def __init__(self, dim: int = 32, hidden: int = 48, kernel: int = 4) -> None:
        super().__init__()
        self.gru = nn.GRUCell(dim, hidden)
        self.lstm = nn.LSTMCell(hidden, hidden)
        self.conv = nn.Conv1d(hidden, hidden, kernel, groups=hidden)
        self.out = nn.Linear(hidden, dim)
        self.register_buffer(f"{STATE}gru", torch.zeros(1, hidden))
        self.register_buffer(f"{STATE}lstm_h", torch.zeros(1, hidden))
        self.register_buffer(f"{STATE}lstm_c", torch.zeros(1, hidden))
        self.register_buffer(f"{STATE}conv", torch.zeros(1, hidden, kernel - 1))

    def forward(self, x):
        h = self.gru(x, self.state_gru)
        self.state_gru.copy_(h)
        h2, c2 = self.lstm(h, (self.state_lstm_h, self.state_lstm_c))
        self.state_lstm_h.copy_(h2)
        self.state_lstm_c.copy_(c2)
        window = torch.cat([self.state_conv, h2.unsqueeze(-1)], -1)
        self.state_conv.copy_(window[:, :, 1:])
        return self.out(self.conv(window).squeeze(-1) * torch.sigmoid(h2))


def recurrent_state() -> ZooModel:
    with seeded():
        return single_method(
            "recurrent_state",
            "GRU, LSTM and short-conv state as buffers, one step per call",
            RecurrentStep(),
            lambda: (torch.randn(1, 32),),
            n_calls=4,
            backend_config=_initialized_state(STATE),
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


# ---------------------------------------------------------------- (10) int8 CNN


class SmallCNN(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 16, 3, padding=1),
            nn.BatchNorm2d(16),
            nn.ReLU(),
            nn.Conv2d(16, 32, 3, stride=2, padding=1),
            nn.BatchNorm2d(32),
            nn.ReLU(),
            nn.Conv2d(32, 32, 3, padding=1),
            nn.ReLU(),
            nn.AdaptiveAvgPool2d(1),
        )
        self.head = nn.Linear(32, 10)

    def forward(self, x):
        return self.head(self.features(x).flatten(1))


def int8_cnn() -> ZooModel:
    """A small CNN quantized to int8 with XNNPACK's quantizer (pt2e: prepare, calibrate, convert) and
    lowered with XNNPACK. The converted module is the reference; the check compares with the stock
    program, as `memplan plan --check` does (int8 rounding differs from the reference)."""
    from executorch.backends.xnnpack.quantizer.xnnpack_quantizer import (
        XNNPACKQuantizer,
        get_symmetric_quantization_config,
    )
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

    with seeded():
        module = randomize_batchnorm(SmallCNN()).eval()
        images = lambda: (torch.randn(1, 3, 32, 32),)  # noqa: E731
        example = images()
        quantizer = XNNPACKQuantizer().set_global(get_symmetric_quantization_config(is_per_channel=True))
        prepared = prepare_pt2e(torch.export.export(module, example, strict=False).module(), quantizer)
        for _ in range(4):
            prepared(*images())
        converted = convert_pt2e(prepared)
        calls = [("forward", example)] + [("forward", images()) for _ in range(2)]
    return ZooModel(
        "int8_cnn_xnnpack",
        "int8 CNN, XNNPACK quantizer (pt2e), XNNPACK",
        {"forward": (converted, example)},  # a GraphModule: .eval() is refused, it is traced in eval
        calls,
        partitioner="xnnpack",
        tags=("quantized",),
    )


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
MODELS: dict[str, Callable[[], ZooModel]] = {
    "bart_like": bart_like,
    "hf_llama_2l": lambda: hf_llama(2),
    "hf_llama_16l": lambda: hf_llama(16),
    "inception_unet": inception_unet,
    "recurrent_state": recurrent_state,
    "hf_vit_xnnpack": hf_vit,
    "dynamic_sequence": dynamic_sequence,
    "chunk_split_narrow_cat": split_merge,
    "torch_cond": cond_gate,
    "int8_cnn_xnnpack": int8_cnn,
    "zero_size": zero_size,
}
