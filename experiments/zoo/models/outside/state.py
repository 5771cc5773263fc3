"""Programs that keep state in buffers between calls: a BART-like encoder-decoder whose two methods share
their caches, and one streaming step of GRU, LSTM and short-conv state."""

from __future__ import annotations

import torch
from executorch.exir.passes.init_mutable_pass import InitializedMutableBufferPass
from torch import nn
from torch.nn import functional as F

from memplan.experiments.zoo.models.common import ZooModel, seeded, single_method
from memplan.experiments.zoo.models.stateful import CrossAttnState, Encoder

STATE = "state_"  # the recurrent step's buffers, serialized with their initial zeros


def initialized_state(*patterns: str) -> dict:
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
            backend_config=initialized_state(STATE),
        )
