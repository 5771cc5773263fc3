"""memplan's Model Explorer node data against the graph ExecuTorch's own adapter builds of the same
`.pte`: every node id it names exists there, every instruction is traced to memplan's plan, and the
node marked as the peak holds the plan's peak live bytes. Every zoo model is checked.

The adapter and Model Explorer come with the `explorer` extra; without them these tests fail, naming
what to install.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from memplan.experiments.zoo import catalog
from memplan.viz.model_explorer import LIVE_BYTES, OVERLAYS, method_facts, overlays

INSTRUCTION = re.compile(r".+_\d+_\d+$")


def adapter_graphs(pte: Path) -> dict[str, set[str]]:
    """Graph id -> node ids, as ExecuTorch's Model Explorer adapter builds them from `pte`."""
    from pte_adapter_model_explorer.main import PTEAdapter

    collections = PTEAdapter().convert(str(pte), {})["graphCollections"]
    return {g.id: {n.id for n in g.nodes} for c in collections for g in c.graphs}


def check_against_adapter(report, pte: Path) -> None:
    graphs = adapter_graphs(pte)
    data = {name: json.loads(d.to_json_string()) for name, d in overlays(report).items()}
    assert list(data) == list(OVERLAYS)
    for name, by_graph in data.items():
        for graph, node_data in by_graph.items():
            unknown = set(node_data["results"]) - graphs[graph]
            assert not unknown, f"{name}: nodes not in the adapter's graph {graph!r}: {sorted(unknown)[:5]}"
    for method in report.methods:
        instructions = {
            n for n in graphs[method.method] if INSTRUCTION.match(n) and n.startswith(method.method)
        }
        live = data[LIVE_BYTES][method.method]["results"]
        assert set(live) == instructions, f"{method.method}: instructions without live bytes"
        facts = method_facts(method)
        (peak,) = [nid for nid, f in facts.items() if f.peak]
        assert live[peak]["value"] == method.primary.peak()[0]
        assert max(v["value"] for v in live.values()) == method.primary.peak()[0]
        peak_words = data["memplan peak"][method.method]["results"]
        assert list(peak_words) == [peak] and f"{method.primary.peak()[0]:,} B" in peak_words[peak]["value"]


@pytest.mark.parametrize("name", catalog.names())
def test_node_data_fits_the_adapters_graph_for_every_zoo_model(name: str, tmp_path: Path) -> None:
    import memplan

    planned = memplan.plan_model(name, "bestfit", time_limit_s=2)
    pte = planned.save(tmp_path / f"{name}.pte")
    check_against_adapter(planned.report_data(), pte)


def test_node_data_of_a_pte_file_fits_the_adapters_graph(tmp_path: Path) -> None:
    """A `.pte` alone (memplan report FILE.pte): the file's own layout, steps = instruction indices."""
    import memplan
    from memplan.experiments.cli.report import program_report

    pte = memplan.plan_model("unet", "bestfit", time_limit_s=2, stock=False).save(tmp_path / "unet.pte")
    check_against_adapter(program_report(str(pte), "bestfit", 2.0, 16, True), pte)


def test_overlays_say_what_memplan_did_where_it_did_it() -> None:
    """U-Net: the convolutions that write into a fused cat say so, and the saving is stock's live bytes
    minus memplan's at the same node."""
    import memplan

    report = memplan.plan_model("unet", "bestfit", time_limit_s=2).report_data()
    (method,) = report.methods
    facts = method_facts(method)
    by_node = {i.node: i for i in method.instructions}
    assert facts and all(i.node for i in method.instructions)  # every instruction traced to its node
    fused = [f.levers for f in facts.values() if f.levers and "inside the output of cat" in f.levers]
    assert len(fused) >= 2
    memplan_plan, stock = method.plans
    for nid, f in facts.items():
        (instruction,) = [i for i in by_node.values() if f"_{i.chain}_{i.index}" == nid[len("forward") :]]
        here, there = instruction.steps
        assert f.live_bytes == memplan_plan.live_bytes([here])[0]
        assert f.saving == stock.live_bytes([there])[0] - f.live_bytes
        for name in instruction.outputs:
            mem_id, offset = memplan_plan.offsets[name]
            assert f"{name}: mem_id {mem_id} @ {offset:,}, " in (f.output or "")


def test_a_plan_across_banks_says_which_bank_each_output_went_to() -> None:
    import memplan

    planned = memplan.plan_model("ds_cnn", "bestfit", time_limit_s=2, memory_map="sram:16KiB,dram:16MiB")
    (method,) = planned.report_data().methods
    plan = method.primary
    for facts, instruction in zip(method_facts(method).values(), method.instructions):
        in_dram = [n for n in instruction.outputs if plan.offsets[n][0] == 2]
        assert (facts.levers is not None and "placed in bank dram" in facts.levers) == bool(in_dram)
        for name in in_dram:
            assert f"{name}: mem_id 2 · dram @ " in (facts.output or "")
