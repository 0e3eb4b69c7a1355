"""Debian's headless Chromium driven by Selenium: how the tests open the live view's
dashboard (``tests/test_live_browser.py``; the archived ``live_view.py`` study did too).

Needs the ``chromium`` and ``chromium-driver`` packages (``scripts/test.sh`` installs them)
and ``selenium`` (the test and bench extras). Imported only by those who drive a browser.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

#: As root, no sandbox; no background connections (the machine's network is closed, and
#: Chromium's own lookups would fail at every start).
CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--window-size=1400,1000",
)


def headless_chromium(profile: Path) -> Any:
    """A Selenium driver of a new headless Chromium whose profile is ``profile`` (a fresh
    directory: nothing carries over between runs). The caller quits it."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium") or "/usr/bin/chromium"
    for flag in CHROMIUM_FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={profile}")
    # The console's messages, errors included, for driver.get_log("browser").
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = shutil.which("chromedriver") or "/usr/bin/chromedriver"
    return webdriver.Chrome(options=options, service=Service(executable_path=driver))
