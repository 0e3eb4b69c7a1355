"""Real-project conformance: crawls with the settings and components real projects use.

Each scenario is a real ``scrapy crawl`` of the test web (a subprocess, real sockets) with
the add-on, and asserts what a user relies on: every page once, at most one request in
flight per host *as the server counts them* (robots.txt and media downloads included), and
no ERROR line. Where the comparison means something, the same crawl runs on Scrapy's
stock components too. ``dont_filter`` links are covered by ``test_duplicate_links.py``,
JOBDIR kill and resume by ``test_crash.py``, Crawl-delay and 429s by
``test_politeness_crawl.py``.
"""

from __future__ import annotations

import json
import re

import pytest
import scrapy
from crawl_helpers import crawl_process, free_port

from scrapy_twolevel.testweb import HostProfile, generate_web
from scrapy_twolevel.testweb.spider import CrawlResult
from scrapy_twolevel.testweb.web import FILES_PREFIX

pytestmark = pytest.mark.crawl

SCRAPY = tuple(int(part) for part in scrapy.__version__.split(".")[:2])
ADDON = {"ADDONS": {"scrapy_twolevel.Addon": 0}, "CONCURRENT_REQUESTS": 4}


def web_of(n_hosts=4, pages=6, **limits):
    profile = HostProfile(connect_delay=0.002, response_delay=0.004, **limits)
    return generate_web(n_hosts, pages, seed=5, host_profiles=[profile] * n_hosts)


def run(tmp_path, web, settings, *, scrapys_errors="", **kwargs):
    """The crawl's result; it must end normally and log no ERROR line but those that
    Scrapy's own components log for the scenario (``scrapys_errors``, a regex that each
    such line matches), as they do with the stock scheduler."""
    proc, out = crawl_process(tmp_path, web, settings, **kwargs)
    assert proc.returncode == 0, proc.stderr[-3000:]
    errors = [line for line in proc.stderr.splitlines() if " ERROR: " in line]
    assert [e for e in errors if not (scrapys_errors and re.search(scrapys_errors, e))] == []
    return CrawlResult.from_dict(json.loads(out.read_text()))


def assert_complete_and_polite(web, result):
    """Every page once; at the server, one request at a time per host and none before a
    ``Retry-After`` it had answered had passed; the crawl ended on its own."""
    assert result.server.fetch_counts() == {page: 1 for page in web.reachable()}
    in_flight = result.server.max_concurrent_requests_per_host()
    assert max(in_flight.values()) == 1, in_flight
    assert result.server.early_arrivals() == []
    assert result.crawl_stats["finish_reason"] == "finished"


@pytest.mark.parametrize("status", [200, 404, 500])
def test_robots_txt_obeyed_whatever_it_answers(tmp_path, status):
    web = web_of(robots_status=status)
    # Scrapy's RetryMiddleware gives up on a robots.txt that keeps answering 500, as ERROR.
    retry_error = r"\[scrapy\.downloadermiddlewares\.retry\] ERROR: Gave up retrying .*/robots\.txt"
    settings = {**ADDON, "ROBOTSTXT_OBEY": True}
    result = run(tmp_path, web, settings, scrapys_errors=retry_error if status == 500 else "")
    assert_complete_and_polite(web, result)
    robots = {i: h.paths.get("/robots.txt", 0) for i, h in result.server.hosts.items()}
    # One robots.txt per host; a 5xx one is tried again by RetryMiddleware, as in Scrapy.
    expected = 1 if status != 500 else 3
    assert robots == dict.fromkeys(range(len(web.hosts)), expected)
    stats = result.crawl_stats
    assert stats.get("twolevel/hosts_at_budget", 0) == 0
    assert stats["robotstxt/request_count"] == len(web.hosts)


