"""The README's main job: `scrapy crawl testweb` in example_project, as a user runs it.

Also the :class:`~scrapy_twolevel.testweb.extension.EmbeddedTestWeb` the project uses in a
real interrupted-then-resumed crawl (its settings, JOBDIR state file and summary without a
crawl: test_testweb_extension.py).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from scrapy_twolevel.testweb.extension import (
    STATE_FILE,
    STATE_FORMAT,
    SUMMARY_FORMAT,
)

pytestmark = pytest.mark.crawl

PROJECT = Path(__file__).parents[1] / "example_project"
SMALL_WEB = ["-s", "TWOLEVEL_TESTWEB_HOSTS=6", "-s", "TWOLEVEL_TESTWEB_PAGES_PER_HOST=8"]


def scrapy_crawl(
    *args: str, timeout: float = 120, spider: str = "testweb"
) -> subprocess.CompletedProcess[str]:
    """``scrapy crawl testweb ARGS`` in the example project, as ``scripts/demo.sh`` runs it."""
    scrapy = Path(sys.executable).with_name("scrapy")
    return subprocess.run(
        [str(scrapy), "crawl", spider, "-s", "LOG_LEVEL=WARNING", *args],
        cwd=PROJECT,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=dict(os.environ),
    )


def test_scrapy_crawl_in_example_project_ends_with_a_summary(tmp_path: Path) -> None:
    summary_file = tmp_path / "summary.json"
    proc = scrapy_crawl(*SMALL_WEB, "-s", f"TWOLEVEL_TESTWEB_SUMMARY_FILE={summary_file}")
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = proc.stdout
    assert "policy:           crawl-capability" in out
    assert re.search(r"pages fetched:\s+48 of 48 reachable, on 6 hosts\n", out), out
    assert "re-fetches:       0\n" in out
    assert "errors:           0 failed requests, 0 non-200 responses, 0 ERROR log lines" in out
    assert re.search(r"quality gathered: [\d.]+ of [\d.]+ \(100%\)", out), out
    assert re.search(r"connections:      \d+ \(server\); \d+ by the middleware", out), out
    assert out.rstrip().endswith("most concurrent requests to one host: 1")  # comes last
    summary = json.loads(summary_file.read_text())
    assert summary["format"] == SUMMARY_FORMAT
    assert (summary["pages_fetched"], summary["fetches"], summary["refetches"]) == (48, 48, 0)
    assert summary["runs"] == 1 and summary["jobdir"] is None
    assert f"connections:      {summary['connections_accepted']} (server)" in out


def test_topics_demo_splits_the_crawl_into_its_three_topics(tmp_path: Path) -> None:
    summary_file = tmp_path / "summary.json"
    proc = scrapy_crawl(
        *SMALL_WEB,
        "-s",
        f"TWOLEVEL_TESTWEB_SUMMARY_FILE={summary_file}",
        "-s",
        "LOG_LEVEL=INFO",
        spider="topics",
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads(summary_file.read_text())
    assert (summary["pages_fetched"], summary["refetches"]) == (48, 0)
    pages = {
        topic: int(re.search(rf"'twolevel/topic/{topic}/pages': (\d+)", proc.stderr).group(1))
        for topic in ("news", "daily", "reference", "default")
    }
    assert sum(pages.values()) == 48 and pages["default"] == 0
    assert all(pages[t] > 0 for t in ("news", "daily", "reference")), pages


def test_interrupted_demo_resumes_on_the_same_port_and_fetches_each_page_once(
    tmp_path: Path,
) -> None:
    """The README's recipe: run with a JOBDIR, stop early (gracefully), run again."""
    jobdir = tmp_path / "job"
    first_file, second_file = tmp_path / "first.json", tmp_path / "second.json"
    common = [*SMALL_WEB, "-s", f"JOBDIR={jobdir}", "-s", "CONCURRENT_REQUESTS=2"]

    first = scrapy_crawl(
        *common,
        "-s",
        "CLOSESPIDER_ITEMCOUNT=10",
        "-s",
        f"TWOLEVEL_TESTWEB_SUMMARY_FILE={first_file}",
    )
    assert first.returncode == 0, first.stderr[-3000:]
    one = json.loads(first_file.read_text())
    assert one["reason"] == "closespider_itemcount"
    assert 10 <= one["pages_fetched"] < one["reachable"] == 48

    second = scrapy_crawl(*common, "-s", f"TWOLEVEL_TESTWEB_SUMMARY_FILE={second_file}")
    assert second.returncode == 0, second.stderr[-3000:]
    two = json.loads(second_file.read_text())
    assert two["port"] == one["port"]
    assert "Connection refused" not in second.stderr
    assert two["this_run"]["failed_requests"] == 0
    assert two["reason"] == "finished"
    assert (two["runs"], two["unrecorded_runs"]) == (2, 0)
    # Every page exactly once over both runs, by the server's own per-page counts.
    assert (two["pages_fetched"], two["fetches"], two["refetches"]) == (48, 48, 0)
    assert two["pages_fetched_this_run"] == 48 - one["pages_fetched"]
    assert re.search(
        r"pages fetched:\s+48 of 48 reachable, on 6 hosts \(\d+ this run; 2 ", second.stdout
    )

    state = json.loads((jobdir / STATE_FILE).read_text())
    assert state["format"] == STATE_FORMAT and state["port"] == one["port"]
    assert [r["reason"] for r in state["runs"]] == ["closespider_itemcount", "finished"]


def test_a_corrupt_state_file_stops_the_crawl_with_a_clear_error(tmp_path: Path) -> None:
    jobdir = tmp_path / "job"
    jobdir.mkdir()
    (jobdir / STATE_FILE).write_text('{"format": ')
    proc = scrapy_crawl(*SMALL_WEB, "-s", f"JOBDIR={jobdir}", timeout=60)
    assert proc.returncode != 0
    assert f"{jobdir / STATE_FILE} is corrupt" in proc.stderr
    assert "Spider opened" not in proc.stderr


def test_failed_requests_are_counted_not_hidden(tmp_path: Path) -> None:
    """A seed nobody listens on: the summary shows the failure and no page."""
    summary_file = tmp_path / "summary.json"
    proc = scrapy_crawl(
        *SMALL_WEB,
        "-s",
        "TWOLEVEL_TESTWEB_SEEDS=http://127.0.0.1:9/",  # discard port: refused
        "-s",
        "RETRY_ENABLED=False",
        "-s",
        f"TWOLEVEL_TESTWEB_SUMMARY_FILE={summary_file}",
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads(summary_file.read_text())
    assert (summary["failed_requests"], summary["error_log_lines"]) == (1, 1)
    assert summary["pages_fetched"] == 0
    assert "errors:           1 failed requests, 0 non-200 responses, 1 ERROR log lines" in (
        proc.stdout
    )
