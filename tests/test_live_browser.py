"""The dashboard in a real browser: Debian's headless Chromium, driven by Selenium through
chromium-driver, opens the live view of a running crawl, waits for the host table to fill
and the numbers to change, sorts and filters the table, and saves a screenshot (with
``TWOLEVEL_SCREENSHOT=path`` set, also there: the one in the docs was made so).

``scripts/test.sh`` installs ``chromium`` and ``chromium-driver`` when they are missing.
"""

from __future__ import annotations

import os
import shutil

import pytest
from crawl_helpers import live_url, start_live_crawl, stop_live_crawl

from scrapy_twolevel.testweb.browser import headless_chromium

pytestmark = pytest.mark.crawl


def test_the_dashboard_fills_updates_sorts_and_filters_in_chromium(tmp_path):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    # Long enough (200 pages a host, one at a time, 0.1 s each) that hosts still have
    # queues when the table is sorted, however slowly Chromium starts under load.
    proc, log, server = start_live_crawl(tmp_path, hosts=12, pages=200, response_delay=0.1)
    driver = None
    try:
        base, token = live_url(log)
        driver = headless_chromium(tmp_path / "chromium-profile")
        driver.get(f"{base}/?token={token}")
        wait = WebDriverWait(driver, 60, poll_frequency=0.2)

        def rows() -> list[list[str]]:
            # One snapshot in the page: the table is redrawn every refresh, so element
            # handles kept across calls go stale (a StaleElementReferenceException in CI).
            return driver.execute_script(
                "return Array.from(document.querySelectorAll('#table tbody tr'),"
                " r => Array.from(r.cells, c => c.innerText))"
            )

        def pages():
            return int(driver.find_element(By.ID, "pages").text or 0)

        wait.until(lambda _: len(rows()) >= 3)
        first = pages()
        wait.until(lambda _: pages() > first)  # it updates itself, no reload
        policy = driver.find_element(By.ID, "policy").text
        assert policy.startswith("crawl-capability (") and "alpha 0.8" in policy

        # Sort by queued requests, ascending (a click on the header; the first click sorts
        # descending, the second ascending).
        header = driver.find_element(By.CSS_SELECTOR, "th[data-key='queued']")
        header.click()
        header.click()
        column = list(header.find_element(By.XPATH, "..").find_elements(By.TAG_NAME, "th"))
        index = column.index(header)

        def queued():
            return [int(r[index] or 0) for r in rows()]

        values = queued()
        assert values == sorted(values) and len(values) >= 3

        # Filter: only the hosts in session.
        box = driver.find_element(By.ID, "filter")
        box.send_keys("in session")
        wait.until(lambda _: (snapshot := rows()) and all("in session" in r[1] for r in snapshot))
        box.clear()
        box.send_keys(" ")  # an input event: the table is drawn again, unfiltered
        wait.until(lambda _: any("in session" not in " ".join(r) for r in rows()))
        wait.until(lambda _: driver.execute_script("return series.length") >= 4)
        driver.save_screenshot(str(tmp_path / "dashboard.png"))
        assert (tmp_path / "dashboard.png").stat().st_size > 10_000
        if os.environ.get("TWOLEVEL_SCREENSHOT"):
            shutil.copy(tmp_path / "dashboard.png", os.environ["TWOLEVEL_SCREENSHOT"])
        assert driver.find_element(By.ID, "error").text == ""  # every refresh worked
    finally:
        if driver is not None:
            driver.quit()
        stop_live_crawl(proc, server)
