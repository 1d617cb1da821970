"""Open a Proctor HTML report in a real browser: Debian's headless ``chromium`` driven by
selenium through the ``chromedriver`` of the same package (scripts/setup.sh installs both;
nothing is downloaded). Used by the report's tests, ``bench/report.py`` and
``scripts/report_screenshot.py``."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

CHROMIUM, CHROMEDRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"

#: Every plot container of the page, whether it drew: its id, ``data-rendered`` and the
#: number of SVG shapes Plotly drew in it.
_PLOTS_JS = """return [...document.querySelectorAll('.plot')].map(p => [p.id,
  p.dataset.rendered === '1', p.querySelectorAll('svg.main-svg path, svg.main-svg rect').length])"""


@dataclass(frozen=True)
class Opened:
    """A report as the browser drew it: ``ready`` is the page's ``data-ready`` (``"1"``,
    ``"error"``, or None when it never finished); ``ready_ms`` the milliseconds from
    navigation to interactive (every plot drawn, the table filled); ``plots`` one
    ``(id, rendered, shapes)`` per plot; ``errors`` the console's SEVERE messages."""

    ready: str | None
    ready_ms: float | None
    plots: list[tuple[str, bool, int]]
    errors: list[str]


@contextmanager
def chromium(width: int = 1400, height: int = 1000) -> Iterator:
    """A headless Chromium session (a selenium WebDriver), quit on exit."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                f"--window-size={width},{height}", "--hide-scrollbars"):
        opts.add_argument(arg)
    opts.binary_location = CHROMIUM
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=opts)
    try:
        yield driver
    finally:
        driver.quit()


def console_errors(driver) -> list[str]:
    """The browser console's SEVERE messages since the last call."""
    return [e["message"] for e in driver.get_log("browser") if e["level"] == "SEVERE"]


def open_report(driver, path: Path, timeout_s: float = 60.0) -> Opened:
    """Load ``path`` (a report file) and wait until the page says it is ready (or
    ``timeout_s`` passes)."""
    driver.get(Path(path).resolve().as_uri())
    end = time.monotonic() + timeout_s
    ready = None
    while time.monotonic() < end:
        ready = driver.execute_script("return document.body && document.body.dataset.ready")
        if ready:
            break
        time.sleep(0.05)
    ready_ms = driver.execute_script("return window.proctorReadyMs ?? null")
    return Opened(ready, ready_ms, [tuple(p) for p in driver.execute_script(_PLOTS_JS)],
                  console_errors(driver))


def check_in_browser(report: Path, shots: Path, rollout_id: str,
                     expect_in_drill: list[str]) -> dict:
    """Open ``report`` in Chromium, check that every plot drew and nothing went to the
    console, open ``rollout_id``'s drill-down and check it shows ``expect_in_drill``;
    screenshots in ``shots``. Returns what the page showed (for more checks)."""
    from selenium.webdriver.common.by import By

    with chromium() as driver:
        opened = open_report(driver, report)
        assert opened.ready == "1", opened
        assert opened.plots and all(rendered and shapes > 0
                                    for _, rendered, shapes in opened.plots), opened.plots
        assert opened.errors == []
        driver.save_screenshot(str(shots / "overview.png"))
        rows = driver.find_elements(By.CSS_SELECTOR, "#rollout-table tbody tr")
        row = next(r for r in rows if r.find_element(By.TAG_NAME, "td").text == rollout_id)
        driver.execute_script("arguments[0].scrollIntoView()", row)
        row.click()
        drill = driver.find_element(By.ID, "drill").text
        for text in expect_in_drill:
            assert text in drill, (text, drill[:3000])
        driver.save_screenshot(str(shots / "drill.png"))
        shown = {
            "drill": drill,
            "notices": [n.text for n in driver.find_elements(By.CSS_SELECTOR, ".notice")],
            "sections": [s.get_attribute("id") for s in
                         driver.find_elements(By.CSS_SELECTOR, "main > section")],
            "plots": [p[0] for p in opened.plots],
        }
        # Filters: the verdict select narrows the table.
        driver.execute_script("const s = document.getElementById('filter-verdict');"
                              "s.value = '=violation'; s.dispatchEvent(new Event('input'));")
        shown["violation_rows"] = [
            r.find_element(By.TAG_NAME, "td").text
            for r in driver.find_elements(By.CSS_SELECTOR, "#rollout-table tbody tr")]
        # A task row opens its histogram.
        driver.find_element(By.CSS_SELECTOR, "#task-table tbody tr").click()
        shown["task_axis"] = driver.execute_script(
            "const p = document.getElementById('plot-rates');"
            "return [p.layout.xaxis.type, p.data[0].x]")
        shown["task_hist"] = driver.execute_script(
            "const p = document.getElementById('plot-task-hist');"
            "return p && p.querySelectorAll('svg.main-svg path').length")
        assert console_errors(driver) == []
    return shown
