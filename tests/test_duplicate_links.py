"""Integration: the duplicate-links middleware in real crawls of the local test web.

Each crawl is a subprocess (``crawl_helpers.crawl``). A counting spider middleware at
order 543 (where a project's own middlewares go) sees what passes the duplicate-links
middleware (940); the same crawl with it disabled is the reference.
"""

from __future__ import annotations

import pytest
from crawl_helpers import crawl

from scrapy_twolevel.components import DUPLICATE_LINKS_ORDER, DUPLICATE_LINKS_PATH
from scrapy_twolevel.duplicate_links import FILTERED_EARLY
from scrapy_twolevel.testweb import HostProfile, generate_web

pytestmark = pytest.mark.crawl

ADDON = {
    "ADDONS": {"scrapy_twolevel.Addon": 0},
    "CONCURRENT_REQUESTS": 4,
    "EXTENSIONS": {"crawl_helpers.CountDropped": 0},
}
BELOW = {"crawl_helpers.CountRequests": 543}  # a project's middleware


def linky_web():
    """Every page carries 8 links among 60 pages of 4 hosts: most links are duplicates."""
    profile = HostProfile(connect_delay=0.001, response_delay=0.002)
    return generate_web(4, 15, seed=7, n_seeds=2, links_per_page=8, host_profiles=[profile] * 4)


@pytest.fixture(scope="module")
def both_crawls(tmp_path_factory):
    """The same web crawled with the middleware (``on``) and without it (``off``)."""
    web = linky_web()
    tmp_path = tmp_path_factory.mktemp("duplicate-links")
    on = crawl(tmp_path, web, {**ADDON, "SPIDER_MIDDLEWARES": BELOW})
    off = crawl(
        tmp_path, web, {**ADDON, "SPIDER_MIDDLEWARES": {**BELOW, DUPLICATE_LINKS_PATH: None}}
    )
    return web, on, off


def test_duplicates_are_dropped_before_later_middlewares_and_no_page_is_lost(both_crawls):
    web, on, off = both_crawls
    every_page_once = {page: 1 for page in web.reachable()}
    assert on.server.fetch_counts() == every_page_once
    assert off.server.fetch_counts() == every_page_once
    early = on.crawl_stats[FILTERED_EARLY]
    assert early > 0
    assert FILTERED_EARLY not in off.crawl_stats
    # What the middleware dropped never reached the project's middleware ...
    yielded = off.crawl_stats["count/requests"]
    assert on.crawl_stats["count/requests"] == yielded - early
    # ... and is a duplicate filtered as the scheduler filters one: logged, counted and
    # announced with request_dropped.
    for result in (on, off):
        stats = result.crawl_stats
        assert stats["count/request_dropped"] == stats["dupefilter/filtered"]
        # The scheduler was asked about the rest, and about the start requests.
        asked = stats["scheduler/enqueued"] + stats["dupefilter/filtered"]
        assert stats["count/requests"] + len(web.seeds) == asked - stats.get(FILTERED_EARLY, 0)
    assert on.crawl_stats["dupefilter/filtered"] == off.crawl_stats["dupefilter/filtered"]


def test_dont_filter_requests_are_not_dropped(tmp_path):
    web = linky_web()
    # Links to the seeds' home pages: each seed was fetched (and recorded) from its start
    # request, so each such link is one fetch more.
    seed_hosts = [web.hosts[web.pages[seed].host].address for seed in web.seeds]
    settings = {
        **ADDON,
        "SPIDER_MIDDLEWARES": {"crawl_helpers.DontFilterHomePages": DUPLICATE_LINKS_ORDER + 5},
        "DONT_FILTER_HOSTS": seed_hosts,
    }
    result = crawl(tmp_path, web, settings)
    counts = result.server.fetch_counts()
    assert set(counts) == web.reachable()
    again = result.crawl_stats["count/dont_filter"]
    assert again > 0
    assert sum(counts.values()) == len(web.reachable()) + again
    assert result.crawl_stats[FILTERED_EARLY] > 0


def test_with_another_dupefilter_it_passes_everything_on(tmp_path):
    web = linky_web()
    settings = {
        **ADDON,
        "SPIDER_MIDDLEWARES": BELOW,
        "DUPEFILTER_CLASS": "scrapy.dupefilters.RFPDupeFilter",
    }
    result = crawl(tmp_path, web, settings)
    assert result.server.fetch_counts() == {page: 1 for page in web.reachable()}
    stats = result.crawl_stats
    assert FILTERED_EARLY not in stats
    asked = stats["scheduler/enqueued"] + stats["dupefilter/filtered"]
    assert stats["count/requests"] + len(web.seeds) == asked


def test_duplicates_are_counted_when_nothing_listens_for_request_dropped(both_crawls, tmp_path):
    """Without a receiver the signal is not sent; the counts, added once per response, add
    up as in the crawls that listened (which duplicates go early varies with timing)."""
    web, on, off = both_crawls
    quiet = {k: v for k, v in ADDON.items() if k != "EXTENSIONS"}
    result = crawl(tmp_path, web, {**quiet, "SPIDER_MIDDLEWARES": BELOW})
    assert result.server.fetch_counts() == {page: 1 for page in web.reachable()}
    stats = result.crawl_stats
    assert "count/request_dropped" not in stats
    assert stats[FILTERED_EARLY] > 0
    assert stats["dupefilter/filtered"] == on.crawl_stats["dupefilter/filtered"]
    assert stats["count/requests"] + stats[FILTERED_EARLY] == off.crawl_stats["count/requests"]
