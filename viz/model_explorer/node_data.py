"""memplan's plan as Model Explorer node data, on the graph ExecuTorch's adapter draws for a `.pte`.

The adapter (`pte_adapter_model_explorer.builder.builder.PteGraphBuilder`, shipped by
`executorch-extension-model-explorer`) makes one graph per method, its id the execution plan's name,
and one node per instruction, `f"{method}_{chain}_{index}"`, next to the nodes `GraphInputs` and
`GraphOutputs`. Node data (`model_explorer.node_data_builder`) holds one value per node, so each
overlay is one file: the bytes live when the instruction runs, where its output sits, the peak, what
memplan did and the saving against the stock plan. Every figure is read off the report
(viz.report: its plans' live bytes, its per-tensor actions, its instructions' steps), not recomputed.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memplan.errors import UsageError
from memplan.viz.report.model import Instruction, MethodReport, PlanView, ProgramReport
from memplan.viz.style import format_bytes

EXTRA = "pip install 'memplan[explorer]'"
PACKAGES = ("model_explorer", "pte_adapter_model_explorer")
LIVE_BYTES = "memplan live bytes"  # the overlay `memplan explore` selects first
OVERLAYS = (LIVE_BYTES, "memplan output", "memplan peak", "memplan levers", "memplan saving vs stock")
PEAK_COLOUR = "#d7191c"
# Node data results are colour-graded white -> orange -> red over each graph's values.
_GRADIENT = (
    {"stop": 0, "bgColor": "#ffffff"},
    {"stop": 0.5, "bgColor": "#fdae61"},
    {"stop": 1, "bgColor": "#d7191c"},
)


def require_explorer() -> None:
    """Raise UsageError saying which extra to install unless Model Explorer and the adapter import."""
    missing = [p for p in PACKAGES if importlib.util.find_spec(p) is None]
    if missing:
        raise UsageError(f"Model Explorer is not installed ({', '.join(missing)} missing): {EXTRA}")


def node_id(method: str, instruction: Instruction) -> str:
    """The adapter's id of an instruction's node (PteGraphBuilder._build_instruction_nodes)."""
    return f"{method}_{instruction.chain}_{instruction.index}"


@dataclass(frozen=True)
class NodeFacts:
    """What one overlay's node shows, for every overlay; None where the node has nothing to show."""

    live_bytes: int | None
    output: str | None
    peak: bool
    levers: str | None
    saving: int | None


def method_facts(method: MethodReport) -> dict[str, NodeFacts]:
    """Node id -> its facts, for every instruction of `method` whose step in memplan's plan is known."""
    plan = method.primary
    stock = method.plans[1] if len(method.plans) > 1 and "stock" in method.plans[1].label else None
    known = [i for i in method.instructions if i.steps[0] is not None]
    live = plan.live_bytes([i.steps[0] for i in known])  # type: ignore[misc]
    stock_live = _stock_live(stock, known)
    most = max(live, default=0)
    peak_at = live.index(most) if live else -1
    facts = {}
    for n, (instruction, here) in enumerate(zip(known, live)):
        there = stock_live[n]
        facts[node_id(method.method, instruction)] = NodeFacts(
            live_bytes=here,
            output=_placement(plan, instruction.outputs),
            peak=n == peak_at,
            levers=_did(method, plan, instruction.outputs),
            saving=None if there is None else there - here,
        )
    return facts


def _stock_live(stock: PlanView | None, known: list[Instruction]) -> list[int | None]:
    if stock is None:
        return [None] * len(known)
    steps = [i.steps[1] if len(i.steps) > 1 else None for i in known]
    live = iter(stock.live_bytes([s for s in steps if s is not None]))
    return [None if s is None else next(live) for s in steps]


def _placement(plan: PlanView, outputs: tuple[str, ...]) -> str | None:
    """ "mem_id 1 @ 4,096: 8,192 B" per output tensor (the arena's lane name when it has one)."""
    said = []
    for name in outputs:
        if name in plan.offsets:
            mem_id, offset = plan.offsets[name]
            said.append(f"{name}: {plan.lane(mem_id)} @ {offset:,}, {plan.tensors[name].nbytes:,} B")
    return "; ".join(said) or None


def _did(method: MethodReport, plan: PlanView, outputs: tuple[str, ...]) -> str | None:
    """What memplan did to the node's outputs: the report's words, and the bank when not the first."""
    said = [a for name in outputs for a in method.actions.get(name, [])]
    for name in outputs:
        if name in plan.offsets and _bank_of(plan, plan.offsets[name][0]):
            said.append(f"{name} placed in bank {_bank_of(plan, plan.offsets[name][0])}")
    return "; ".join(said) or None


def _bank_of(plan: PlanView, mem_id: int) -> str:
    """The bank a lane names ("mem_id 2 · dram" -> "dram") when it is not the plan's first lane."""
    lane = plan.lanes.get(mem_id, "")
    first = min(plan.lanes, default=mem_id)
    return lane.split(" · ", 1)[1] if " · " in lane and mem_id != first else ""


def overlays(report: ProgramReport) -> dict[str, Any]:
    """Overlay name -> its node data (`model_explorer.node_data_builder.ModelNodeData`, one graph per
    method), `LIVE_BYTES` first."""
    facts = {m.method: method_facts(m) for m in report.methods}
    return {
        LIVE_BYTES: _node_data(facts, lambda f: f.live_bytes, gradient=True),
        "memplan output": _node_data(facts, lambda f: f.output),
        "memplan peak": _node_data(facts, _peak_words, peak_colour=True),
        "memplan levers": _node_data(facts, lambda f: f.levers),
        "memplan saving vs stock": _node_data(facts, lambda f: f.saving, gradient=True),
    }


def _peak_words(f: NodeFacts) -> str | None:
    return f"peak: {f.live_bytes:,} B live ({format_bytes(f.live_bytes or 0)})" if f.peak else None


def _node_data(
    facts: dict[str, dict[str, NodeFacts]],
    value: Callable[[NodeFacts], object],
    gradient: bool = False,
    peak_colour: bool = False,
) -> Any:
    """One overlay: `value` of every node that has one; numbers graded, the peak red if asked."""
    from model_explorer import node_data_builder as ndb

    graphs = {}
    for method, nodes in facts.items():
        results = {
            nid: ndb.NodeDataResult(value=v, bgColor=PEAK_COLOUR if peak_colour else None)  # type: ignore[arg-type]
            for nid, f in nodes.items()
            if (v := value(f)) is not None
        }
        graphs[method] = ndb.GraphNodeData(
            results=results, gradient=[ndb.GradientItem(**g) for g in _GRADIENT] if gradient else []
        )
    return ndb.ModelNodeData(graphsData=graphs)


def write_overlays(report: ProgramReport, out: Path) -> list[Path]:
    """Write every overlay: `out` holds the live bytes, `out`'s stem + ".output.json" etc. the others
    (Model Explorer names a run loaded from a file by the file's name)."""
    written = []
    for name, data in overlays(report).items():
        path = (
            out
            if name == LIVE_BYTES
            else out.with_name(f"{out.stem}.{name.split(' ', 1)[1].replace(' ', '_')}.json")
        )
        data.save_to_file(str(path))
        written.append(path)
    return written
