"""MLPerf Tiny (executorch.examples.models.mlperf_tiny) with random weights and BatchNorm stats."""

from __future__ import annotations

import torch

from memplan.experiments.zoo.models.common import (
    ZooModel,
    randomize_batchnorm,
    seeded,
    single_method,
    zoo_recipe,
)


def mlperf(kind: str, partitioner: str | None = None) -> ZooModel:
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
    with seeded():
        module = randomize_batchnorm(cls().eval())
        make = lambda: (torch.rand(*shape) * 2 - 1,)  # noqa: E731 (same as the example's inputs)
        name = kind if partitioner is None else f"{kind}_{partitioner}"
        if partitioner:
            desc += f", delegated to {partitioner.upper()}"
        tags = ("mlperf_tiny",) + ((partitioner,) if partitioner else ())
        return single_method(
            name,
            desc,
            module,
            make,
            partitioner=partitioner,
            **zoo_recipe(),
            atol=1e-3 if partitioner else 1e-4,
            rtol=1e-3 if partitioner else 1e-4,
            tags=tags,
        )
