"""`memplan replan --check` on a single-method Llama-style decode program: its KV cache moves.

The cache is state carried between calls, live for the whole method. In a single-method program no
other method shares its arena, so the re-plan may put it anywhere: it reaches the lower bound of the
instruction order, the cache's offsets change, and the outputs equal the stock program's over four
calls (state persists). The caches start from random values (ExecuTorch's
`InitializedMutableBufferPass`, as `export_llama` uses for its caches): the runtime copies them to
wherever the file places the cache, so the first call also matches eager.
The model lives only here.
"""

from __future__ import annotations

import warnings

import pytest
import torch
from executorch.exir import ExecutorchBackendConfig, schema, to_edge
from executorch.exir.passes.init_mutable_pass import InitializedMutableBufferPass
from helpers.executorch_programs import ReadState, StateStore, WriteState
from torch import nn

from memplan.experiments.cli.main import main
from memplan.experiments.zoo.pte_check import check_same_outputs
from memplan.planner.compat import deserialize_pte_binary
from memplan.planner.pte.program import read_program

DIM, HEADS, MAX_LEN, VOCAB, LAYERS = 64, 4, 32, 128, 3


class RMSNorm(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.rand(dim) + 0.5)

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * self.weight


class CachedAttention(nn.Module):
    """Llama's attention with a KV cache written at `input_pos` (index_put_, like ExecuTorch's KVCache)."""

    def __init__(self) -> None:
        super().__init__()
        self.head_dim = DIM // HEADS
        self.wq, self.wk, self.wv, self.wo = (nn.Linear(DIM, DIM, bias=False) for _ in range(4))
        self.register_buffer("k_cache", torch.randn(1, HEADS, MAX_LEN, self.head_dim))
        self.register_buffer("v_cache", torch.randn(1, HEADS, MAX_LEN, self.head_dim))

    def forward(self, x, input_pos):
        b, t, _ = x.shape
        q, k, v = (w(x).view(b, t, HEADS, self.head_dim).transpose(1, 2) for w in (self.wq, self.wk, self.wv))
        self.k_cache[:, :, input_pos] = k
        self.v_cache[:, :, input_pos] = v
        scores = q @ self.k_cache.transpose(-1, -2) / self.head_dim**0.5
        out = torch.softmax(scores, dim=-1) @ self.v_cache
        return self.wo(out.transpose(1, 2).reshape(b, t, DIM))


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.attention_norm, self.ffn_norm = RMSNorm(DIM), RMSNorm(DIM)
        self.attention = CachedAttention()
        self.w1, self.w3 = nn.Linear(DIM, 4 * DIM, bias=False), nn.Linear(DIM, 4 * DIM, bias=False)
        self.w2 = nn.Linear(4 * DIM, DIM, bias=False)

    def forward(self, x, input_pos):
        h = x + self.attention(self.attention_norm(x), input_pos)
        f = self.ffn_norm(h)
        return h + self.w2(torch.nn.functional.silu(self.w1(f)) * self.w3(f))


class Decoder(nn.Module):
    """One token in, logits out: embedding, blocks, norm, output projection."""

    def __init__(self) -> None:
        super().__init__()
        self.tok_embeddings = nn.Embedding(VOCAB, DIM)
        self.layers = nn.ModuleList(Block() for _ in range(LAYERS))
        self.norm = RMSNorm(DIM)
        self.output = nn.Linear(DIM, VOCAB, bias=False)

    def forward(self, tokens, input_pos):
        x = self.tok_embeddings(tokens)
        for layer in self.layers:
            x = layer(x, input_pos)
        return self.output(self.norm(x))


def _example() -> tuple[torch.Tensor, torch.Tensor]:
    return torch.tensor([[5]]), torch.tensor([0])


@pytest.fixture(scope="module")
def decode_pte(tmp_path_factory) -> tuple[bytes, Decoder]:
    """The stock `to_executorch` build, caches initialised with their random values."""
    torch.manual_seed(0)
    model = Decoder().eval()
    reference = Decoder().eval()
    reference.load_state_dict(model.state_dict())  # the eager twin, caches included
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")
        edge = to_edge(torch.export.export(model, _example()))
        program = edge.to_executorch(
            ExecutorchBackendConfig(passes=[InitializedMutableBufferPass(["k_cache", "v_cache"])])
        )
    return program.buffer, reference


