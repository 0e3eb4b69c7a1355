"""Seed recrawling in real crawls: `scrapy recrawl train`, then `scrapy crawl news`.

The example project's ``news`` spider crawls the test web's news site on a sped-up clock
(one real second is one hour of site and planner time), so a crawl of about half a minute
spans a simulated day and its night.
"""

from __future__ import annotations

import math
import re
import sqlite3
import sys
import time
from pathlib import Path

import pytest
from crawl_helpers import scrapy_in_project
from helpers import record_archive
from scrapy.settings import Settings

from scrapy_twolevel.config import RecrawlConfig
from scrapy_twolevel.glue.seed_planner import make_planner
from scrapy_twolevel.recrawl.clock import ScaledClock
from scrapy_twolevel.storage.model_store import load_model
from scrapy_twolevel.storage.recrawl_history import HistoryStore
from scrapy_twolevel.testweb.news import (
    PROFILES,
    NewsSite,
    seed_key_for,
)

pytestmark = pytest.mark.crawl

PROJECT = Path(__file__).parents[1] / "example_project"
sys.path.insert(0, str(PROJECT))
from example_project.spiders.news import NewsSpider  # noqa: E402

SCALE = 3600.0
DAY = 86400.0


def stat(log: str, name: str) -> int | None:
    match = re.search(rf"'{re.escape(name)}': (\d+)", log)
    return int(match.group(1)) if match else None


