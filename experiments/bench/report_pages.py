"""Report page sizes on three programs: a small CNN, a 16-layer decoder and a 1,000-tensor graph.

    python -m memplan.experiments.bench.report_pages [--solver bestfit] [--keep DIR]

Each program is planned with `memplan.plan_model` next to the stock pass and written as `memplan
report`'s page; the table gives the page's bytes, the bytes of plotting library it inlines (every
`<script>` without a figure in it) and the figure data. The decoder is ExecuTorch's Llama Transformer
(16 layers, dim 64, decode one token, random weights) lowered as a user's model is: plain `to_edge`,
without ConvertToLinearPass or constant folding. The 1,000-tensor graph is a chain of 500 scaled
ReLUs, two planned tensors per link.
"""

from __future__ import annotations

import argparse
import dataclasses
import re
import tempfile
from pathlib import Path

import torch

from memplan.experiments.markdown import markdown
from memplan.experiments.zoo import ZooModel

_SCRIPT = re.compile(r"<script[^>]*>(.*?)</script>", re.S)


class LongChain(torch.nn.Module):
    """`links` times x = relu(x * 1.01): a graph of about 2 x `links` planned tensors."""

    def __init__(self, links: int) -> None:
        super().__init__()
        self.links = links

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for _ in range(self.links):
            x = torch.relu(x * 1.01)
        return x


def programs() -> dict[str, ZooModel]:
    from memplan.experiments.zoo import get
    from memplan.experiments.zoo.models.llama import llama
    from memplan.experiments.zoo.programs import from_module, with_lowering

    decoder = llama(n_layers=16, prefill_tokens=1, kv_cache=True, name="decoder_16_layers")
    return {
        "unet (small CNN)": get("unet"),
        "decoder, 16 layers (plain to_edge)": with_lowering(decoder, convert_linear=False, const_prop=False),
        "chain of 500 ReLUs (1,000 tensors)": dataclasses.replace(
            from_module(LongChain(500), (torch.randn(1, 64),)), name="long_chain"
        ),
    }


def page_row(label: str, model: ZooModel, solver: str, folder: Path) -> dict:
    from memplan.experiments.planning import plan_model

    planned = plan_model(model, solver)
    page = planned.report(folder / f"{model.name}.html")
    text = page.read_text(encoding="utf-8")
    library = sum(len(s) for s in _SCRIPT.findall(text) if "Plotly.newPlot" not in s)
    data = planned.report_data().methods[0]
    return {
        "program": label,
        "tensors (memplan / stock)": f"{len(data.plans[0].tensors):,} / {len(data.plans[-1].tensors):,}",
        "page B": page.stat().st_size,
        "plotting library B": library,
        "rest of the page B": page.stat().st_size - library,
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--solver", default="bestfit", help="quick: the page, not the solver, is measured")
    parser.add_argument("--keep", help="write the pages into this folder (default: a temporary one)")
    args = parser.parse_args(argv)
    folder = Path(args.keep) if args.keep else Path(tempfile.mkdtemp())
    folder.mkdir(parents=True, exist_ok=True)
    import pandas as pd

    rows = [page_row(label, model, args.solver, folder) for label, model in programs().items()]
    print(markdown(pd.DataFrame(rows)))
    print(f"pages: {folder}")


if __name__ == "__main__":
    main()