@pytest.mark.parametrize("status", [429, 503])
def test_a_robots_txt_refusal_with_retry_after_holds_the_whole_host(tmp_path, status):
    """Its host gets no request, a robots.txt copy or a page, before Retry-After has
    passed; then robots.txt is read and the host crawled as usual."""
    web = web_of(n_hosts=3, pages=4, robots_status=status, robots_retry_after=2)
    result = run(tmp_path, web, {**ADDON, "ROBOTSTXT_OBEY": True})
    assert_complete_and_polite(web, result)
    for host in range(len(web.hosts)):
        refused = [e.time for e in result.server.events if e.host == host and e.status == status]
        assert len(refused) == 1
        later = [t for t, h, _ in result.server.arrivals if h == host and t > refused[0]]
        assert later and min(later) >= refused[0] + 2.0, (refused, later[:3])
    assert result.crawl_stats["twolevel/refusals"] == len(web.hosts)


@pytest.mark.parametrize("pipeline", ["files", "images"])
def test_media_pipeline_downloads_are_polite_and_not_pages(tmp_path, pipeline):
    """Each page brings two files (or images), downloaded by the pipeline outside the
    scheduler: never in flight beside the host's next page, and never counted toward its
    budget."""
    web = web_of(n_hosts=3, pages=5)
    images = pipeline == "images"
    settings = {
        **ADDON,
        "ITEM_PIPELINES": {
            f"scrapy.pipelines.{pipeline}.{'Images' if images else 'Files'}Pipeline": 1
        },
        "FILES_STORE": str(tmp_path / "files"),
        "IMAGES_STORE": str(tmp_path / "images"),
        "FILES_AS_IMAGES": images,
        "SPIDER_MIDDLEWARES": {"crawl_helpers.FilesForPages": 800},
        "TWOLEVEL_HOST_BUDGET": 5,  # the pages of a host, and not one more
    }
    result = run(tmp_path, web, settings)
    assert_complete_and_polite(web, result)
    files = {
        (host, path): n
        for host, h in result.server.hosts.items()
        for path, n in h.paths.items()
        if path.startswith(FILES_PREFIX)
    }
    assert len(files) == 2 * len(web.reachable()) and set(files.values()) == {1}
    stats = result.crawl_stats
    assert stats["file_count"] == 2 * len(web.reachable())
    assert stats["file_status_count/downloaded"] == 2 * len(web.reachable())
    # Files counted as pages gave up each host after its first page and two files.
    assert stats.get("twolevel/dropped/budget", 0) == 0
    stored = [p for p in (tmp_path / pipeline).rglob("*") if p.is_file()]
    assert len(stored) == 2 * len(web.reachable())


def test_rate_limited_hosts_with_robots_txt_and_media(tmp_path):
    """Hosts that refuse (429 + Retry-After) whatever comes sooner than 0.3 s after the last
    request they took: pages, robots.txt and the Files pipeline's downloads all wait out
    every Retry-After, and every page and file still comes, once."""
    web = web_of(n_hosts=3, pages=4, min_interval=0.3, retry_after=True)
    settings = {
        **ADDON,
        "ROBOTSTXT_OBEY": True,
        "ITEM_PIPELINES": {"scrapy.pipelines.files.FilesPipeline": 1},
        "FILES_STORE": str(tmp_path / "files"),
        "SPIDER_MIDDLEWARES": {"crawl_helpers.FilesForPages": 800},
    }
    result = run(tmp_path, web, settings)
    assert_complete_and_polite(web, result)
    assert result.server.waits_asked  # the hosts did refuse
    stats = result.crawl_stats
    assert stats["file_status_count/downloaded"] == 2 * len(web.reachable())


def test_topics_with_robots_txt_log_no_error(tmp_path):
    """robots.txt responses have no topic lane; they used to log a traceback each."""
    web = web_of(n_hosts=3, pages=4)
    settings = {
        **ADDON,
        "ROBOTSTXT_OBEY": True,
        "TWOLEVEL_TOPICS": {"news": {"priority": 0}, "default": {"priority": 1}},
    }
    result = run(tmp_path, web, settings)
    assert_complete_and_polite(web, result)


