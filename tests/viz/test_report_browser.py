"""The report opened in a real browser (Debian's chromium, headless): it loads without console errors,
the chart draws, hovering a tensor shows its name and source line, the peak section lists the tensors
the plan has live at its peak, and the budget verdict is right both ways.

These tests need `chromium` and `chromium-driver` (apt-get); without them they fail, not skip.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from memplan.experiments.bench.browser import chromium, console_errors, open_page


class TwoBranchCat(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a, self.b = torch.nn.Linear(16, 32), torch.nn.Linear(16, 32)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        joined = torch.cat([self.a(x), self.b(x)], dim=0)  # the line the hover must show
        return joined.relu() * 2


@pytest.fixture(scope="module")
def planned():
    import memplan

    return memplan.plan_model(TwoBranchCat(), "bestfit", example_inputs=(torch.randn(4, 16),))


@pytest.fixture(scope="module")
def arena_bytes(planned) -> int:
    return sum(planned.program.executorch_program.execution_plan[0].non_const_buffer_sizes)


@pytest.fixture(scope="module")
def pages(planned, arena_bytes, tmp_path_factory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("report")
    return {
        "fits": planned.report(folder / "fits.html", budget=f"sram:{arena_bytes + 1000}B"),
        "fails": planned.report(folder / "fails.html", budget=f"sram:{arena_bytes - 100}B,dram:1MiB"),
    }


@pytest.fixture(scope="module")
def browser():
    with chromium() as driver:
        yield driver


@pytest.fixture(scope="module")
def fits_page(browser, pages):
    """The browser on the page that fits, loaded once for the tests that only read it (and hover)."""
    open_page(browser, pages["fits"])
    return browser


def test_the_page_loads_without_console_errors_and_draws_the_chart(fits_page, pages) -> None:
    browser = fits_page
    assert console_errors(browser) == []
    bars = browser.execute_script(
        "return document.querySelectorAll('#arena_forward .trace.bars .point path').length"
    )
    assert bars >= 2 * 6  # every planned tensor of both plans is a box
    # Offline and self-contained: no script is fetched, and the library is inlined once, in the head.
    assert browser.execute_script("return document.querySelectorAll('script[src]').length") == 0
    text = pages["fits"].read_text()
    assert text.count("plotly.js (basic - minified) v") == 1
    assert text.index("plotly.js (basic - minified)") < text.index("</head>")
    header = browser.find_element("css selector", "p.note").text
    for lever in ("cat fusion on", "state in place on", "slice no-ops on", "banks off", "tiling off"):
        assert lever in header


def test_hovering_a_tensor_shows_its_name_and_source_line(fits_page) -> None:
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.support.ui import WebDriverWait

    browser = fits_page
    box = browser.execute_script(
        """
        const gd = document.getElementById('arena_forward');
        for (const g of gd.querySelectorAll('g.trace.bars')) {
          const trace = g.__data__[0].trace;
          for (const p of g.querySelectorAll('g.point')) {
            if (trace.customdata[p.__data__.i][0] === 'aten_cat_default') return p.querySelector('path');
          }
        }
        return null;"""
    )
    assert box is not None
    ActionChains(browser).move_to_element(box).perform()
    text = WebDriverWait(browser, 10).until(
        lambda d: d.execute_script(
            "const h = document.querySelector('#arena_forward .hoverlayer .hovertext');"
            "return h ? h.textContent : null;"
        )
    )
    assert "aten_cat_default" in text
    assert "test_report_browser.py" in text and "torch.cat([self.a(x), self.b(x)], dim=0)" in text


def test_the_peak_section_lists_the_tensors_live_at_the_plans_peak(fits_page, planned) -> None:
    from selenium.webdriver.common.by import By

    from memplan import lower_bound

    problem = planned.results["forward"].problem
    roots = problem.roots()
    steps = sorted({b.start for b in roots})
    live = {s: [b for b in roots if b.start <= s < b.end] for s in steps}
    step = max(steps, key=lambda s: (sum(b.size for b in live[s]), -s))  # first step of the peak
    expected = [b.id for b in sorted(live[step], key=lambda b: (-b.size, b.id))]

    browser = fits_page
    rows = browser.find_elements(
        By.CSS_SELECTOR, "section.method[data-method='forward'] table.peak tr[data-tensor]"
    )
    assert [r.get_attribute("data-tensor") for r in rows] == expected
    summary = browser.find_element(By.CSS_SELECTOR, "section.method[data-method='forward'] .peak-summary")
    assert int(summary.get_attribute("data-peak")) == lower_bound(problem)
    cat_row = next(r for r in rows if r.get_attribute("data-tensor") == "aten_cat_default")
    assert "fused" in cat_row.text and "test_report_browser.py" in cat_row.text


def test_the_verdict_is_right_for_a_budget_that_fits_and_one_that_does_not(
    browser, pages, arena_bytes
) -> None:
    from selenium.webdriver.common.by import By

    open_page(browser, pages["fits"])
    (fits,) = browser.find_elements(By.CSS_SELECTOR, "li.verdict[data-bank='sram']")
    assert "fits" in fits.get_attribute("class").split()
    assert "1,000 B" in fits.text and "to spare" in fits.text

    open_page(browser, pages["fails"])
    sram = browser.find_element(By.CSS_SELECTOR, "li.verdict[data-bank='sram']")
    dram = browser.find_element(By.CSS_SELECTOR, "li.verdict[data-bank='dram']")
    assert "fails" in sram.get_attribute("class").split()
    assert "does not fit by 100 B" in sram.text and int(sram.get_attribute("data-needed")) == arena_bytes
    assert "smallest change: move" in sram.text and "to dram" in sram.text
    assert "fits" in dram.get_attribute("class").split()
    (note,) = browser.find_elements(By.CSS_SELECTOR, "p.first-bank")  # planned without a map: says so
    assert "every arena counts against the first bank, sram" in note.text


def test_a_plan_across_banks_draws_a_lane_per_bank_and_its_verdicts(browser, tmp_path) -> None:
    from selenium.webdriver.common.by import By

    import memplan

    banks = "sram:1KiB,dram:1MiB"
    planned = memplan.plan_model(
        TwoBranchCat(), "bestfit", example_inputs=(torch.randn(4, 16),), memory_map=banks
    )
    arenas = planned.results["forward"].plan.arena_sizes
    assert arenas[1] and arenas[2]  # the cat does not fit in sram with everything else
    open_page(browser, planned.report(tmp_path / "banks.html", budget=banks))
    assert console_errors(browser) == []
    lanes = browser.execute_script(
        "return document.getElementById('arena_forward').layout.annotations.map(a => a.text);"
    )
    assert "mem_id 1 · sram" in lanes and "mem_id 2 · dram" in lanes
    needed = {
        li.get_attribute("data-bank"): int(li.get_attribute("data-needed"))
        for li in browser.find_elements(By.CSS_SELECTOR, "li.verdict")
    }
    assert needed == {"sram": arenas[1], "dram": arenas[2]}
    assert not browser.find_elements(By.CSS_SELECTOR, "p.first-bank")  # the note is for plans without a map
