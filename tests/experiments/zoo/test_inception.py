"""Inception-v3 as torchvision lays it out (experiments/zoo/models/inception.py), without torchvision."""

from __future__ import annotations

import torch

from memplan.experiments.zoo.models.inception import InceptionV3, inception_v3


def test_inception_v3_has_torchvisions_parameters_without_the_aux_classifier():
    # torchvision's 27,161,264 less its AuxLogits (conv 768->128 1x1 98,304 + bn 256, conv 128->768 5x5
    # 2,457,600 + bn 1,536, fc 768->1000 769,000: 3,326,696), which `inception_v3(aux_logits=False)` drops.
    assert sum(p.numel() for p in InceptionV3().parameters()) == 27_161_264 - 3_326_696


def test_inception_v3_ends_every_block_in_a_cat_and_classifies_its_smallest_input():
    model = inception_v3(75)
    module, (example,) = model.methods["forward"]
    assert example.shape == (1, 3, 75, 75)
    assert module(example).shape == (1, 1000)
    graph = torch.export.export(module, (example,)).graph
    cats = [n for n in graph.nodes if n.target is torch.ops.aten.cat.default]
    assert len(cats) == 3 + 1 + 4 + 1 + 2 * 3  # A x3, B, C x4, D, E x2 (each E has three)
