"""A full disk under a JOBDIR crawl: nothing lost, nothing stalled, back to normal after.

The disk is made full for real, without root, as in test_disk_faults.py, but inside a real
``scrapy crawl`` (:class:`crawl_helpers.DiskFull`); the crawls are judged by the test
web's server log.
"""

from __future__ import annotations

import json
import sqlite3
from collections import Counter

import pytest
from crawl_helpers import SAFE, crawl, crawl_process, free_port, read_log

from scrapy_twolevel.testweb.spider import CrawlResult
from scrapy_twolevel.testweb.web import HostProfile, generate_web

pytestmark = pytest.mark.crawl

STEADY = HostProfile(connect_delay=0.002, response_delay=0.04)
#: 160 pages on 8 hosts: about 2 s of crawling at 4 requests at a time.
WEB = generate_web(8, 20, seed=11, n_seeds=2, links_per_page=6, host_profiles=[STEADY] * 8)


def test_a_crawl_whose_disk_fills_then_frees_fetches_every_page_once(tmp_path):
    jobdir = tmp_path / "job"
    settings = {
        **SAFE,
        "JOBDIR": str(jobdir),
        "CONCURRENT_REQUESTS": 4,
        "TWOLEVEL_COMMIT_INTERVAL": 0.2,
        "EXTENSIONS": {"crawl_helpers.DiskFull": 0},
        "DISK_FULL": [20, 100],
    }
    proc, out = crawl_process(tmp_path, WEB, settings)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = CrawlResult.from_dict(json.loads(out.read_text()))
    assert result.server.fetch_counts() == {page: 1 for page in WEB.reachable()}
    stats = result.crawl_stats
    assert stats["disk_full/filled"] == 20 and stats["disk_full/freed"] == 100
    assert stats["twolevel/store_failures"] == 1
    assert proc.stderr.count("The JOBDIR file cannot be written") == 1
    assert "The JOBDIR file takes writes again" in proc.stderr
    db = sqlite3.connect(jobdir / "twolevel" / "frontier.sqlite3")
    assert db.execute("SELECT COUNT(*) FROM requests").fetchone()[0] == 0  # all done
    assert db.execute("SELECT COUNT(*) FROM seen").fetchone()[0] == stats["twolevel/seen/urls"]
    db.close()


def test_a_crawl_killed_while_its_disk_is_full_resumes_with_nothing_lost(tmp_path):
    """Killed 60 responses into a full disk: everything since the last commit before it
    filled is lost from the file, so those pages are fetched again on resume; none is lost."""
    jobdir, log = tmp_path / "job", tmp_path / "fetched.log"
    settings = {
        **SAFE,
        "JOBDIR": str(jobdir),
        "CONCURRENT_REQUESTS": 4,
        "TWOLEVEL_COMMIT_INTERVAL": 0.2,
        "FETCH_LOG": str(log),
    }
    port = free_port()
    extensions = {"crawl_helpers.FetchLog": 0, "crawl_helpers.DiskFull": 1}
    killer = {"crawl_helpers.KillAfterResponses": 2}
    proc, _ = crawl_process(
        tmp_path,
        WEB,
        {
            **settings,
            "EXTENSIONS": {**extensions, **killer},
            "DISK_FULL": [20, 0],
            "KILL_AFTER_RESPONSES": 80,
        },
        port=port,
    )
    assert proc.returncode == -9, proc.stderr[-3000:]
    assert "The JOBDIR file cannot be written" in proc.stderr
    before = read_log(log)
    final = crawl(
        tmp_path, WEB, {**settings, "EXTENSIONS": {"crawl_helpers.FetchLog": 0}}, port=port
    )
    assert final.crawl_stats["finish_reason"] == "finished"
    rows = read_log(log)
    page_of = {WEB.url(page, port): page for page in range(len(WEB.pages))}
    fetched = Counter(page_of[url] for _, url in rows)
    assert set(fetched) == WEB.reachable()  # nothing lost
    # What the kill may cost: every response from two commit intervals before the disk
    # filled (one of uncommitted work, one of slack) to the kill, and those in flight.
    filled_at = before[19][0]
    since = [t for t, _ in before if t >= filled_at - 2 * 0.2]
    refetches = sum(fetched.values()) - len(fetched)
    assert 0 < refetches <= len(since) + 4, (refetches, len(since))
