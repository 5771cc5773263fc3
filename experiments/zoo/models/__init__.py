"""The model zoo's builders, one module per family; `memplan.experiments.zoo` is the catalog.

common    `ZooModel` (what a zoo entry carries) and the seeding/one-method helpers
mlperf    MLPerf Tiny models from ExecuTorch's examples
llama     ExecuTorch's Llama transformer with random weights
concat    small hand-written models built around `torch.cat` (U-Net, DenseNet)
stateful  multi-method programs sharing mutable buffers
hybrid    decode programs with state: Llama KV cache, Qwen3.5-style and LFM2-style hybrids
outside   programs of the kinds a new user brings (issue 31), for experiments/bench/outside_models.py
"""
