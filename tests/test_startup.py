"""Start-up failures in a real ``scrapy crawl``: one clear message, last, and no cascade.

Each case runs the example project's crawl in a subprocess, as a user would, and reads
what the terminal shows.
"""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest
import scrapy
from crawl_helpers import CASCADE, last_line

pytestmark = pytest.mark.crawl

PROJECT = Path(__file__).parents[1] / "example_project"
SMALL_WEB = ["-s", "TWOLEVEL_TESTWEB_HOSTS=3", "-s", "TWOLEVEL_TESTWEB_PAGES_PER_HOST=3"]


def scrapy_crawl(*args: str) -> subprocess.CompletedProcess[str]:
    scrapy = Path(sys.executable).with_name("scrapy")
    return subprocess.run(
        [str(scrapy), "crawl", "testweb", *SMALL_WEB, *args],
        cwd=PROJECT,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["-s", "TWOLEVEL_QUALITY=no.such.func"],
            "SettingsError: TWOLEVEL_QUALITY='no.such.func' cannot be imported",
        ),
        (
            ["-s", "TWOLEVEL_MAX_OPEN_HOSTS=2.5"],
            "SettingsError: TWOLEVEL_MAX_OPEN_HOSTS='2.5' is not an integer",
        ),
        (
            ["-s", "TWOLEVEL_IDLE_TIMEOUT=inf"],
            "SettingsError: TWOLEVEL_IDLE_TIMEOUT='inf' is not finite",
        ),
        (
            ["-s", "TWOLEVEL_SEEN_MODE=fast"],
            "SettingsError: TWOLEVEL_SEEN_MODE='fast' is not valid; use one of: exact, bloom-only",
        ),
        (
            ["-s", "TWOLEVEL_REDIS_URL=http://127.0.0.1:6379"],
            "SettingsError: TWOLEVEL_REDIS_URL='http://127.0.0.1:6379' is not valid",
        ),
        (
            ["-s", "TWOLEVEL_REDIS_URL=redis://127.0.0.1:1/0"],
            "SettingsError: Cannot reach Redis at TWOLEVEL_REDIS_URL='redis://127.0.0.1:1/0'",
        ),
        (
            [
                "-s",
                "TWOLEVEL_REDIS_URL=redis://127.0.0.1:6379/0",
                "-s",
                "DUPEFILTER_CLASS=scrapy.dupefilters.RFPDupeFilter",
            ],
            "SettingsError: TWOLEVEL_REDIS_URL needs the seen cache",
        ),
        (
            ["-s", "TWOLEVEL_HOST_KEY=ip"],
            "SettingsError: TWOLEVEL_HOST_KEY='ip' was removed: a URL's host is chosen as it",
        ),
        (
            ["-s", 'TWOLEVEL_TOPICS={"news": {"slice": 0}}'],
            "SettingsError: TWOLEVEL_TOPICS is not valid: topic 'news': slice=0 is not valid",
        ),
    ],
    ids=[
        "quality-import",
        "not-an-integer",
        "not-finite",
        "seen-mode",
        "redis-url",
        "redis-unreachable",
        "redis-needs-seen-cache",
        "redis-ip-host-key",
        "topics-invalid",
    ],
)
def test_settings_error_is_the_one_message(args, message):
    proc = scrapy_crawl(*args)
    assert proc.returncode != 0
    assert message in last_line(proc.stderr)
    assert not any(word in proc.stderr for word in CASCADE), proc.stderr[-3000:]
    assert "Spider opened" not in proc.stderr  # stopped before anything started


def test_corrupt_jobdir_is_named_once_and_left_untouched(tmp_path):
    state = tmp_path / "job" / "twolevel"
    state.mkdir(parents=True)
    frontier = state / "frontier.sqlite3"
    frontier.write_bytes(b"not a database " * 100)
    with socket.socket() as probe:  # a free port for the demo's test web
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    proc = scrapy_crawl("-s", f"JOBDIR={tmp_path / 'job'}", "-s", f"TWOLEVEL_TESTWEB_PORT={port}")
    assert proc.returncode != 0
    assert f"StateError: {frontier} is not a scrapy_twolevel state file" in last_line(proc.stderr)
    assert not any(word in proc.stderr for word in CASCADE), proc.stderr[-3000:]
    assert frontier.read_bytes() == b"not a database " * 100


def test_metrics_policy_without_the_middleware_ends_with_the_line_to_add():
    """Without the middleware nothing runs before the scheduler is built, so Scrapy's own
    clean-up logs errors first; the message with the fix must still come last."""
    proc = scrapy_crawl("-s", "DOWNLOADER_MIDDLEWARES={}")
    # Scrapy 2.13 exits 0 when opening the spider fails (its spider exists, so
    # bootstrap_failed stays False); 2.14+ exits 1.
    assert proc.returncode != 0 or scrapy.version_info < (2, 14)
    tail = "\n".join(proc.stderr.splitlines()[-3:])
    assert "needs the host metrics middleware" in tail
    assert '"scrapy_twolevel.middleware.HostMetricsMiddleware": 950' in tail
    assert "Engine slot not assigned" not in proc.stderr
    assert "DispatcherKeyError" not in proc.stderr


def test_misspelled_setting_is_warned_with_the_closest_name():
    proc = scrapy_crawl("-s", "TWOLEVEL_POLCY=breadth-first", "-s", "LOG_LEVEL=WARNING")
    assert proc.returncode == 0, proc.stderr[-3000:]
    warnings = [line for line in proc.stderr.splitlines() if "TWOLEVEL_POLCY" in line]
    assert len(warnings) == 1
    assert "did you mean TWOLEVEL_POLICY?" in warnings[0]


def test_topics_without_their_middleware_name_it():
    proc = scrapy_crawl("-s", 'TWOLEVEL_TOPICS={"news": {}}')
    assert proc.returncode != 0
    tail = proc.stderr[-600:]
    assert "TWOLEVEL_TOPICS needs the topic middleware" in tail
    assert '"scrapy_twolevel.topics.TopicMiddleware": 960' in tail
    assert not any(word in proc.stderr for word in CASCADE), proc.stderr[-3000:]
