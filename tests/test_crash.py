"""Crash safety the hard way: real crawls of the test web killed with SIGKILL, resumed."""

from __future__ import annotations

import random
from collections import Counter

import pytest
from crawl_helpers import SAFE, crawl, crawl_process, free_port, read_log

from scrapy_twolevel.testweb.web import HostProfile, generate_web

pytestmark = pytest.mark.crawl


def test_kill_9_three_times_then_resume_fetches_every_page(tmp_path):
    """Three SIGKILLs at random moments, each resumed: every page is fetched; re-fetches
    are bounded by what was in flight or done in the last commit interval before each kill."""
    web = generate_web(
        8,
        20,
        seed=11,
        n_seeds=2,
        links_per_page=6,
        redirects=12,  # 301s across hosts: a redirected request's lease must hold too
        host_profiles=[HostProfile(connect_delay=0.002, response_delay=0.04)] * 8,
    )
    jobdir = tmp_path / "job"
    log = tmp_path / "fetched.log"
    commit_interval = 0.25
    concurrency = 4
    settings = {
        **SAFE,
        "JOBDIR": str(jobdir),
        "CONCURRENT_REQUESTS": concurrency,
        "TWOLEVEL_COMMIT_INTERVAL": commit_interval,
        "FETCH_LOG": str(log),
    }
    port = free_port()
    rng = random.Random(2026)
    kills = []
    for _ in range(3):
        kill_after = rng.randint(10, 45)
        proc, _ = crawl_process(
            tmp_path,
            web,
            {
                **settings,
                "EXTENSIONS": {"crawl_helpers.FetchLog": 0, "crawl_helpers.KillAfterResponses": 1},
                "KILL_AFTER_RESPONSES": kill_after,
            },
            port=port,
        )
        assert proc.returncode == -9, proc.stderr[-3000:]
        rows = read_log(log)
        kills.append((len(rows), rows[-1][0]))
    final = crawl(
        tmp_path, web, {**settings, "EXTENSIONS": {"crawl_helpers.FetchLog": 0}}, port=port
    )
    assert final.crawl_stats["finish_reason"] == "finished"
    assert final.crawl_stats.get("twolevel/leases_resumed", 0) >= 1

    rows = read_log(log)
    page_of = {web.url(page, port): page for page in range(len(web.pages))}
    fetched = Counter(page_of[url] for _, url in rows)
    assert set(fetched) == web.reachable()  # nothing lost
    refetches = sum(fetched.values()) - len(fetched)
    # What each kill may cost: the requests in flight, plus those finished within two
    # commit intervals before it (one interval of uncommitted work, one of slack).
    bound = 0
    for count, killed_at in kills:
        recent = [t for t, _ in rows[:count] if t >= killed_at - 2 * commit_interval]
        bound += concurrency + len(recent)
    assert refetches <= bound, (refetches, bound, kills)


def test_seen_cache_crawl_fetches_every_page_exactly_once(tmp_path):
    """The filter on, with the two-level scheduler and with Scrapy's own: no page twice,
    none missed, on a web where most links are duplicates."""
    web = generate_web(6, 25, seed=3, links_per_page=8)
    for scheduler in (
        "scrapy_twolevel.scheduler.TwoLevelScheduler",
        "scrapy.core.scheduler.Scheduler",
    ):
        result = crawl(tmp_path, web, {**SAFE, "SCHEDULER": scheduler})
        assert result.server.fetch_counts() == {page: 1 for page in web.reachable()}
        stats = result.crawl_stats
        assert stats["twolevel/seen/urls"] == len(web.reachable())
        assert stats["dupefilter/filtered"] == stats["twolevel/seen/tests"] - len(web.reachable())
        assert stats["dupefilter/filtered"] > len(web.reachable())  # mostly duplicates


def test_jobdir_with_scrapys_dupefilter_warns_once(tmp_path):
    web = generate_web(2, 5, seed=1)
    settings = {
        **SAFE,
        "DUPEFILTER_CLASS": "scrapy.dupefilters.RFPDupeFilter",
        "JOBDIR": str(tmp_path / "job"),
    }
    proc, _ = crawl_process(tmp_path, web, settings)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stderr.count("a killed crawl can lose URLs for good") == 1
    assert "SeenCacheDupeFilter" in proc.stderr
