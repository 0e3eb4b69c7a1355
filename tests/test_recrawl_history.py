"""The recrawl history file, the planner clock, the news site, and the recrawl settings."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from scrapy import Request

from scrapy_twolevel.config import RecrawlConfig, SettingsError
from scrapy_twolevel.errors import StateError
from scrapy_twolevel.glue.seed_planner import make_clock, seed_key_of
from scrapy_twolevel.meta import SEED as SEED_META
from scrapy_twolevel.recrawl.clock import ScaledClock
from scrapy_twolevel.recrawl.planner import Plan
from scrapy_twolevel.recrawl.publish_time import extract_publish_time
from scrapy_twolevel.storage.recrawl_history import FORMAT, HistoryStore
from scrapy_twolevel.testweb.news import NewsSite, Section, parse_sections

pytestmark = pytest.mark.unit


def test_history_round_trip_and_midpoint_events(tmp_path: Path) -> None:
    path = tmp_path / "h.sqlite3"
    h = HistoryStore(path)
    h.record_fetch("s/a", 1000.0, 2)
    h.record_fetch("s/a", 2000.0, 1)
    assert h.record_article("http://s/a/1", "s/a", 2000.0, 1000.0)
    assert not h.record_article("http://s/a/1", "s/a", 3000.0, 2000.0)  # first sighting kept
    assert h.record_article("http://s/a/2", "s/a", 2000.0, 1000.0)
    assert h.record_article("http://s/a/3", "s/a", 2000.0, None)  # the seed's first fetch
    assert h.record_article("http://s/a/4", "s/a", 9000.0, 2000.0)  # fetches 2 h apart
    assert h.record_published("http://s/a/2", 1234.5)
    assert not h.record_published("http://unknown", 1.0)
    h.save_plan(Plan("s/a", 5000.0, b"req"))
    h.save_plan(Plan("s/a", 6000.0, b"req2"))  # replaces
    h.close()

    h = HistoryStore(path)
    events = list(h.events())  # in the order the articles were found
    # Midpoint of the two fetches 1000 and 2000; the page's own time; unknown without a
    # previous fetch; unknown when the fetches are an hour or more apart.
    assert events == [("s/a", 1500.0), ("s/a", 1234.5), ("s/a", None), ("s/a", None)]
    assert h.fetches() == [("s/a", 1000.0, 2), ("s/a", 2000.0, 1)]
    assert h.fetches(since=1500.0) == [("s/a", 2000.0, 1)]
    assert h.last_fetch("s/a") == 2000.0
    assert h.last_fetch("other") is None
    assert h.plans() == [Plan("s/a", 6000.0, b"req2")]
    assert h.counts() == {"fetches": 2, "articles": 4, "plans": 1}
    assert h.clear_plans() == 1
    assert h.plans() == []
    h.close()


def test_history_uncommitted_writes_are_lost_on_a_kill_committed_ones_are_not(
    tmp_path: Path,
) -> None:
    path = tmp_path / "h.sqlite3"
    h = HistoryStore(path)
    h.record_fetch("s", 1.0, 0)
    h.commit()
    h.record_fetch("s", 2.0, 0)
    # A second connection sees what a restarted process would: the committed row only.
    other = sqlite3.connect(path)
    assert other.execute("SELECT at FROM fetches").fetchall() == [(1.0,)]
    other.close()
    h.close()


def test_history_refuses_a_foreign_file_and_leaves_it_untouched(tmp_path: Path) -> None:
    junk = tmp_path / "junk.sqlite3"
    junk.write_bytes(b"this is not a database at all" * 100)
    before = junk.read_bytes()
    with pytest.raises(StateError, match="not a recrawl history file"):
        HistoryStore(junk)
    assert junk.read_bytes() == before

    other = tmp_path / "other.sqlite3"
    db = sqlite3.connect(other)
    db.execute("CREATE TABLE meta (key TEXT, value TEXT)")
    db.execute("INSERT INTO meta VALUES ('format', 'something/else')")
    db.commit()
    db.close()
    before = other.read_bytes()
    with pytest.raises(StateError, match=f"expected '{FORMAT}'"):
        HistoryStore(other)
    assert other.read_bytes() == before


def test_scaled_clock() -> None:
    real = [1000.0]
    clock = ScaledClock(3600, origin=1000.0, real=lambda: real[0])
    assert clock() == 1000.0
    real[0] = 1002.5
    assert clock() == 1000.0 + 2.5 * 3600
    assert clock.to_real_delay(7200) == 2.0
    assert ScaledClock(1.0, real=lambda: 5.0)() == 5.0
    with pytest.raises(ValueError, match="scale"):
        ScaledClock(0)


def test_seed_key_of() -> None:
    assert seed_key_of(Request("http://Example.com/Sport/?p=1")) is None
    assert seed_key_of(Request("http://Example.com/Sport/?p=1", meta={SEED_META: True})) == (
        "example.com/Sport"
    )
    assert seed_key_of(Request("http://x.com/a", meta={SEED_META: "mine"})) == "mine"


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"TWOLEVEL_RECRAWL": "maybe"}, "TWOLEVEL_RECRAWL='maybe' is not valid"),
        ({"TWOLEVEL_RECRAWL_BUDGET": 0}, "TWOLEVEL_RECRAWL_BUDGET=0 is out of range"),
        ({"TWOLEVEL_RECRAWL_GAMMA": 2}, "TWOLEVEL_RECRAWL_GAMMA=2 is out of range"),
        (
            {"TWOLEVEL_RECRAWL_MIN_INTERVAL": 600, "TWOLEVEL_RECRAWL_MAX_INTERVAL": 60},
            r"TWOLEVEL_RECRAWL_MAX_INTERVAL=60 is out of range; it must be seconds >= ",
        ),
        ({"TWOLEVEL_RECRAWL_INITIAL_INTERVAL": 1}, "TWOLEVEL_RECRAWL_INITIAL_INTERVAL=1"),
        ({"TWOLEVEL_RECRAWL_LIST_SIZE": "x"}, "TWOLEVEL_RECRAWL_LIST_SIZE='x' is not an integer"),
        ({"TWOLEVEL_RECRAWL_HISTORY": 3}, "TWOLEVEL_RECRAWL_HISTORY=3 is not a path"),
        (
            {"TWOLEVEL_RECRAWL_TRAIN_DAYS": 7},
            r"TWOLEVEL_RECRAWL_TRAIN_DAYS=7 is out of range; it must be an integer > 7",
        ),
        ({"TWOLEVEL_RECRAWL_TIME_SCALE": -1}, "TWOLEVEL_RECRAWL_TIME_SCALE=-1 is out of range"),
    ],
)
def test_recrawl_settings_errors_name_the_setting(settings: dict, message: str) -> None:
    with pytest.raises(SettingsError, match=message):
        RecrawlConfig.from_settings(settings)


def test_recrawl_settings_from_the_command_line_and_the_clock_rule() -> None:
    config = RecrawlConfig.from_settings(
        {
            "TWOLEVEL_RECRAWL": "1",
            "TWOLEVEL_RECRAWL_BUDGET": "48",
            "TWOLEVEL_RECRAWL_TIME_SCALE": "60",
        }
    )
    assert config.enabled and config.budget == 48.0 and config.time_scale == 60.0
    with pytest.raises(ValueError, match="TWOLEVEL_RECRAWL_TIME_ORIGIN"):
        make_clock(config)
    assert not RecrawlConfig.from_settings({}).enabled


def test_news_site_is_deterministic_and_follows_its_profile() -> None:
    real = [0.0]
    clock = ScaledClock(1.0, origin=0.0, real=lambda: real[0])
    site = NewsSite([Section("day", 240.0, list_size=5), Section("night", 240.0)], clock, seed=3)
    again = NewsSite([Section("day", 240.0, list_size=5), Section("night", 240.0)], clock, seed=3)
    week = 7 * 86400.0
    day = list(site.articles("day", 0.0, week))
    assert day == list(again.articles("day", 0.0, week))
    # 240 a day, 98% of the weight in 06:00-18:00 UTC: 12 / (12 + 12 * 0.02).
    in_day = sum(1 for t in day if 6 <= (t % 86400) // 3600 < 18)
    assert 0.95 < in_day / len(day) <= 1.0
    assert 0.8 * 7 * 240 < len(day) < 1.2 * 7 * 240
    # The list page: the latest 5 published by now, newest first; articles render with
    # their publish time, future ones do not exist yet.
    real[0] = 3 * 86400 + 12 * 3600.0
    latest = site.latest("day", clock())
    assert len(latest) == 5
    assert [t for _, t in latest] == sorted((t for t in day if t <= clock()), reverse=True)[:5]
    status, body = site.render(f"/day/a/{latest[0][0]}")
    assert status == 200
    assert extract_publish_time(body) == pytest.approx(latest[0][1], abs=1e-3)
    future = next(t for t in day if t > clock())
    hour = int(future // 3600)
    k = site.hour_articles("day", hour).index(future)
    assert site.render(f"/day/a/{hour}-{k}")[0] == 404
    assert site.render("/nowhere/")[0] == 404
    with pytest.raises(ValueError, match="TWOLEVEL_TESTWEB_NEWS_SECTIONS"):
        parse_sections("day:10,weekly:3")
