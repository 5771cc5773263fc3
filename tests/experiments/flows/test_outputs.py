"""The flows' comparison of memplan's program with the stock program: bit for bit, and finite."""

import torch

from memplan.experiments.flows.outputs import finite, identical, identical_and_finite


def test_a_nan_in_both_programs_is_not_a_match():
    nan = torch.tensor([1.0, float("nan")])
    assert not identical_and_finite([nan.clone()], [nan.clone()])
    assert not identical_and_finite([torch.tensor([float("inf")])], [torch.tensor([float("inf")])])


def test_identical_means_same_shape_dtype_and_bits():
    a = torch.arange(4.0)
    assert identical_and_finite([a, torch.tensor([3])], [a.clone(), torch.tensor([3])])
    assert not identical(a, a.to(torch.float64)) and not identical(a, a.reshape(2, 2))
    assert not identical_and_finite([a + 1e-7], [a]) and not identical_and_finite([a], [a, a])
    assert finite(torch.tensor([1, 2])) and finite("not a tensor")
