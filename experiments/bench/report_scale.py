"""The interactive report at LLM scale: file size and load time in headless chromium.

    python -m memplan.experiments.bench.report_scale --layers 20

Plans a Llama prefill (ExecuTorch's Transformer, random weights, small dim) with memplan and the
stock pass, writes `memplan report`'s page, and opens it in Debian's chromium (bench.browser): the
seconds from navigation until every figure has drawn, and the time a hover takes to show. Prints a
Markdown table. The issue's bar: a 20-layer prefill report under 15 MB, interactive in a browser.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from memplan.experiments.markdown import markdown


def measure(layers: int, dim: int, tokens: int, solver: str, out: Path) -> dict:

    from memplan.experiments.bench.browser import chromium, console_errors, open_page
    from memplan.experiments.planning import plan_model
    from memplan.experiments.zoo.models.llama import llama

    model = llama(n_layers=layers, dim=dim, seq_len=2 * tokens, prefill_tokens=tokens)
    began = time.perf_counter()
    planned = plan_model(model, solver)
    plan_s = time.perf_counter() - began
    began = time.perf_counter()
    data = planned.report_data()
    page = planned.report(out, budget="sram:256KiB,dram:8MiB")
    write_s = time.perf_counter() - began
    with chromium() as driver:
        load_s = open_page(driver, page, timeout=300)
        errors = console_errors(driver)
        hover_s = _hover_seconds(driver)
    method = data.methods[0]
    return {
        "model": f"llama prefill, {layers} layers, dim {dim}, {tokens} tokens",
        "tensors (memplan / stock)": f"{len(method.plans[0].tensors):,} / {len(method.plans[-1].tensors):,}",
        "arena memplan B": method.plans[0].arena_bytes,
        "arena stock B": method.plans[-1].arena_bytes,
        "plan s": round(plan_s, 1),
        "report write s": round(write_s, 2),
        "report MB": round(page.stat().st_size / 1e6, 2),
        "load s (all figures drawn)": round(load_s, 2),
        "hover s": round(hover_s, 2),
        "console errors": len(errors),
    }


def _hover_seconds(driver) -> float:
    """Seconds from moving the mouse onto the largest box until its hover label shows."""
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.support.ui import WebDriverWait

    box = driver.execute_script(
        "const d = document.querySelector('[id^=arena_]'); d.scrollIntoView();"
        "const area = p => { const b = p.getBoundingClientRect(); return b.width * b.height; };"
        "return [...d.querySelectorAll('.trace.bars .point path')].reduce((a, p) => area(p) > area(a) ? p : a);"
    )
    began = time.perf_counter()
    ActionChains(driver).move_to_element(box).perform()
    WebDriverWait(driver, 60).until(
        lambda d: d.execute_script("return !!document.querySelector('.hovertext')")
    )
    return time.perf_counter() - began


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, default=20)
    parser.add_argument("--dim", type=int, default=64)
    parser.add_argument("--tokens", type=int, default=32)
    parser.add_argument("--solver", default="bestfit", help="quick: the report, not the solver, is measured")
    parser.add_argument("--out", help="keep the page here (default: a temporary file)")
    args = parser.parse_args(argv)
    out = Path(args.out) if args.out else Path(tempfile.mkdtemp()) / "report.html"
    row = measure(args.layers, args.dim, args.tokens, args.solver, out)
    import pandas as pd

    print(markdown(pd.DataFrame([row])))
    print(f"page: {out}")


if __name__ == "__main__":
    main()