@pytest.mark.parametrize("jobdir", [False, True])
def test_scrapys_engine_status_shows_the_frontier(tmp_path, jobdir):
    """``est()`` (telnet; Scrapy 2.19's remote control) read ``scheduler.mqs``/``dqs`` and
    showed AttributeError with this scheduler."""
    web = web_of()
    settings = {**ADDON, "EXTENSIONS": {"crawl_helpers.EngineStatusProbe": 0}}
    if jobdir:
        settings["JOBDIR"] = str(tmp_path / "job")
    result = run(tmp_path, web, settings)
    # Scrapy < 2.19 names them engine._slot.scheduler.*
    status = {
        k[4:].replace("engine._slot.scheduler", "engine.scheduler"): v
        for k, v in result.crawl_stats.items()
        if k.startswith("est/")
    }
    assert status and not [k for k, v in status.items() if "(exception)" in v], status
    memory, disk = (
        int(status["len(engine.scheduler.mqs)"]),
        int(status["len(engine.scheduler.dqs or [])"]),
    )
    if SCRAPY < (2, 18) and memory + disk == 0:
        # Scrapy < 2.18 calls each callback 0.1 s after its response: at the 5th response
        # no page's links may have reached the scheduler yet.
        return
    assert (memory > 0, disk > 0) == ((False, True) if jobdir else (True, False))


def assert_pages_once(web, result, per_page=1):
    assert result.server.fetch_counts() == {page: per_page for page in web.reachable()}
    in_flight = result.server.max_concurrent_requests_per_host()
    assert max(in_flight.values()) == 1, in_flight


@pytest.mark.parametrize(
    "spider", ["conformance_spiders.RulesSpider", "conformance_spiders.SitemapsSpider"]
)
def test_crawl_spider_rules_and_sitemap_spider(tmp_path, spider):
    """Fetched as stock Scrapy fetches them (a seed linked back from a page is fetched
    twice by both: Scrapy's start requests are ``dont_filter``), and politely."""
    web = web_of()
    results = {}
    for name, settings in (("stock", {}), ("addon", ADDON)):
        settings = {**settings, "ROBOTSTXT_OBEY": True}
        proc, out = crawl_process(tmp_path, web, settings, spider=spider)
        assert proc.returncode == 0, proc.stderr[-3000:]
        assert " ERROR: " not in proc.stderr, proc.stderr[-3000:]
        results[name] = CrawlResult.from_dict(json.loads(out.read_text()))
    stock, addon = results["stock"], results["addon"]
    assert set(addon.server.fetch_counts()) == set(web.reachable())
    assert addon.server.fetch_counts() == stock.server.fetch_counts()
    assert len(addon.items) == len(stock.items)
    assert max(addon.server.max_concurrent_requests_per_host().values()) == 1


def test_children_built_with_meta_response_meta(tmp_path):
    """Every child carries its parent's meta (and whatever the add-on wrote into it)."""
    web = web_of(n_hosts=4, pages=8)
    proc, out = crawl_process(tmp_path, web, ADDON, spider="conformance_spiders.MetaCopySpider")
    assert proc.returncode == 0 and " ERROR: " not in proc.stderr, proc.stderr[-3000:]
    result = CrawlResult.from_dict(json.loads(out.read_text()))
    assert_pages_once(web, result)
    assert result.crawl_stats["finish_reason"] == "finished"


def test_errbacks_get_every_failure_and_the_host_is_not_given_up(tmp_path):
    web = web_of(n_hosts=4, pages=5)
    proc, out = crawl_process(tmp_path, web, ADDON, spider="conformance_spiders.ErrbackSpider")
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = CrawlResult.from_dict(json.loads(out.read_text()))
    failed = [i["failed"] for i in result.items if "failed" in i]
    assert len(failed) == len(web.seeds) and all(u.endswith("/_broken") for u in failed)
    assert_pages_once(web, result)
    # RetryMiddleware's ERROR per broken URL is Scrapy's own; nothing else.
    errors = [line for line in proc.stderr.splitlines() if " ERROR: " in line]
    assert all("Gave up retrying" in e and "/_broken" in e for e in errors), errors


def test_close_spider_page_count_ends_the_crawl_cleanly(tmp_path):
    web = web_of(n_hosts=4, pages=10)
    result = run(tmp_path, web, {**ADDON, "CLOSESPIDER_PAGECOUNT": 12})
    stats = result.crawl_stats
    assert stats["finish_reason"] == "closespider_pagecount"
    assert 12 <= stats["response_received_count"] < len(web.reachable())
    assert set(result.server.fetch_counts().values()) == {1}
    assert max(result.server.max_concurrent_requests_per_host().values()) == 1


