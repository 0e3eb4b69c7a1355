"""The example project's :class:`~scrapy_twolevel.testweb.extension.EmbeddedTestWeb`
without a crawl: its settings (one table, validated, documented), its JOBDIR state file
and its summary (the crawls: test_example_project.py)."""

from __future__ import annotations

import json
import re
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
    EmbeddedTestWeb,
    TestWebSettings,
    load_state,
)
from scrapy_twolevel.testweb.server import TestWebServer
from scrapy_twolevel.testweb.web import generate_web

pytestmark = pytest.mark.glue

DOCS = Path(__file__).parents[1] / "docs" / "testweb.rst"


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
