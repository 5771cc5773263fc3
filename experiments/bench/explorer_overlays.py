"""Print, per zoo model, what memplan puts in Model Explorer and in a notebook cell, and how big it is.

    python -m memplan.experiments.bench.explorer_overlays                  # llama_decode, unet
    python -m memplan.experiments.bench.explorer_overlays --models llama_decode_xnnpack,encoder_decoder_cache

Columns, per method: instructions in the emitted program, those traced to a step of memplan's plan,
the live bytes at the node marked as the peak against the plan's peak, the stock plan's live bytes
there, the node data's size (five overlays, JSON), and the planned model's notebook HTML before (the
summary table alone) and after (the table plus an SVG of the live bytes per method). Sizes, not
times. Needs the explorer extra.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

import pandas as pd

from memplan.experiments import flags
from memplan.experiments.markdown import markdown

DEFAULT_MODELS = ("llama_decode", "unet")


def rows(name: str, solver: str, time_limit_s: float) -> list[dict]:
    import memplan
    from memplan.viz.model_explorer import method_facts, overlays

    planned = memplan.plan_model(name, solver, time_limit_s=time_limit_s)
    report = planned.report_data()
    node_data = sum(len(d.to_json_string()) for d in overlays(report).values())
    before = len(planned.summary.to_html(index=False))
    after = len(planned._repr_html_())
    found = []
    for method in report.methods:
        facts = method_facts(method)
        peak = next(f for f in facts.values() if f.peak)
        found.append(
            {
                "model": name,
                "method": method.method,
                "instructions": len(method.instructions),
                "traced": len(facts),
                "peak node live bytes": peak.live_bytes,
                "plan's peak": method.primary.peak()[0],
                "stock live bytes there": None
                if peak.saving is None
                else (peak.live_bytes or 0) + peak.saving,
                "node data bytes (program)": node_data,
                "notebook HTML bytes before": before,
                "notebook HTML bytes after": after,
            }
        )
    return found


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    flags.add_common(ap, models=DEFAULT_MODELS, cat_fusion=None, solvers=("bestfit",))
    args = ap.parse_args(argv)
    from memplan.viz.model_explorer import require_explorer

    require_explorer()
    found = []
    work = [(m, s) for m in flags.models_of(args) for s in flags.solvers_of(args)]
    with flags.library_warnings_silenced():
        for name, solver in flags.progress(work, len(work), "explorer_overlays", args.quiet):
            found += [{"solver": solver, **r} for r in rows(name, solver, args.time_limit)]
    print(markdown(pd.DataFrame(found)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
