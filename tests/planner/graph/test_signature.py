"""planner.graph.signature: the frozen signature answers like the real one, from one computation."""

from __future__ import annotations

import torch

from memplan.planner.graph.signature import FrozenSignature, frozen


class _Stateful(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.weight = torch.nn.Parameter(torch.ones(3))
        self.register_buffer("count", torch.zeros(3))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.count.add_(x)
        return x * self.weight


def test_frozen_signature_has_the_same_maps_computed_once() -> None:
    signature = torch.export.export(_Stateful(), (torch.ones(3),)).run_decompositions().graph_signature
    fast = frozen(signature)
    assert isinstance(fast, FrozenSignature) and frozen(fast) is fast and frozen(None) is None
    for name in ("inputs_to_buffers", "buffers_to_mutate", "user_inputs_to_mutate", "inputs_to_parameters"):
        assert dict(getattr(fast, name)) == dict(getattr(signature, name))
        assert getattr(fast, name) is getattr(fast, name)  # not rebuilt per read
    assert dict(fast.buffers_to_mutate) == {"add": "count"}
    assert fast.input_specs[0] is signature.input_specs[0]  # same spec objects: renames reach the program


def test_a_new_frozen_signature_sees_a_renamed_output() -> None:
    signature = torch.export.export(_Stateful(), (torch.ones(3),)).run_decompositions().graph_signature
    stale = frozen(signature)
    assert stale is not None
    _ = stale.buffers_to_mutate
    signature.replace_all_uses("add", "renamed")
    assert dict(stale.buffers_to_mutate) == {"add": "count"}  # why the pass makes a new one after cat fusion
    assert dict(frozen(signature).buffers_to_mutate) == {"renamed": "count"}  # type: ignore[union-attr]