def test_http_cache_answers_teach_no_estimate_and_lose_no_page(tmp_path):
    """The second crawl is answered from the cache: no request reaches the server, no
    response is measured (a cached response took no server time), every page comes."""
    web = web_of(n_hosts=3, pages=5)
    settings = {
        **ADDON,
        "HTTPCACHE_ENABLED": True,
        "HTTPCACHE_DIR": str(tmp_path / "cache"),
        "HTTPCACHE_IGNORE_MISSING": False,
    }
    port = free_port()  # the same URLs both times
    first = run(tmp_path, web, settings, port=port)
    assert_pages_once(web, first)
    second = run(tmp_path, web, settings, port=port)
    stats = second.crawl_stats
    assert second.server.total.requests_total == 0
    assert stats["httpcache/hit"] == len(web.reachable())
    assert stats.get("twolevel/metrics/responses", 0) == 0
    assert len(second.items) == len(web.reachable())


def test_autothrottle_and_download_slots(tmp_path):
    web = web_of(n_hosts=4, pages=6)
    slots = {web.hosts[0].address: {"concurrency": 1, "delay": 0.05}}
    settings = {
        **ADDON,
        "AUTOTHROTTLE_ENABLED": True,
        "AUTOTHROTTLE_START_DELAY": 0.2,  # Scrapy's 5 s would make a 15-s test of it
        "DOWNLOAD_SLOTS": slots,
    }
    result = run(tmp_path, web, settings)
    assert_complete_and_polite(web, result)


def test_a_fingerprinter_subclass_that_counts_a_header(tmp_path):
    """Both languages of every page are fetched: the URL memo used to drop the second."""
    web = web_of(n_hosts=3, pages=4)
    settings = {
        **ADDON,
        "REQUEST_FINGERPRINTER_CLASS": "crawl_helpers.HeaderFingerprinter",
        "SPIDER_MIDDLEWARES": {"crawl_helpers.TwoLanguages": 930},
    }
    result = run(tmp_path, web, settings)
    counts = result.server.fetch_counts()
    # Start requests have no language: a seed is fetched once, and twice more if linked.
    seeds = set(web.seeds)
    assert {p: counts.get(p) for p in web.reachable() - seeds} == {
        p: 2 for p in web.reachable() - seeds
    }
    assert {counts[p] for p in seeds} <= {1, 3}
    assert max(result.server.max_concurrent_requests_per_host().values()) == 1


def test_a_custom_download_handler_is_crawled_completely_and_politely(tmp_path):
    """With a handler whose connections cannot be seen the middleware says so at start-up
    and estimates from timings and headers; the crawl is the same."""
    web = web_of(n_hosts=4, pages=6)
    handler = "crawl_helpers.OpaqueHttpHandler"
    settings = {**ADDON, "DOWNLOAD_HANDLERS": {"http": handler}, "LOG_LEVEL": "INFO"}
    result = run(tmp_path, web, settings)
    assert_complete_and_polite(web, result)
    stats = result.crawl_stats
    assert stats["twolevel/metrics/connections_seen"] == 0
    assert stats["twolevel/metrics/responses"] == len(web.reachable())
    assert run(tmp_path, web, ADDON).crawl_stats["twolevel/metrics/connections_seen"] == 1


def test_through_a_local_proxy(tmp_path):
    """HttpProxyMiddleware through Twisted's forward proxy: the hosts are still the
    servers, so the server sees one request at a time per host, every page once."""
    web = web_of(n_hosts=3, pages=5)
    settings = {**ADDON, "DOWNLOADER_MIDDLEWARES": {"crawl_helpers.ThroughLocalProxy": 700}}
    result = run(tmp_path, web, settings)
    assert_complete_and_polite(web, result)
    stats = result.crawl_stats
    assert stats["count/proxied"] == stats["downloader/request_count"]
    assert stats["twolevel/metrics/responses"] == len(web.reachable())
    # Twisted's proxy opens a connection per request: the server saw the proxy, not Scrapy.
    total = result.server.total
    assert total.connections_total == total.responses_total == len(web.reachable())
