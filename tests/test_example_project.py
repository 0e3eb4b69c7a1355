"""The README's main job: `scrapy crawl testweb` in example_project, as a user runs it."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

PROJECT = Path(__file__).parents[1] / "example_project"


def test_scrapy_crawl_in_example_project_ends_with_a_summary():
    scrapy = Path(sys.executable).with_name("scrapy")
    proc = subprocess.run(
        [
            str(scrapy),
            "crawl",
            "testweb",
            "-s",
            "TWOLEVEL_TESTWEB_HOSTS=6",
            "-s",
            "TWOLEVEL_TESTWEB_PAGES_PER_HOST=8",
            "-s",
            "LOG_LEVEL=WARNING",
        ],
        cwd=PROJECT,
        capture_output=True,
        text=True,
        timeout=120,
        env=dict(os.environ),
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = proc.stdout
    assert "policy:           crawl-capability" in out
    assert re.search(r"pages fetched:\s+48 of 48 reachable, on 6 hosts", out), out
    assert re.search(r"quality gathered: [\d.]+ of [\d.]+ \(100%\)", out), out
    assert "most concurrent requests to one host: 1" in out
    assert out.rstrip().endswith("to one host: 1")  # the summary comes last
