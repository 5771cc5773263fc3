"""`memplan explore` in a real browser: Model Explorer's own server, started by the command on a free
port of 127.0.0.1, shows the zoo's Llama decode and U-Net with memplan's overlays applied, offline.

Chromium runs with every host name but 127.0.0.1 unresolvable (browser.OFFLINE), so the page cannot
fetch anything from outside. The live-bytes overlay must be the selected one; the node memplan marks
as the peak, selected through Model Explorer's embedding command (`model-explorer-select-node-by-node-id`),
must show the plan's peak live bytes in the side panel. Needs `chromium`, `chromium-driver` (apt-get) and the `explorer` extra; without
them the tests fail, not skip.
"""

from __future__ import annotations

import os
import queue
import re
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from memplan.experiments.bench.browser import OFFLINE, chromium

MEMPLAN = str(Path(sys.executable).with_name("memplan"))
URL = re.compile(r"http://127\.0\.0\.1:\d+/\?data=\S+")
START_TIMEOUT_S = 900  # the command plans the model (and the stock lowering) before serving
PAGE_TIMEOUT_S = 180
FONT_HOST = "https://fonts.gstatic.com/"
SOFTWARE_WEBGL = ("--enable-unsafe-swiftshader",)  # Model Explorer draws with WebGL; headless has no GPU


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def explore(model: str) -> Iterator[str]:
    """`memplan explore MODEL` running; yields the page's address; stops it with SIGTERM after."""
    command = [MEMPLAN, "explore", model, "--solver", "bestfit", "--time-limit", "2", "--no-browser"]
    command += ["--port", str(free_port())]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(target=lambda: [lines.put(line) for line in proc.stdout or []], daemon=True).start()
    seen = []
    try:
        while True:
            try:
                line = lines.get(timeout=START_TIMEOUT_S)
            except queue.Empty:
                pytest.fail(f"memplan explore {model} printed no address in {START_TIMEOUT_S} s: {seen[-5:]}")
            seen.append(line)
            if match := URL.search(line):
                break
            assert proc.poll() is None, f"memplan explore {model} ended: {''.join(seen[-10:])}"
        yield match.group(0)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
    assert proc.returncode == 0, "".join(seen[-10:])


def side_panel(driver) -> dict[str, str]:
    """The side panel's key/value rows (node info, node data providers), by key; {} while the page is
    too busy laying out the graph to answer a script."""
    from selenium.common.exceptions import TimeoutException

    try:
        rows = driver.execute_script(
            "return [...document.querySelectorAll('tr')].map(r => [...r.querySelectorAll('td')].map(td =>"
            " (td.querySelector('.one-line-text') || td).textContent.trim())).filter(c => c.length == 2);"
        )
    except TimeoutException:
        return {}
    return {key: value for key, value in rows}


def selected_run(driver) -> str:
    found = driver.execute_script(
        "const e = document.querySelector('.index-row.selected .run-name'); return e && e.textContent.trim();"
    )
    return found or ""


def select_node(driver, node: str) -> bool:
    """Ask the page to select `node` (Model Explorer's embedding command, handled by its app) and say
    whether the side panel now shows it."""
    driver.execute_script(
        "window.postMessage({cmd: 'model-explorer-select-node-by-node-id', nodeId: arguments[0]}, '*');", node
    )
    return side_panel(driver).get("id") == node


@pytest.mark.parametrize("model", ["llama_decode", "unet"])
def test_explore_shows_the_overlay_at_the_peak_node_offline(model: str) -> None:
    import memplan
    from memplan.experiments.cli.explore import peak_node
    from memplan.viz.model_explorer import LIVE_BYTES
    from memplan.viz.style import format_bytes

    report = memplan.plan_model(model, "bestfit", time_limit_s=2).report_data()
    method, node = peak_node(report)
    peak_bytes = report.method(method).primary.peak()[0]
    from selenium.webdriver.support.ui import WebDriverWait

    with explore(model) as url, chromium(*OFFLINE, *SOFTWARE_WEBGL) as driver:
        driver.set_script_timeout(PAGE_TIMEOUT_S)  # laying out the graph keeps the page busy
        driver.get(url)
        WebDriverWait(driver, PAGE_TIMEOUT_S).until(lambda d: selected_run(d))
        assert selected_run(driver) == LIVE_BYTES  # the graph is coloured by memplan's live bytes
        WebDriverWait(driver, PAGE_TIMEOUT_S, poll_frequency=2).until(lambda d: select_node(d, node))
        panel = side_panel(driver)
        assert panel["namespace"] == method
        assert panel[LIVE_BYTES] == str(peak_bytes)  # the overlay's value for the node at the peak
        assert panel["memplan peak"] == f"peak: {peak_bytes:,} B live ({format_bytes(peak_bytes)})"
        assert "mem_id" in panel["memplan output"]
        failed = [e["message"] for e in driver.get_log("browser") if e["level"] == "SEVERE"]
        # The web app's CSS names Google's font host first; offline the local copy is used instead.
        assert not [m for m in failed if not m.startswith(FONT_HOST)], failed
