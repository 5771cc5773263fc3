"""Model zoo + runtime harness: every zoo model exports, lowers with the stock
planner, runs in executorch.runtime and matches eager PyTorch (the costliest
models under `-m slow`, each with a cheaper default-run test of its kind)."""

from __future__ import annotations

import copy
import dataclasses

import pytest
import torch

from memplan.experiments import zoo
from memplan.experiments.zoo import runtime
from memplan.experiments.zoo.models import hybrid
from memplan.experiments.zoo.models.llama import llama

REQUIRED = [
    "ds_cnn",
    "resnet8",
    "mobilenet_v1_025",
    "deep_autoencoder",
    "llama_decode",
    "llama_prefill",
    "llama_nokv",
    "cat_seed",
    "unet",
    "densenet_block",
    "lstm",
    "multi_method_cache",
    "encoder_decoder_cache",
]

# Checked under -m slow only; the default run keeps each kind with the named test.
SLOW_MODELS = {
    "mobilenet_v1_025": "ds_cnn and resnet8 (the same MLPerf Tiny family)",
    "llama_prefill": "test_llama_builder_small_config (a 4-token prefill with a KV cache)",
    "qwen35_hybrid_decode": "test_a_small_qwen35_hybrid_decode_lowers_runs_and_matches_eager",
    "mobilenet_v1_025_xnnpack": "ds_cnn_xnnpack",
    "llama_decode_xnnpack": "ds_cnn_xnnpack (XNNPACK) and llama_decode (the KV-cache decode)",
}

# One ZooModel per name for the whole module: runtime caches the edge program
# on it, so the extra tests below do not re-export.
_MODELS: dict[str, zoo.ZooModel] = {}
_LOWERED: dict[str, object] = {}


def model(name: str) -> zoo.ZooModel:
    if name not in _MODELS:
        _MODELS[name] = zoo.get(name)
    return _MODELS[name]


def stock(name: str):
    if name not in _LOWERED:
        _LOWERED[name] = runtime.lower(model(name))
    return _LOWERED[name]


# ------------------------------------------------------------------ registry


def test_registry_has_required_models():
    names = zoo.names()
    assert set(REQUIRED) <= set(names)
    assert len([n for n in names if n.endswith("_xnnpack")]) >= 2
    assert len(names) == len(set(names))


def test_unknown_name_lists_valid_names():
    with pytest.raises(KeyError) as ei:
        zoo.get("no_such_model")
    msg = str(ei.value)
    assert "no_such_model" in msg
    for n in zoo.names():
        assert n in msg


def test_models_are_deterministic():
    a, b = zoo.get("resnet8"), zoo.get("resnet8")
    sa, sb = a.methods["forward"][0].state_dict(), b.methods["forward"][0].state_dict()
    assert sa.keys() == sb.keys()
    assert all(torch.equal(sa[k], sb[k]) for k in sa)
    for (na, ia), (nb, ib) in zip(a.calls, b.calls):
        assert na == nb and all(torch.equal(x, y) for x, y in zip(ia, ib))


def test_stateful_methods_share_one_module():
    for name in ("multi_method_cache", "encoder_decoder_cache"):
        m = model(name)
        assert m.shared_state and len(m.methods) >= 2
        buffers = [dict(mod.named_buffers()) for mod, _ in m.methods.values()]
        # Same FQNs, and literally the same tensors (one underlying module).
        assert all(b.keys() == buffers[0].keys() for b in buffers)
        for k in buffers[0]:
            assert all(b[k] is buffers[0][k] for b in buffers)


# ------------------------------------------------------------------ every model


@pytest.mark.parametrize(
    "name", [pytest.param(n, marks=pytest.mark.slow if n in SLOW_MODELS else ()) for n in zoo.names()]
)
def test_model_lowers_runs_and_matches_eager(name):
    m = model(name)
    et = stock(name)
    assert set(et.methods) == set(m.methods)
    runtime.check_outputs(m, et.buffer)

    arenas = runtime.stock_arena_bytes(et)
    assert set(arenas) == set(m.methods)
    for sizes in arenas.values():
        assert sizes[0] == 0 and sizes[1] > 0
        # shared mutable state lives in its own arena (mem_id 2)
        assert len(sizes) == (3 if m.shared_state else 2)
    stats = runtime.program_stats(et)
    if m.partitioner == "xnnpack":
        assert all(s["delegates"] >= 1 for s in stats.values())
    else:
        assert all(s["delegates"] == 0 for s in stats.values())


def test_a_small_qwen35_hybrid_decode_lowers_runs_and_matches_eager():
    """qwen35_hybrid_decode's kind at one Gated DeltaNet layer and dim 32: its state over three calls."""
    m = hybrid.qwen35_hybrid(linear_layers=1, dim=32, n_heads=2, seq_len=8, n_calls=3)
    et = runtime.lower(m)
    runtime.check_outputs(m, et.buffer)
    (sizes,) = runtime.stock_arena_bytes(et).values()
    assert sizes[0] == 0 and sizes[1] > 0 and len(sizes) == 2


# ------------------------------------------------------------------ state


def test_multi_method_cache_reads_what_was_written():
    m = model("multi_method_cache")
    outs = runtime.run_pte(stock("multi_method_cache").buffer, m.calls)
    store = m.methods["set_cache"][0].store
    want_k = torch.zeros_like(store.k_cache)
    want_v = torch.zeros_like(store.v_cache)
    for (method, inputs), got in zip(m.calls, outs):
        if method == "set_cache":
            k, v, pos = inputs
            want_k[:, :, pos] = k
            want_v[:, :, pos] = v
        elif method == "get_cache":
            assert torch.equal(got[0], want_k)
            assert torch.equal(got[1], want_v)


def test_encoder_decoder_state_flows_between_methods():
    m = model("encoder_decoder_cache")
    calls = [
        ("encoder", m.calls[0][1]),
        ("decoder", m.calls[1][1]),
        ("encoder", m.calls[3][1]),
        ("decoder", m.calls[1][1]),
    ]
    outs = runtime.run_pte(stock("encoder_decoder_cache").buffer, calls)
    # Same decoder input, different encoder state -> different output.
    assert not torch.allclose(outs[1][0], outs[3][0])


def test_llama_kv_cache_state_is_used():
    m = model("llama_decode")
    outs = runtime.run_pte(stock("llama_decode").buffer, m.calls)
    # Replaying call 1 (pos 1) without first running pos 0 must differ: the
    # cache entry at pos 0 is then empty.
    alone = runtime.run_pte(stock("llama_decode").buffer, m.calls[1:2])
    assert not torch.allclose(outs[1][0], alone[0][0])


def test_stock_planner_without_shared_buffers_breaks_state():
    """Why multi-method models carry memory_planning_config: with a plain
    MemoryPlanningPass each method plans the cache into its own arena-1
    layout, host-only methods share arenas, and reads see garbage/zeros."""
    from executorch.exir.passes import MemoryPlanningPass

    m = model("multi_method_cache")
    assert m.memory_planning_config == {"share_mutable_buffers": True}
    et = runtime.lower(m, memory_planning_pass=MemoryPlanningPass())
    with pytest.raises(AssertionError, match=r"call \d+ \((get_cache|attend)\)"):
        runtime.check_outputs(m, et.buffer)


def test_const_prop_breaks_shared_state():
    """Why shared-state models turn off do_quant_fusion_and_const_prop: a
    method that only reads a shared buffer gets the read folded to a constant."""
    m = model("multi_method_cache")
    assert "do_quant_fusion_and_const_prop" not in m.backend_config
    et = runtime.lower(m, do_quant_fusion_and_const_prop=True)
    with pytest.raises(AssertionError):
        runtime.check_outputs(m, et.buffer)


# ------------------------------------------------------------------ harness


def test_check_outputs_raises_on_mismatch():
    m = model("cat_seed")
    pte = stock("cat_seed").buffer
    runtime.check_outputs(m, pte)  # sanity: the real model matches

    class Wrong(torch.nn.Module):
        def forward(self, x):
            return torch.sigmoid(torch.cat([torch.cos(x), torch.sin(x) + 0.1]))

    bad = dataclasses.replace(m, methods={"forward": (Wrong(), m.methods["forward"][1])})
    with pytest.raises(AssertionError, match=r"cat_seed: call 0 \(forward\) output 0: mismatch"):
        runtime.check_outputs(bad, pte)


def test_compare_outputs_reports_index_shape_and_count():
    m = model("multi_method_cache")
    want = runtime.eager_outputs(m)
    got = copy.deepcopy(want)
    got[5][1] = got[5][1] + 1.0
    with pytest.raises(AssertionError, match=r"call 5 \(get_cache\) output 1"):
        runtime.compare_outputs(m, got, want)
    got = copy.deepcopy(want)
    got[2][0] = got[2][0][..., :1]
    with pytest.raises(AssertionError, match=r"call 2 \(attend\) output 0: shape"):
        runtime.compare_outputs(m, got, want)
    with pytest.raises(AssertionError, match="call results"):
        runtime.compare_outputs(m, want[:-1], want)


def test_eager_outputs_do_not_mutate_the_zoo_model():
    m = model("multi_method_cache")
    store = m.methods["set_cache"][0].store
    before = store.k_cache.clone()
    a = runtime.eager_outputs(m)
    b = runtime.eager_outputs(m)
    assert torch.equal(store.k_cache, before)
    assert all(torch.equal(x, y) for ca, cb in zip(a, b) for x, y in zip(ca, cb))


def test_lower_is_repeatable_and_accepts_pass_dicts():
    from executorch.exir.passes import MemoryPlanningPass

    m = model("cat_seed")
    a = runtime.lower(m)
    b = runtime.lower(m, memory_planning_pass={"forward": MemoryPlanningPass()})
    assert runtime.stock_arena_bytes(a) == runtime.stock_arena_bytes(b)
    # bytes and manager give the same answer
    assert runtime.stock_arena_bytes(a.buffer) == runtime.stock_arena_bytes(a)
    runtime.check_outputs(m, b.buffer)


def test_run_pte_unknown_method():
    with pytest.raises(KeyError, match="no method"):
        runtime.run_pte(stock("cat_seed").buffer, [("nope", ())])


def test_llama_builder_small_config():
    m = llama(n_layers=1, dim=32, n_heads=2, seq_len=16, prefill_tokens=4, kv_cache=True)
    assert [c[1][1]["input_pos"].tolist() for c in m.calls] == [[0, 1, 2, 3], [4, 5, 6, 7]]
    et = runtime.lower(m)
    runtime.check_outputs(m, et.buffer)
    nokv = llama(n_layers=1, dim=32, n_heads=2, seq_len=16, prefill_tokens=16, kv_cache=False)
    assert len(nokv.calls[0][1]) == 1 and nokv.calls[0][1][0].shape == (1, 16)
    with pytest.raises(ValueError):
        llama(seq_len=8, prefill_tokens=16)


@pytest.mark.slow
def test_llama_big_config():
    """The benchmark-size config (about a minute on 2 cores)."""
    m = llama(n_layers=16, dim=512, n_heads=8, seq_len=256, prefill_tokens=128, kv_cache=True)
    et = runtime.lower(m)
    assert runtime.stock_arena_bytes(et)["forward"][1] > 16 * 2 * 8 * 256 * 64 * 4  # > the KV caches
    runtime.check_outputs(m, et.buffer)
