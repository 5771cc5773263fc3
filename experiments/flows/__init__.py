"""Export flows nobody here wrote, run under `memplan.substituted`: transformers' ExecuTorch exporter on
tiny random-weight architectures (hf), ExecuTorch's `export_llama` and its example exporters (executorch_flows).
Shared by the tests and the benchmark scripts."""