def _state_offsets(data: bytes) -> dict[int, int]:
    """Value index -> offset of every tensor whose initial value the file carries (the caches)."""
    (plan,) = deserialize_pte_binary(data).program.execution_plan
    return {
        i: v.val.allocation_info.memory_offset_low
        for i, v in enumerate(plan.values)
        if isinstance(v.val, schema.Tensor)
        and v.val.allocation_info is not None
        and v.val.data_buffer_idx > 0
    }


def test_the_cache_is_state_free_to_move_and_counted_in_the_bound(decode_pte, tmp_path, capsys):
    data, _ = decode_pte
    method = read_program(data).methods["forward"]
    state = [t for t in method.tensors if t.role == "state"]
    assert len(state) == 2 * LAYERS and len(_state_offsets(data)) == 2 * LAYERS
    assert "free to move" in method.state_placement
    assert method.lower_bound is not None and method.lower_bound < method.planned_bytes
    source = tmp_path / "decode.pte"
    source.write_bytes(data)
    assert main(["inspect", str(source), "--brief"]) == 0
    out = capsys.readouterr().out
    assert f"the file plans {method.planned_bytes:,} bytes" in out
    assert f"lower bound for this instruction order: {method.lower_bound:,} bytes" in out
    cache_bytes = 2 * LAYERS * MAX_LEN * DIM * 4
    assert (
        f"state ({2 * LAYERS} tensors, {cache_bytes:,} bytes) is live for the whole method and free to move"
        in out
    )


def test_replan_check_reaches_the_bound_with_the_cache_moved(decode_pte, tmp_path, capsys):
    data, _ = decode_pte
    source, out = tmp_path / "decode.pte", tmp_path / "replanned.pte"
    source.write_bytes(data)
    bound = read_program(data).methods["forward"].lower_bound
    assert main(["replan", str(source), "--out", str(out), "--solver", "cpsat", "--check"]) == 0
    assert "outputs identical" in capsys.readouterr().err
    after = out.read_bytes()
    assert read_program(after).methods["forward"].planned_bytes == bound
    before_offsets, after_offsets = _state_offsets(data), _state_offsets(after)
    assert before_offsets.keys() == after_offsets.keys()
    assert before_offsets != after_offsets, "the bound is reached only with the cache moved"
    assert check_same_outputs(data, after, rounds=4) == 4


def test_initial_cache_values_survive_the_move(decode_pte, tmp_path):
    """Four decode steps of the re-planned program equal eager's, from the random initial caches."""
    from executorch.runtime import Runtime

    from memplan.planner.pte.replan import replan

    data, reference = decode_pte
    result = replan(data, "cpsat", time_limit_s=5)
    assert result.changed
    program = Runtime.get().load_program(result.data)  # alive while its method runs
    method = program.load_method("forward")
    for step, token in enumerate([5, 17, 3, 99]):
        inputs = (torch.tensor([[token]]), torch.tensor([step]))
        (got,) = method.execute(list(inputs))
        with torch.no_grad():
            want = reference(*inputs)
        torch.testing.assert_close(got, want, atol=1e-4, rtol=1e-4)


def test_state_shared_by_two_methods_stays_where_it_is():
    """Both methods name the state's arena (shared state): moving it in one would break the other."""
    from executorch.exir.passes import MemoryPlanningPass

    from memplan.planner.pte.replan import replan

    store = StateStore()
    methods = {
        "write": (WriteState(store), (torch.randn(4, 8),)),
        "read": (ReadState(store), (torch.randn(8, 3),)),
    }
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")
        edge = to_edge({name: torch.export.export(m, args) for name, (m, args) in methods.items()})
        data = edge.to_executorch(
            ExecutorchBackendConfig(memory_planning_pass=MemoryPlanningPass(share_mutable_buffers=True))
        ).buffer
    program = read_program(data)
    for method in program.methods.values():
        assert "stays at its offsets in arena 2" in method.state_placement, method.state_placement
    result = replan(data, "bestfit", require_saving=False)
    assert all(m.plan is not None for m in result.methods)
    state = {
        (m.name, t.value, t.offset) for m in program.methods.values() for t in m.tensors if t.role == "state"
    }
    after = read_program(result.data)
    assert state == {
        (m.name, t.value, t.offset) for m in after.methods.values() for t in m.tensors if t.role == "state"
    }
    assert check_same_outputs(data, result.data) == 8
