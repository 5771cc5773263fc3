"""The tiling benchmark's CNNs have torchvision's layouts: their parameter counts equal torchvision's
(the published counts of its builders; MobileNetV2 at width 0.35, which torchvision ships no weights
for, counted here by hand from torchvision's channel table)."""

from __future__ import annotations

import pytest

from memplan.errors import UsageError
from memplan.experiments.zoo.models.vision import VISION, vision_module

TORCHVISION = {
    "mobilenet_v2_100_224": 3_504_872,  # torchvision.models.mobilenet_v2()
    "mobilenet_v3_large_224": 5_483_032,
    "mobilenet_v3_small_224": 2_542_856,
    "mnasnet_b1_224": 4_383_312,  # mnasnet1_0
    "mnasnet_b1_128": 4_383_312,
    "resnet18_128": 11_689_512,
}


def _conv_bn(cin: int, cout: int, kernel: int, groups: int = 1) -> int:
    return cout * (cin // groups) * kernel * kernel + 2 * cout  # bias-free conv, BN weight and bias


def _mobilenet_v2_035() -> int:
    """torchvision's mobilenet_v2(width_mult=0.35) counted from its table, channels rounded by hand:
    stem 32 * 0.35 -> 16; stages 16, 24, 32, 64, 96, 160, 320 -> 8, 8, 16, 24, 32, 56, 112; last 1280."""
    stages = ((1, 8, 1), (6, 8, 2), (6, 16, 3), (6, 24, 4), (6, 32, 3), (6, 56, 3), (6, 112, 1))
    total, cin = _conv_bn(3, 16, 3), 16
    for expand, cout, repeats in stages:
        for _ in range(repeats):
            hidden = cin * expand
            total += 0 if expand == 1 else _conv_bn(cin, hidden, 1)
            total += _conv_bn(hidden, hidden, 3, hidden) + _conv_bn(hidden, cout, 1)
            cin = cout
    return total + _conv_bn(cin, 1280, 1) + 1280 * 1000 + 1000


def _parameters(name: str) -> int:
    model, _ = vision_module(name)
    return sum(p.numel() for p in model.parameters())


@pytest.mark.parametrize("name", sorted(TORCHVISION))
def test_parameter_count_equals_torchvision(name: str) -> None:
    assert _parameters(name) == TORCHVISION[name]


def test_mobilenet_v2_035_parameter_count_equals_the_hand_count() -> None:
    assert _parameters("mobilenet_v2_035_144") == _mobilenet_v2_035() == 1_677_128


def test_every_model_has_its_resolution() -> None:
    for name, (_, _, size) in VISION.items():
        _, (image,) = vision_module(name)
        assert image.shape == (1, 3, size, size), name


def test_an_unknown_model_is_named() -> None:
    with pytest.raises(UsageError, match="no vision model 'mobilenet_v9'"):
        vision_module("mobilenet_v9")
