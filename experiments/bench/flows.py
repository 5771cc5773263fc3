"""memplan inside flows nobody here wrote: bytes saved per transformers architecture and per ExecuTorch
export script, and the time `memplan run` adds to a flow.

    python -m memplan.experiments.bench.flows [--architectures llama,bert,...] [--backends xnnpack,portable]
        [--flows "export_llama xnnpack,..."] [--overhead] [--solver cpsat] [--time-limit 5]

Table 1, per transformers architecture (tiny random-weight configs, experiments.flows.hf) and backend:
the methods, ExecuTorch's bytes and memplan's (`sum(non_const_buffer_sizes)`, from the stock program
built from the same edge program and from memplan's), the saving, whether both programs give
bit-identical outputs over three calls in `executorch.runtime`, the planning seconds of memplan's pass,
or why the architecture does not export. Table 2, the same for ExecuTorch's export scripts
(`export_llama` with a small params JSON, the wheel's XNNPACK example exporters; experiments.flows.
executorch_flows). Table 3 (`--overhead`): each flow run once bare (`python -m ...` / `python
script.py`) and once as `memplan run ...`, each in its own process, wall seconds and their ratio.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from memplan.experiments import flags as script_args
from memplan.experiments.markdown import StreamedTable, markdown

COLUMNS = (
    "architecture",
    "kind",
    "backend",
    "methods",
    "stock_bytes",
    "memplan_bytes",
    "saving",
    "outputs_equal",
    "planning_seconds",
    "export_seconds",
    "error",
)
FLOW_COLUMNS = (
    "flow",
    "methods",
    "stock_bytes",
    "memplan_bytes",
    "saving",
    "outputs_equal",
    "planning_seconds",
    "planned_by",
)


def architecture_rows(
    names: Sequence[str], backends: Sequence[str], solver: str, time_limit: float
) -> list[dict]:
    from memplan.experiments.flows import hf

    table = StreamedTable(COLUMNS)
    rows = []
    for name in names:
        for backend in backends:
            outcome = hf.export(hf.ARCHITECTURES[name], backend, solver, time_limit_s=time_limit)
            row: dict = {
                "architecture": name,
                "kind": hf.ARCHITECTURES[name].kind,
                "backend": backend,
                "export_seconds": outcome.seconds,
                "error": outcome.error,
            }
            if not outcome.error:
                program = outcome.program
                total = program.rows()[-1]
                row.update(
                    methods=", ".join(m.method for m in program.methods),
                    stock_bytes=total["stock_bytes"],
                    memplan_bytes=total["memplan_bytes"],
                    saving=total["saving"],
                    outputs_equal=hf.compare(outcome),
                    planning_seconds=sum(m.seconds for m in program.methods),
                )
            table.row([row.get(c) for c in COLUMNS])
            rows.append(row)
    return rows


def flow_rows(names: Sequence[str], solver: str, time_limit: float) -> list[dict]:
    from memplan.experiments.flows import executorch_flows as flows

    table = StreamedTable(FLOW_COLUMNS)
    rows = []
    for name in names:
        flow = flows.FLOWS[name]
        with tempfile.TemporaryDirectory() as out:
            run = flows.run_module(flow, Path(out), solver, time_limit_s=time_limit)
        for program in run.programs:
            total = program.rows()[-1]
            row = {
                "flow": name,
                "methods": ", ".join(m.method for m in program.methods),
                "stock_bytes": total["stock_bytes"],
                "memplan_bytes": total["memplan_bytes"],
                "saving": total["saving"],
                "outputs_equal": flows.same_outputs(
                    program.program, program.stock_program, flows.inputs_of(flow, 3)
                ),
                "planning_seconds": sum(m.seconds for m in program.methods),
                "planned_by": "; ".join(
                    sorted({m.planner + (f": {m.note}" if m.note else "") for m in program.methods})
                ),
            }
            table.row([row[c] for c in FLOW_COLUMNS])
            rows.append(row)
    return rows


HF_SCRIPT = """
import sys
from memplan.experiments.flows import hf
from memplan.planner.substitute.hf import register_portable_backend
from transformers.exporters.exporter_executorch import ExecutorchExporter
from transformers.exporters.configs import ExecutorchConfig
model, inputs = hf.ARCHITECTURES[sys.argv[1]].build()
exported = ExecutorchExporter().export(model, inputs, ExecutorchConfig(backend="xnnpack"))
exported.save_pretrained(sys.argv[2])
"""


def overhead_rows(architecture: str, solver: str, time_limit: float) -> list[dict]:
    """One bare run and one `memplan run` of export_llama (XNNPACK) and of a transformers export."""
    from memplan.experiments.flows import executorch_flows as flows

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        flows.write_params(out)
        script = out / "hf_export.py"
        script.write_text(HF_SCRIPT)
        llama = flows.FLOWS["export_llama xnnpack"]
        llama_args = [a.replace("{out}", str(out)) for a in llama.args]
        memplan = [
            sys.executable,
            "-m",
            "memplan.experiments.cli.main",
            "run",
            "--solver",
            solver,
            "--time-limit",
            str(time_limit),
        ]
        cases = {
            "export_llama xnnpack": (
                [sys.executable, "-m", llama.module, *llama_args],
                [*memplan, "-m", llama.module, *llama_args],
            ),
            f"transformers {architecture} xnnpack": (
                [sys.executable, str(script), architecture, str(out / "bare")],
                [*memplan, "--", str(script), architecture, str(out / "memplan")],
            ),
        }
        for name, (bare, planned) in cases.items():
            bare_s, planned_s = _seconds(bare), _seconds(planned)
            rows.append(
                {
                    "flow": name,
                    "bare_seconds": bare_s,
                    "memplan_run_seconds": planned_s,
                    "memplan_over_bare": planned_s / bare_s,
                }
            )
    return rows


def _seconds(command: list[str]) -> float:
    start = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode:
        raise SystemExit(f"{' '.join(command)} failed ({done.returncode}):\n{done.stderr[-2000:]}")
    return time.perf_counter() - start


def main(argv: Sequence[str] | None = None) -> int:
    from memplan.experiments.flows import executorch_flows, hf

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--architectures", default=",".join(hf.ARCHITECTURES), help="comma list (default: all)")
    ap.add_argument("--backends", default="xnnpack,portable", help="comma list (default: %(default)s)")
    ap.add_argument("--flows", default=",".join(executorch_flows.FLOWS), help="comma list (default: all)")
    ap.add_argument("--solver", default="cpsat")
    ap.add_argument("--overhead", action="store_true", help="also time bare runs against memplan run")
    ap.add_argument("--overhead-architecture", default="whisper", help="the transformers model timed")
    script_args.add_time_limit(ap)
    args = ap.parse_args(argv)
    pick = lambda text: [t for t in text.split(",") if t]  # noqa: E731
    with script_args.library_warnings_silenced():
        if pick(args.architectures):
            architecture_rows(pick(args.architectures), pick(args.backends), args.solver, args.time_limit)
        if pick(args.flows):
            print()
            flow_rows(pick(args.flows), args.solver, args.time_limit)
        if args.overhead:
            print()
            print(
                markdown(
                    pd.DataFrame(overhead_rows(args.overhead_architecture, args.solver, args.time_limit))
                )
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
