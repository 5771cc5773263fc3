"""Programs of the kinds a new user brings, not shaped for memplan (issue 31's trial of 11 models).

Each builder returns a `ZooModel` with random weights and a call sequence of several calls, lowered
as a user would lower it: plain `to_edge` (or XNNPACK), none of the zoo's recipe. `MODELS` lists them
in the issue's order; `experiments/bench/outside_models.py` plans each with `PlannerPass()`, the stock
pass and `memplan replan`. `hf` needs the `hf` extra (transformers).

state    BART-like encode + decode sharing caches; GRU / LSTM / short-conv state
hf       transformers' Llama with a static cache (2 and 16 layers), transformers' ViT on XNNPACK
vision   U-Net of Inception blocks; int8 CNN (XNNPACK quantizer, pt2e)
shapes   dynamic sequence length, chunk/split/narrow + cat, torch.cond, zero-size tensors
"""

from __future__ import annotations

from collections.abc import Callable

from memplan.experiments.zoo.models.common import ZooModel
from memplan.experiments.zoo.models.outside.hf import hf_llama, hf_vit
from memplan.experiments.zoo.models.outside.shapes import cond_gate, dynamic_sequence, split_merge, zero_size
from memplan.experiments.zoo.models.outside.state import bart_like, recurrent_state
from memplan.experiments.zoo.models.outside.vision import inception_unet, int8_cnn

# The order; names are the `--models` of experiments/bench/outside_models.py.
MODELS: dict[str, Callable[[], ZooModel]] = {
    "bart_like": bart_like,
    "hf_llama_2l": lambda: hf_llama(2),
    "hf_llama_16l": lambda: hf_llama(16),
    "inception_unet": inception_unet,
    "recurrent_state": recurrent_state,
    "hf_vit_xnnpack": hf_vit,
    "dynamic_sequence": dynamic_sequence,
    "chunk_split_narrow_cat": split_merge,
    "torch_cond": cond_gate,
    "int8_cnn_xnnpack": int8_cnn,
    "zero_size": zero_size,
}
