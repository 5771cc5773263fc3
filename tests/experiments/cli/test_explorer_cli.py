"""`memplan report --model-explorer` and `memplan explore` from the command line: the files written,
the program they describe, and one-line errors (a bad file name, a port in use, the extra missing)."""

from __future__ import annotations

import json
import socket

from helpers.cli import run_cli


def test_report_writes_every_overlay_and_the_program_they_describe(tmp_path, capsys) -> None:
    from pte_adapter_model_explorer.main import PTEAdapter

    out = tmp_path / "seed.json"
    code, _, err = run_cli(
        ["report", "cat_seed", "--model-explorer", str(out), "--solver", "bestfit", "--time-limit", "2"],
        capsys,
    )
    assert code == 0, err
    files = [out] + [
        tmp_path / f"seed.{kind}.json" for kind in ("output", "peak", "levers", "saving_vs_stock")
    ]
    assert all(f.is_file() for f in files) and (tmp_path / "seed.pte").is_file()
    assert not (tmp_path / "seed.html").exists()  # no --out: no page
    assert "--node_data_paths=" in err and "--extensions=executorch_extension_model_explorer" in err
    (graph,) = [
        g for c in PTEAdapter().convert(str(tmp_path / "seed.pte"), {})["graphCollections"] for g in c.graphs
    ]
    live = json.loads(out.read_text())[graph.id]["results"]
    assert live and set(live) <= {n.id for n in graph.nodes}
    assert all(isinstance(v["value"], int) for v in live.values())


def test_report_needs_an_output_and_a_json_name(tmp_path, capsys) -> None:
    code, _, err = run_cli(["report", "cat_seed"], capsys)
    assert code == 2 and "--out FILE.html, --model-explorer FILE.json or both" in err
    code, _, err = run_cli(["report", "cat_seed", "--model-explorer", str(tmp_path / "x.txt")], capsys)
    assert code == 2 and "must end in .json" in err


def test_a_missing_extra_is_one_line_naming_it(monkeypatch, tmp_path, capsys) -> None:
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if "explorer" in name else real(name, *a)
    )
    for argv in (
        ["explore", "cat_seed"],
        ["report", "cat_seed", "--model-explorer", str(tmp_path / "x.json")],
    ):
        code, _, err = run_cli(argv, capsys)
        assert code == 2 and err.count("\n") == 1, err
        assert "pip install 'memplan[explorer]'" in err and "model_explorer" in err


def test_explore_refuses_a_port_in_use(capsys) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        code, _, err = run_cli(["explore", "cat_seed", "--port", str(port), "--no-browser"], capsys)
    assert code == 2 and f"--port {port}" in err and "in use" in err and err.count("\n") == 1


def test_explore_of_a_pte_keeps_its_file_name(tmp_path) -> None:
    """Model Explorer labels the graphs by the file: a .pte given is opened under its own name."""
    import memplan
    from memplan.experiments.cli.explore import program_file
    from memplan.experiments.cli.report import program_report

    pte = memplan.plan_model("cat_seed", "bestfit", time_limit_s=2, stock=False).save(tmp_path / "mine.pte")
    report = program_report(str(pte), "bestfit", 2.0, 16, True)
    folder = tmp_path / "served"
    folder.mkdir()
    written = program_file(report, str(pte), folder)
    assert written.name == "mine.pte" and written.read_bytes() == pte.read_bytes()
