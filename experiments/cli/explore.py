"""`memplan explore PROGRAM`: Google's Model Explorer on the program, memplan's overlays loaded.

The program is the one `memplan report` describes (a model planned by memplan, or the `.pte` given),
written to a temporary folder and opened with ExecuTorch's adapter (`executorch-extension-model-explorer`);
the overlays are viz.model_explorer's node data, passed to Model Explorer's own local server in its
config (`model_explorer.config().add_node_data`), the live bytes selected; the command names the node
where they peak. The server serves its web
app from the installed package, so the page needs no network; the version check the server makes
against the package index on start and on the page's request is switched off, so nothing leaves the
machine.
"""

from __future__ import annotations

import signal
import socket
import tempfile
from pathlib import Path
from typing import Any

from memplan.errors import UsageError
from memplan.viz.model_explorer import LIVE_BYTES, method_facts, overlays, require_explorer
from memplan.viz.report.model import ProgramReport

EXTENSION = "executorch_extension_model_explorer"  # ExecuTorch's adapters: .pte, ETRecord, ETDump
ADAPTER_ID = "pte_adapter_model_explorer"  # the one of them that reads a .pte


def program_file(report: ProgramReport, spec: str, folder: Path) -> Path:
    """The program the report describes, written into `folder` under its own name (a `.pte` given
    keeps its file name, a model gets MODEL.pte): Model Explorer labels the graphs by it."""
    if not report.pte:
        raise UsageError(f"{spec}: the report holds no built program to open in Model Explorer")
    name = Path(spec).name if spec.endswith(".pte") else f"{Path(report.name).name}.pte"
    path = folder / name
    path.write_bytes(report.pte)
    return path


def explorer_config(pte: Path, report: ProgramReport) -> Any:
    """Model Explorer's config: the program through ExecuTorch's adapter, then every overlay, the live
    bytes last (the web app selects the run added last)."""
    import model_explorer

    config = model_explorer.config().add_model_from_path(str(pte), adapterId=ADAPTER_ID)
    for name, data in sorted(overlays(report).items(), key=lambda item: item[0] == LIVE_BYTES):
        config.add_node_data(name=name, node_data=data)
    return config


def peak_node(report: ProgramReport) -> tuple[str, str]:
    """(method, node id) of the instruction where the method with the most bytes live at once peaks."""
    best: tuple[int, str, str] = (-1, "", "")
    for m in report.methods:
        for nid, facts in method_facts(m).items():
            if facts.peak and (facts.live_bytes or 0) > best[0]:
                best = (facts.live_bytes or 0, m.method, nid)
    if not best[1]:
        raise UsageError(f"{report.name}: no instruction of any method could be traced to memplan's plan")
    return best[1], best[2]


def check_port(host: str, port: int) -> None:
    """A one-line error when the port is taken (Model Explorer itself exits, or moves on from 8080)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        if s.connect_ex((host, port)) == 0:
            raise UsageError(f"--port {port}: {host}:{port} is in use; choose another port")


def _no_version_check() -> None:
    """Model Explorer's server asks the package index for a newer release when it starts and when the
    page asks (`server._check_new_version`); answer "none known" without asking."""
    from model_explorer import server

    def none_known(print_msg: bool = True) -> dict[str, str]:
        return {"version": "", "runningVersion": "", "releaseUrl": "", "desktopAppUrl": ""}

    server._check_new_version = none_known  # type: ignore[attr-defined]


def explore(report: ProgramReport, spec: str, host: str, port: int, open_browser: bool) -> None:
    """Serve Model Explorer on host:port with the program and memplan's overlays until Ctrl+C (or a
    SIGTERM); prints the page's address."""
    require_explorer()
    check_port(host, port)
    import model_explorer

    _no_version_check()
    signal.signal(signal.SIGTERM, _interrupt)  # Model Explorer stops on KeyboardInterrupt
    method, node = peak_node(report)
    peak = report.method(method).primary.peak()[0]
    print(
        f"memplan: {method} peaks at node {node}: {peak:,} B live (red in the overlay memplan peak)",
        flush=True,
    )
    with tempfile.TemporaryDirectory(prefix="memplan-explore-") as folder:
        pte = program_file(report, spec, Path(folder))
        model_explorer.visualize_from_config(
            explorer_config(pte, report),
            host=host,
            port=port,
            extensions=[EXTENSION],
            no_open_in_browser=not open_browser,
        )


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt
