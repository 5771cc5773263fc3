"""A `.pt2` saved with `Dim` dynamic dimensions (issue 31, item 3): planned at the upper bound, as
ExecuTorch plans it, and the planned program runs at several lengths; unbounded dims are refused."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from torch import nn
from torch.export import Dim, export, save

import memplan
from memplan.experiments.zoo.programs import ProgramSpecError, load


class CatOfTwo(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cat([torch.sin(x), torch.cos(x)], 1) * 2


def _saved(tmp_path: Path, seq: Dim) -> Path:
    path = tmp_path / "model.pt2"
    save(export(CatOfTwo(), (torch.randn(1, 16, 8),), dynamic_shapes=({1: seq},)), str(path))
    return path


def test_a_bounded_dim_is_kept_and_the_program_runs_at_several_lengths(tmp_path) -> None:
    from executorch.runtime import Runtime

    path = _saved(tmp_path, Dim("seq", min=1, max=64))
    (shapes,) = load(str(path)).dynamic_shapes.values()
    assert shapes[0][1].max == 64
    planned = memplan.plan_model(str(path), "bestfit", check=True)
    assert planned.summary.at[0, "arena_bytes"] >= 64 * 8 * 4 * 2  # the cat at 64 rows, not at 16
    program = Runtime.get().load_program(planned.buffer)
    method = program.load_method("forward")
    for length in (16, 40, 64):
        x = torch.randn(1, length, 8)
        (y,) = method.execute([x])
        torch.testing.assert_close(y, CatOfTwo()(x))


def test_a_dim_without_an_upper_bound_is_refused_naming_it(tmp_path) -> None:
    path = _saved(tmp_path, Dim("seq"))
    with pytest.raises(ProgramSpecError, match="input 0 dimension 1 .* has no upper bound"):
        load(str(path))
