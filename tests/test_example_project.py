"""The README's main job: `scrapy crawl testweb` in example_project, as a user runs it.

Also the :class:`~scrapy_twolevel.testweb.extension.EmbeddedTestWeb` the project uses: its
settings, its JOBDIR state file, and a real interrupted-then-resumed crawl.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from scrapy.settings import Settings
from scrapy.statscollectors import MemoryStatsCollector
from scrapy.utils.test import get_crawler

from scrapy_twolevel.testweb.extension import (
    DEFAULTS,
    STATE_FILE,
    STATE_FORMAT,
    SUMMARY_FORMAT,
    EmbeddedTestWeb,
    TestWebSettings,
    load_state,
)
from scrapy_twolevel.testweb.server import TestWebServer
from scrapy_twolevel.testweb.web import generate_web

PROJECT = Path(__file__).parents[1] / "example_project"
DOCS = Path(__file__).parents[1] / "docs" / "testweb.rst"
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


# -- the extension's settings, JOBDIR state and summary, without a crawl -----------------------


def test_settings_defaults_come_from_one_table() -> None:
    config = TestWebSettings.from_settings(Settings())
    assert config == TestWebSettings(
        hosts=DEFAULTS["TWOLEVEL_TESTWEB_HOSTS"],
        pages_per_host=DEFAULTS["TWOLEVEL_TESTWEB_PAGES_PER_HOST"],
        seed=DEFAULTS["TWOLEVEL_TESTWEB_SEED"],
        delay_scale=DEFAULTS["TWOLEVEL_TESTWEB_DELAY_SCALE"],
        port=DEFAULTS["TWOLEVEL_TESTWEB_PORT"],
        summary_file=DEFAULTS["TWOLEVEL_TESTWEB_SUMMARY_FILE"],
    )


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("TWOLEVEL_TESTWEB_HOSTS", 0, r"TWOLEVEL_TESTWEB_HOSTS must be an integer >= 1, got 0"),
        ("TWOLEVEL_TESTWEB_HOSTS", "many", r"TWOLEVEL_TESTWEB_HOSTS must be .* got 'many'"),
        ("TWOLEVEL_TESTWEB_PAGES_PER_HOST", -3, r"PAGES_PER_HOST must be an integer >= 1"),
        ("TWOLEVEL_TESTWEB_SEED", "x", r"TWOLEVEL_TESTWEB_SEED must be an integer, got 'x'"),
        ("TWOLEVEL_TESTWEB_DELAY_SCALE", -0.5, r"DELAY_SCALE must be a number >= 0, got -0.5"),
        ("TWOLEVEL_TESTWEB_PORT", 70000, r"TWOLEVEL_TESTWEB_PORT must be .*0\.\.65535"),
        ("TWOLEVEL_TESTWEB_SUMMARY_FILE", 3, r"SUMMARY_FILE must be a file path"),
    ],
)
def test_invalid_settings_name_the_setting_and_the_rule(
    name: str, value: Any, message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        TestWebSettings.from_settings(Settings({name: value}))


def test_every_setting_is_documented() -> None:
    docs = DOCS.read_text()
    for name, default in DEFAULTS.items():
        row = rf"\* - ``{name}``\n\s+- ``{re.escape(repr(default))}``\n"
        assert re.search(row, docs), f"{name} and its default {default!r} in {DOCS.name}"


def _state(**changes: Any) -> dict[str, Any]:
    config = TestWebSettings.from_settings(Settings())
    return {
        "format": STATE_FORMAT,
        "port": 45678,
        "web": config.web_identity(),
        "runs": [],
        **changes,
    }


def test_state_round_trip_and_new_job(tmp_path: Path) -> None:
    config = TestWebSettings.from_settings(Settings())
    path = tmp_path / STATE_FILE
    assert load_state(path, config) is None
    path.write_text(json.dumps(_state()))
    assert load_state(path, config) == _state()


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{not json", r"is corrupt \(not JSON"),
        ("[1, 2]", r"has format None, expected 'scrapy_twolevel\.testweb-state/1'"),
        (json.dumps(_state(format="other/9")), r"has format 'other/9'.*another version"),
        (json.dumps(_state(port="80")), r"is corrupt \(bad 'port' or 'runs'\)"),
        (
            json.dumps(_state(web={"hosts": 5, "pages_per_host": 30, "seed": 0})),
            r"TWOLEVEL_TESTWEB_HOSTS=5.*but this run asks for 20, 30, 0",
        ),
    ],
)
def test_unusable_state_says_what_happened(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / STATE_FILE
    path.write_text(text)
    with pytest.raises(ValueError, match=message) as info:
        load_state(path, TestWebSettings.from_settings(Settings()))
    assert f"delete {tmp_path}" in str(info.value)


def test_a_fixed_port_must_match_the_stored_one(tmp_path: Path) -> None:
    path = tmp_path / STATE_FILE
    path.write_text(json.dumps(_state()))
    config = TestWebSettings.from_settings(Settings({"TWOLEVEL_TESTWEB_PORT": 45679}))
    with pytest.raises(ValueError, match=r"TWOLEVEL_TESTWEB_PORT=45679, but .* port 45678"):
        load_state(path, config)


def test_summary_adds_runs_and_counts_refetches_across_them() -> None:
    """Page 1 fetched in an earlier run and twice in this one: 2 re-fetches of 1 page."""
    config = TestWebSettings.from_settings(Settings({"TWOLEVEL_TESTWEB_HOSTS": 2}))
    server = TestWebServer(generate_web(2, 3, seed=0))
    stats = MemoryStatsCollector(get_crawler())
    run: dict[str, Any] = {
        "finished": True,
        "reason": "finished",
        "elapsed": 2.0,
        "fetch_counts": {},
        "failed_requests": 0,
        "non200_responses": {},
        "error_log_lines": 0,
        "connections_accepted": 3,
        "connections_unused": 0,
        "connections_inferred": 3,
        "max_concurrent_requests_per_host": 1,
        "time_to_80": None,
    }
    earlier = {**run, "reason": "shutdown", "fetch_counts": {"0": 1, "1": 1}}
    killed = {"finished": False}
    this = {**run, "fetch_counts": {"1": 2, "2": 1}, "non200_responses": {"404": 2}}
    ext = EmbeddedTestWeb(server, stats, previous={"runs": [earlier, killed]}, config=config)
    summary = ext._summarise(this)
    assert (summary["runs"], summary["unrecorded_runs"]) == (2, 1)
    assert (summary["pages_fetched"], summary["pages_fetched_this_run"]) == (3, 2)
    assert (summary["fetches"], summary["refetches"], summary["refetched_pages"]) == (5, 2, 1)
    assert (summary["elapsed"], summary["connections_accepted"]) == (4.0, 6)
    text = ext._render(summary)
    assert "re-fetches:       2 (1 page served more than once)" in text
    assert "2 non-200 responses (2 x 404)" in text
    assert "1 earlier run(s) killed before recording their pages" in text
