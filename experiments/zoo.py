"""Model zoo for memory-planning experiments.

Every entry is built lazily by :func:`get` with a fixed seed (random weights,
no checkpoints), so two calls to ``get(name)`` give numerically identical
models and inputs.

A :class:`ZooModel` carries one eager module per ExecuTorch method (methods of
stateful models are thin wrappers around ONE shared module, so buffer FQNs are
identical across methods), the example inputs used for ``torch.export``, and a
call sequence that exercises the program (for stateful models: write state,
then read it back).

Inputs may be nested (the Llama models take ``(tokens, {"input_pos": pos})``
like ExecuTorch's ``export_llama``); the runtime harness flattens them with
``torch.utils._pytree`` the same way ``torch.export`` does.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
from torch import nn

SEED = 0
DEFAULT_BACKEND_CONFIG = {"do_quant_fusion_and_const_prop": True}


@dataclass
class ZooModel:
    name: str
    description: str
    # method name -> (eager module, example inputs) used for torch.export
    methods: dict[str, tuple[nn.Module, tuple]]
    # call sequence used to check the program: (method name, inputs)
    calls: list[tuple[str, tuple]]
    partitioner: str | None = None  # None or "xnnpack"
    dynamic_shapes: dict[str, object] | None = None  # per method, optional
    # ExecutorchBackendConfig kwargs for the baseline (merged under any kwargs
    # given to runtime.lower). Default: fold constant subgraphs (e.g. weight
    # transposes) like export_llama does. Models whose methods share mutable
    # buffers must NOT const-prop: in a method that only reads a shared buffer
    # the buffer looks constant and ExecuTorch folds the read (wrong results).
    backend_config: dict = field(default_factory=lambda: dict(DEFAULT_BACKEND_CONFIG))
    # kwargs for the stock MemoryPlanningPass (lower(..., memory_planning_pass=None)).
    # Stateful multi-method programs need share_mutable_buffers=True: without it
    # every method places the mutable buffers in its own arena-1 plan, and as
    # host-only methods of one program share arenas, the state is lost/corrupted.
    memory_planning_config: dict = field(default_factory=dict)
    # True when several methods read/write the same mutable buffers (by FQN).
    shared_state: bool = False
    # Tolerances for check_outputs (XNNPACK and long fp32 chains need looser ones).
    atol: float = 1e-4
    rtol: float = 1e-4
    # Run ExecuTorch's ConvertToLinearPass on the edge program (as export_llama
    # does) so linears are aten.linear.out instead of permute_copy(weight)+addmm,
    # which would put every transposed weight into the activation arena.
    convert_to_linear: bool = True
    # Free-form tags: "mlperf_tiny", "llm", "stateful", "multi_method", "xnnpack", ...
    tags: tuple[str, ...] = ()


@contextlib.contextmanager
def _seeded(seed: int = SEED):
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        yield


def _randomize_batchnorm(module: nn.Module) -> nn.Module:
    """Give BatchNorm layers non-trivial running stats and affine params so the
    eager-vs-runtime comparison checks BN folding/arithmetic for real."""
    for m in module.modules():
        if isinstance(m, nn.modules.batchnorm._BatchNorm):
            with torch.no_grad():
                m.running_mean.uniform_(-0.2, 0.2)
                m.running_var.uniform_(0.5, 1.5)
                if m.affine:
                    m.weight.uniform_(0.8, 1.2)
                    m.bias.uniform_(-0.1, 0.1)
    return module


def _single(
    name: str,
    description: str,
    module: nn.Module,
    make_input: Callable[[], tuple],
    n_calls: int = 2,
    **kw,
) -> ZooModel:
    """A one-method ("forward") stateless model; calls are the example input
    followed by fresh random inputs of the same shape."""
    module = module.eval()
    example = make_input()
    calls = [("forward", example)] + [("forward", make_input()) for _ in range(n_calls - 1)]
    return ZooModel(name, description, {"forward": (module, example)}, calls, **kw)


# --------------------------------------------------------------------------
# MLPerf Tiny (executorch.examples.models.mlperf_tiny)
# --------------------------------------------------------------------------


def _mlperf(kind: str, partitioner: str | None = None) -> ZooModel:
    from executorch.examples.models import mlperf_tiny as mt

    table = {
        "ds_cnn": (mt.DSCNNKWS, (1, 1, 49, 10), "MLPerf Tiny keyword spotting DS-CNN"),
        "resnet8": (mt.ResNet8, (1, 3, 32, 32), "MLPerf Tiny image classification ResNet-8"),
        "mobilenet_v1_025": (
            mt.MobileNetV1025,
            (1, 3, 96, 96),
            "MLPerf Tiny visual wake words MobileNetV1 0.25",
        ),
        "deep_autoencoder": (
            mt.DeepAutoEncoder,
            (1, 640),
            "MLPerf Tiny anomaly detection deep autoencoder",
        ),
    }
    cls, shape, desc = table[kind]
    with _seeded():
        module = _randomize_batchnorm(cls().eval())
        make = lambda: (torch.rand(*shape) * 2 - 1,)  # noqa: E731 (same as the example's inputs)
        name = kind if partitioner is None else f"{kind}_{partitioner}"
        if partitioner:
            desc += f", delegated to {partitioner.upper()}"
        tags = ("mlperf_tiny",) + ((partitioner,) if partitioner else ())
        return _single(
            name,
            desc,
            module,
            make,
            partitioner=partitioner,
            atol=1e-3 if partitioner else 1e-4,
            rtol=1e-3 if partitioner else 1e-4,
            tags=tags,
        )


# --------------------------------------------------------------------------
# Llama (executorch.examples.models.llama), random weights
# --------------------------------------------------------------------------


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


def _build_transformer(args) -> nn.Module:
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
    with _seeded():
        args = llama_args(n_layers, dim, n_heads, seq_len, kv_cache, vocab_size)
        model = _build_transformer(args)
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
            tags = ("llm", "stateful")
        else:
            n = n_calls if n_calls is not None else 2

            def inp(pos: int = 0) -> tuple:
                return (torch.randint(0, vocab_size, (1, T), dtype=torch.long),)

            example = inp()
            calls = [("forward", example)] + [("forward", inp()) for _ in range(1, n)]
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
    )


# --------------------------------------------------------------------------
# Small hand-written models
# --------------------------------------------------------------------------


class CatSeed(nn.Module):
    def forward(self, x):
        return torch.sigmoid(torch.cat([torch.cos(x), torch.sin(x)]))


def _conv_block(cin: int, cout: int) -> nn.Sequential:
    return nn.Sequential(
        nn.Conv2d(cin, cout, 3, padding=1),
        nn.ReLU(),
        nn.Conv2d(cout, cout, 3, padding=1),
        nn.ReLU(),
    )


class UNet(nn.Module):
    """Three-level U-Net; decoder levels concatenate the encoder skip along
    channels (torch.cat dim=1)."""

    def __init__(self, cin: int = 3, cout: int = 2, base: int = 8) -> None:
        super().__init__()
        c1, c2, c3 = base, base * 2, base * 4
        self.enc1 = _conv_block(cin, c1)
        self.enc2 = _conv_block(c1, c2)
        self.bottleneck = _conv_block(c2, c3)
        self.pool = nn.MaxPool2d(2)
        self.up2 = nn.ConvTranspose2d(c3, c2, 2, stride=2)
        self.dec2 = _conv_block(c2 + c2, c2)
        self.up1 = nn.ConvTranspose2d(c2, c1, 2, stride=2)
        self.dec1 = _conv_block(c1 + c1, c1)
        self.head = nn.Conv2d(c1, cout, 1)

    def forward(self, x):
        e1 = self.enc1(x)
        e2 = self.enc2(self.pool(e1))
        b = self.bottleneck(self.pool(e2))
        d2 = self.dec2(torch.cat([self.up2(b), e2], dim=1))
        d1 = self.dec1(torch.cat([self.up1(d2), e1], dim=1))
        return self.head(d1)


class DenseBlock(nn.Module):
    """DenseNet block: layer i sees cat(x, f_1, ..., f_{i-1}) along channels."""

    def __init__(self, cin: int = 16, growth: int = 8, n_layers: int = 4) -> None:
        super().__init__()
        self.layers = nn.ModuleList()
        c = cin
        for _ in range(n_layers):
            self.layers.append(
                nn.Sequential(
                    nn.BatchNorm2d(c),
                    nn.ReLU(),
                    nn.Conv2d(c, 4 * growth, 1, bias=False),
                    nn.BatchNorm2d(4 * growth),
                    nn.ReLU(),
                    nn.Conv2d(4 * growth, growth, 3, padding=1, bias=False),
                )
            )
            c += growth
        self.out_channels = c

    def forward(self, x):
        feats = [x]
        for layer in self.layers:
            feats.append(layer(torch.cat(feats, dim=1)))
        return torch.cat(feats, dim=1)


class DenseNetStem(nn.Module):
    """A conv stem, then a DenseNet block: as in a real DenseNet, the block's input is
    computed inside the method, so its cats can be fused (a graph input cannot move)."""

    def __init__(self, cin: int = 3, stem: int = 16, growth: int = 8, n_layers: int = 4) -> None:
        super().__init__()
        self.stem = nn.Conv2d(cin, stem, 3, padding=1)
        self.block = DenseBlock(cin=stem, growth=growth, n_layers=n_layers)

    def forward(self, x):
        return self.block(torch.relu(self.stem(x)))


# --------------------------------------------------------------------------
# Stateful multi-method models
# --------------------------------------------------------------------------


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


def _multi_method_cache() -> ZooModel:
    with _seeded():
        store = CacheStore()
        H, D = store.n_heads, store.head_dim
        T = 4

        def kv():
            return (torch.randn(1, H, T, D), torch.randn(1, H, T, D))

        set_ex = kv() + (torch.arange(T),)
        methods = {
            "set_cache": (SetCache(store).eval(), set_ex),
            "get_cache": (GetCache(store).eval(), ()),
            "attend": (Attend(store).eval(), (torch.randn(1, H, 2, D),)),
        }
        calls = [
            ("set_cache", set_ex),
            ("get_cache", ()),
            ("attend", (torch.randn(1, H, 2, D),)),
            ("set_cache", kv() + (torch.arange(T, 2 * T),)),
            ("attend", (torch.randn(1, H, 2, D),)),
            ("get_cache", ()),
        ]
    return ZooModel(
        "multi_method_cache",
        "Stateful 3-method program (set_cache / get_cache / attend) sharing k_cache/v_cache buffers by FQN",
        methods,
        calls,
        memory_planning_config={"share_mutable_buffers": True},
        backend_config={},  # no const prop: it would fold the read-only buffer reads
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


def _encoder_decoder_cache() -> ZooModel:
    with _seeded():
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
        backend_config={},  # no const prop: it would fold the read-only buffer reads
        shared_state=True,
        tags=("stateful", "multi_method"),
    )


def _small(name: str) -> ZooModel:
    with _seeded():
        if name == "cat_seed":
            return _single(
                name,
                "sigmoid(cat([cos(x), sin(x)]))",
                CatSeed(),
                lambda: (torch.randn(4, 16),),
            )
        if name == "unet":
            return _single(
                name,
                "3-level U-Net, skip concatenations along channels, 1x3x32x32",
                UNet(),
                lambda: (torch.randn(1, 3, 32, 32),),
                tags=("concat",),
            )
        if name == "densenet_block":
            return _single(
                name,
                "conv stem + DenseNet block (4 layers, growth 8): each layer concatenates "
                "all earlier feature maps along channels, 1x3x16x16",
                _randomize_batchnorm(DenseNetStem().eval()),
                lambda: (torch.randn(1, 3, 16, 16),),
                tags=("concat",),
            )
    raise KeyError(name)


# --------------------------------------------------------------------------
# Registry
# --------------------------------------------------------------------------

# Default Llama config for the zoo (small: dim 64, 2 layers, 4 heads, vocab 128, ctx 32).
_LLAMA_SMALL = dict(n_layers=2, dim=64, n_heads=4, seq_len=32)

_REGISTRY: dict[str, Callable[[], ZooModel]] = {
    "ds_cnn": lambda: _mlperf("ds_cnn"),
    "resnet8": lambda: _mlperf("resnet8"),
    "mobilenet_v1_025": lambda: _mlperf("mobilenet_v1_025"),
    "deep_autoencoder": lambda: _mlperf("deep_autoencoder"),
    "llama_decode": lambda: llama(**_LLAMA_SMALL, prefill_tokens=1, kv_cache=True, name="llama_decode"),
    "llama_prefill": lambda: llama(**_LLAMA_SMALL, prefill_tokens=8, kv_cache=True, name="llama_prefill"),
    "llama_nokv": lambda: llama(**_LLAMA_SMALL, prefill_tokens=16, kv_cache=False, name="llama_nokv"),
    "cat_seed": lambda: _small("cat_seed"),
    "unet": lambda: _small("unet"),
    "densenet_block": lambda: _small("densenet_block"),
    "multi_method_cache": _multi_method_cache,
    "encoder_decoder_cache": _encoder_decoder_cache,
    "ds_cnn_xnnpack": lambda: _mlperf("ds_cnn", partitioner="xnnpack"),
    "mobilenet_v1_025_xnnpack": lambda: _mlperf("mobilenet_v1_025", partitioner="xnnpack"),
    "llama_decode_xnnpack": lambda: llama(
        **_LLAMA_SMALL, prefill_tokens=1, kv_cache=True, partitioner="xnnpack", name="llama_decode_xnnpack"
    ),
}

# Models excluded from the default sweep (none so far: every entry exports in seconds).
_NOT_IN_DEFAULT_SWEEP: set[str] = set()


def names() -> list[str]:
    return list(_REGISTRY)


def default_sweep_names() -> list[str]:
    return [n for n in _REGISTRY if n not in _NOT_IN_DEFAULT_SWEEP]


class UnknownModelError(KeyError):
    def __str__(self) -> str:  # KeyError's default str() repr-quotes the message
        return str(self.args[0])


def get(name: str) -> ZooModel:
    try:
        builder = _REGISTRY[name]
    except KeyError:
        raise UnknownModelError(f"unknown zoo model {name!r}; valid names: {', '.join(names())}") from None
    return builder()