def busy_hour(section: str, t: float) -> bool:
    """Whether ``t`` falls in an hour the section publishes most in."""
    return PROFILES[section][int(t % DAY // 3600)] == 1.0


def fetch_rates(times: list[float], section: str, start: float, end: float) -> tuple[float, float]:
    """Fetches per hour in the section's busy hours and in its quiet hours of [start, end)."""
    busy_hours = quiet_hours = 0.0
    t = start
    while t < end:
        t1 = min(end, (math.floor(t / 3600) + 1) * 3600)
        if busy_hour(section, t):
            busy_hours += (t1 - t) / 3600
        else:
            quiet_hours += (t1 - t) / 3600
        t = t1
    busy = sum(1 for t in times if busy_hour(section, t))
    return busy / busy_hours, (len(times) - busy) / quiet_hours


@pytest.mark.long
def test_refetches_follow_the_rhythm_learned_by_scrapy_recrawl_train(tmp_path: Path) -> None:
    origin = time.time()
    history_path = tmp_path / "recrawl.sqlite3"
    common = [
        "-s", f"TWOLEVEL_RECRAWL_TIME_ORIGIN={origin}",
        "-s", f"TWOLEVEL_RECRAWL_HISTORY={history_path}",
    ]  # fmt: skip
    clock = ScaledClock(SCALE, origin)
    # The site's archive: the last 14 days of articles (crawling for two simulated weeks
    # would take six real minutes).
    site = write_archive(history_path, clock, days=14)

    train = scrapy_in_project("recrawl", "train", "news", *common)
    assert train.returncode == 0, train.stdout + train.stderr[-3000:]
    assert "model saved to" in train.stdout
    for section in site.sections:
        assert re.search(rf"^{seed_key_for(section)}\s+seed\s+\d+", train.stdout, re.M), (
            train.stdout
        )
    report = scrapy_in_project("recrawl", "report", "news", *common)
    assert report.returncode == 0, report.stderr[-3000:]
    assert train.stdout.split("\n\n", 1)[1].strip() == report.stdout.split("\n\n", 1)[1].strip()

    settings = Settings(NewsSpider.custom_settings)
    settings.setdict({"TWOLEVEL_RECRAWL_TIME_ORIGIN": origin}, priority="cmdline")
    model = history_path.with_name("recrawl-model.json")
    assert model.exists()
    started = clock()
    crawl = scrapy_in_project("crawl", "news", *common, "-s", "TWOLEVEL_RECRAWL_DURATION=30")
    assert crawl.returncode == 0, crawl.stderr[-3000:]
    log = crawl.stderr
    assert "Recrawl: model of 2 seed keys" in log, log[-3000:]
    assert "Traceback" not in log and " ERROR: " not in log, log[-3000:]
    ended = clock()

    db = sqlite3.connect(history_path)
    for section in site.sections:
        key = seed_key_for(section)
        times = [t for (t,) in db.execute("SELECT at FROM fetches WHERE seed=?", (key,))]
        assert len(times) >= 10, (key, times)
        busy, quiet = fetch_rates(times, section, started, ended)
        # The planner fetches at a rate ~ sqrt(predicted rate): the busy hours publish 50x
        # as much as the quiet ones, so about 7x the fetches; 3x is the bar.
        assert busy >= 3 * quiet, (key, busy, quiet, len(times))

    # Each refetch followed the plan: replaying the recorded fetches through a planner
    # built like the crawl's, with the trained model, gives each next fetch's due time;
    # the fetch came after it (never early), and almost always within a quarter of a real
    # second (the engine's wake-up and the download).
    planner = make_planner(RecrawlConfig.from_settings(settings), load_model(model), clock)
    fetches = db.execute("SELECT seed, at, new_links FROM fetches ORDER BY at, rowid").fetchall()
    due: dict[str, float] = {}
    lateness = []
    for seed, at, new_links in fetches:
        if seed in due:
            lateness.append(at - due[seed])
        due[seed] = planner.next_fetch(seed, at, new_links)
    assert min(lateness) >= 0, lateness
    on_time = sum(1 for late in lateness if late <= 0.25 * SCALE)
    assert on_time >= 0.9 * len(lateness), sorted(lateness)

    # Every article found in the crawl has its publish time from its page, equal to the
    # site's; and each fetch's new links are the articles recorded for it.
    crawled = db.execute(
        "SELECT url, seed, published FROM articles WHERE url LIKE 'http://127.0.0.1:%'"
    ).fetchall()
    assert crawled
    for url, _seed, published in crawled:
        section, _, article = url.split("/", 3)[3].partition("/a/")
        assert published is not None, url
        assert abs(published - site.publish_time(section, article)) < 1e-3, url
    (new_links,) = db.execute("SELECT SUM(new_links) FROM fetches").fetchone()
    assert new_links == len(crawled) == stat(log, "twolevel/recrawl/new_links")
    assert stat(log, "twolevel/recrawl/articles_dated") == len(crawled)
    assert (
        stat(log, "twolevel/recrawl/refetches")
        == len(db.execute("SELECT at FROM fetches WHERE at > ?", (started,)).fetchall()) - 2
    )  # every fetch but each seed's first was a planned refetch
    db.close()


def test_with_jobdir_the_plans_and_history_survive_a_restart(tmp_path: Path) -> None:
    jobdir = tmp_path / "job"
    common = [
        "-s", f"JOBDIR={jobdir}",
        "-s", f"TWOLEVEL_RECRAWL_TIME_ORIGIN={time.time()}",
        "-s", "TWOLEVEL_RECRAWL_DURATION=4",
    ]  # fmt: skip
    first = scrapy_in_project("crawl", "news", *common)
    assert first.returncode == 0, first.stderr[-3000:]
    assert stat(first.stderr, "twolevel/recrawl/seed_requests") == 2
    history_path = jobdir / "twolevel" / "recrawl.sqlite3"
    db = sqlite3.connect(history_path)
    (fetches_first,) = db.execute("SELECT COUNT(*) FROM fetches").fetchone()
    plans = db.execute("SELECT seed FROM plans ORDER BY seed").fetchall()
    db.close()
    assert plans == [("news/day",), ("news/night",)]
    assert fetches_first >= 2

    second = scrapy_in_project("crawl", "news", *common)
    assert second.returncode == 0, second.stderr[-3000:]
    log = second.stderr
    # The start requests were seen in the first run; the seeds come back from their plans.
    assert stat(log, "twolevel/recrawl/plans_resumed") == 2, log[-3000:]
    assert stat(log, "twolevel/recrawl/seed_requests") is None
    assert (stat(log, "twolevel/recrawl/refetches") or 0) >= 2
    assert (stat(log, "twolevel/recrawl/fetches") or 0) >= 2
    db = sqlite3.connect(history_path)
    (fetches_total,) = db.execute("SELECT COUNT(*) FROM fetches").fetchone()
    db.close()
    assert fetches_total == fetches_first + stat(log, "twolevel/recrawl/fetches")


def test_recrawl_without_the_seed_middleware_stops_with_one_clear_message(
    tmp_path: Path,
) -> None:
    proc = scrapy_in_project(
        "crawl", "news",
        "-s", f"TWOLEVEL_RECRAWL_HISTORY={tmp_path / 'h.sqlite3'}",
        "-s", 'SPIDER_MIDDLEWARES={"scrapy_twolevel.seeds.SeedMiddleware": null}',
        timeout=60,
    )  # fmt: skip
    assert proc.returncode != 0
    assert "TWOLEVEL_RECRAWL = True needs the seed middleware" in proc.stderr, proc.stderr[-3000:]
    assert not (tmp_path / "h.sqlite3").exists()


def write_archive(path: Path, clock: ScaledClock, days: float) -> NewsSite:
    """The news site's last ``days`` of articles, as earlier crawls would have recorded them."""
    history = HistoryStore(path)
    site = record_archive(history, clock, days)
    history.close()
    return site


@pytest.mark.long
def test_retraining_during_a_long_crawl_saves_a_model_the_crawl_then_uses(
    tmp_path: Path,
) -> None:
    origin = time.time()
    history_path = tmp_path / "recrawl.sqlite3"
    write_archive(history_path, ScaledClock(SCALE, origin), days=10)
    crawl = scrapy_in_project(
        "crawl", "news",
        "-s", f"TWOLEVEL_RECRAWL_TIME_ORIGIN={origin}",
        "-s", f"TWOLEVEL_RECRAWL_HISTORY={history_path}",
        "-s", "TWOLEVEL_RECRAWL_RETRAIN_INTERVAL=14400",  # every 4 planner hours
        "-s", "TWOLEVEL_RECRAWL_TRAIN_DAYS=10",
        "-s", "TWOLEVEL_RECRAWL_DURATION=14",
    )  # fmt: skip
    assert crawl.returncode == 0, crawl.stderr[-3000:]
    log = crawl.stderr
    assert "no model at" in log  # it started without one
    assert (stat(log, "twolevel/recrawl/retrained") or 0) >= 1, log[-3000:]
    assert stat(log, "twolevel/recrawl/retrain_failed") is None
    predictor = load_model(history_path.with_name("recrawl-model.json"))
    assert predictor is not None
    assert sorted(predictor.fits) == ["news/day", "news/night"]
    day = predictor.week("news/day")
    assert day is not None
    busy = sum(day[w * 24 + h] for w in range(7) for h in range(6, 18))
    quiet = sum(day[w * 24 + h] for w in range(7) for h in (*range(6), *range(18, 24)))
    assert busy > 10 * quiet  # it learned the day section's rhythm (50x in truth)


def test_a_failing_seed_is_retried_later_and_never_dropped(tmp_path: Path) -> None:
    crawl = scrapy_in_project(
        "crawl", "news",
        "-s", f"TWOLEVEL_RECRAWL_TIME_ORIGIN={time.time()}",
        "-s", f"TWOLEVEL_RECRAWL_HISTORY={tmp_path / 'h.sqlite3'}",
        "-s", "TWOLEVEL_TESTWEB_NEWS_FAILING=night",
        "-s", "TWOLEVEL_RECRAWL_INITIAL_INTERVAL=3600",
        "-s", "TWOLEVEL_RECRAWL_DURATION=8",
    )  # fmt: skip
    assert crawl.returncode == 0, crawl.stderr[-3000:]
    log = crawl.stderr
    # Each try of the night page (and each of Scrapy's retries of it) ends without a
    # response reaching the callback: not counted, tried again an hour later.
    failed = stat(log, "twolevel/recrawl/fetches_without_response") or 0
    assert failed >= 3, log[-3000:]
    assert stat(log, "twolevel/recrawl/seeds") == 2
    db = sqlite3.connect(tmp_path / "h.sqlite3")
    seeds = {seed for (seed,) in db.execute("SELECT seed FROM fetches")}
    plans = {seed for (seed,) in db.execute("SELECT seed FROM plans")}
    db.close()
    assert seeds == {"news/day"}  # the failures are not in the history
    assert plans == {"news/day", "news/night"}


def test_without_jobdir_a_new_crawl_keeps_the_history_but_not_the_plans(tmp_path: Path) -> None:
    common = [
        "-s", f"TWOLEVEL_RECRAWL_TIME_ORIGIN={time.time()}",
        "-s", f"TWOLEVEL_RECRAWL_HISTORY={tmp_path / 'h.sqlite3'}",
        "-s", "TWOLEVEL_RECRAWL_DURATION=3",
    ]  # fmt: skip
    first = scrapy_in_project("crawl", "news", *common)
    assert first.returncode == 0, first.stderr[-3000:]
    # The second crawl serves the site on another port: an old plan would name the old one.
    second = scrapy_in_project("crawl", "news", *common)
    assert second.returncode == 0, second.stderr[-3000:]
    log = second.stderr
    assert stat(log, "twolevel/recrawl/plans_resumed") is None
    assert stat(log, "twolevel/recrawl/seed_requests") == 2
    assert " ERROR: " not in log, log[-3000:]
    db = sqlite3.connect(tmp_path / "h.sqlite3")
    (fetches,) = db.execute("SELECT COUNT(*) FROM fetches").fetchone()
    db.close()
    assert fetches == stat(first.stderr, "twolevel/recrawl/fetches") + stat(
        log, "twolevel/recrawl/fetches"
    )
