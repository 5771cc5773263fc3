"""Small hand-written models built around `torch.cat`: the cat-fusion seeds, U-Net, DenseNet."""

from __future__ import annotations

import torch
from torch import nn

from memplan.experiments.zoo.models.common import (
    ZooModel,
    randomize_batchnorm,
    seeded,
    single_method,
    zoo_recipe,
)


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


def concat_model(name: str) -> ZooModel:
    with seeded():
        if name == "cat_seed":
            return single_method(
                name,
                "sigmoid(cat([cos(x), sin(x)]))",
                CatSeed(),
                lambda: (torch.randn(4, 16),),
                **zoo_recipe(),
            )
        if name == "unet":
            return single_method(
                name,
                "3-level U-Net, skip concatenations along channels, 1x3x32x32",
                UNet(),
                lambda: (torch.randn(1, 3, 32, 32),),
                tags=("concat",),
                **zoo_recipe(),
            )
        if name == "densenet_block":
            return single_method(
                name,
                "conv stem + DenseNet block (4 layers, growth 8): each layer concatenates "
                "all earlier feature maps along channels, 1x3x16x16",
                randomize_batchnorm(DenseNetStem().eval()),
                lambda: (torch.randn(1, 3, 16, 16),),
                tags=("concat",),
                **zoo_recipe(),
            )
    raise KeyError(name)
