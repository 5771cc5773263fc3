"""Debian's chromium, headless, driven by Selenium through Debian's chromedriver (no browser download).

Used by the report's browser tests and by bench.report_scale (load time). `.ci/run` installs
`chromium` and `chromium-driver` with apt-get; without them `chromium()` raises, saying what to
install, so the tests fail rather than skip. Selenium comes with the test extras.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--window-size=1500,1100",
)
# No host name resolves but the loopback address: a page that loads under these flags needs no network.
OFFLINE = ("--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",)


@contextmanager
def chromium(*extra_flags: str) -> Iterator:
    """A headless chromium WebDriver with a fresh profile, its console log readable; `extra_flags` are
    added to FLAGS (e.g. OFFLINE)."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    for path in (CHROMIUM, CHROMEDRIVER):
        if not Path(path).exists():
            raise RuntimeError(f"{path} is missing: apt-get install -y chromium chromium-driver")
    profile = tempfile.mkdtemp(prefix="memplan-chromium-")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in FLAGS + extra_flags:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={profile}")
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


def open_page(driver, path: Path, timeout: float = 60) -> float:
    """Load `path` and wait until every plotly figure has drawn; returns the seconds taken."""
    import time

    from selenium.webdriver.support.ui import WebDriverWait

    began = time.perf_counter()
    driver.get(path.resolve().as_uri())
    WebDriverWait(driver, timeout).until(
        lambda d: d.execute_script(
            "const g = document.querySelectorAll('.plotly-graph-div');"
            "return g.length > 0 && [...g].every(e => e._fullLayout && e.querySelector('.main-svg'));"
        )
    )
    return time.perf_counter() - began


def console_errors(driver) -> list[str]:
    return [e["message"] for e in driver.get_log("browser") if e["level"] == "SEVERE"]
