"""Real-project conformance: crawls with the settings and components real projects use.

Each scenario is a real ``scrapy crawl`` of the test web (a subprocess, real sockets) with
the add-on, and asserts what a user relies on: every page once, at most one request in
flight per host *as the server counts them* (robots.txt and media downloads included), and
no ERROR line. Where the comparison means something, the same crawl runs on Scrapy's
stock components too.
"""

from __future__ import annotations

import json
import re

import pytest
from crawl_helpers import crawl_process

from scrapy_twolevel.testweb import HostProfile, generate_web
from scrapy_twolevel.testweb.spider import CrawlResult
from scrapy_twolevel.testweb.web import FILES_PREFIX

ADDON = {"ADDONS": {"scrapy_twolevel.Addon": 0}, "CONCURRENT_REQUESTS": 4}


def web_of(n_hosts=4, pages=6, **limits):
    profile = HostProfile(connect_delay=0.002, response_delay=0.004, **limits)
    return generate_web(n_hosts, pages, seed=5, host_profiles=[profile] * n_hosts)


def run(tmp_path, web, settings, *, scrapys_errors=""):
    """The crawl's result; it must end normally and log no ERROR line but those that
    Scrapy's own components log for the scenario (``scrapys_errors``, a regex that each
    such line matches), as they do with the stock scheduler."""
    proc, out = crawl_process(tmp_path, web, settings)
    assert proc.returncode == 0, proc.stderr[-3000:]
    errors = [line for line in proc.stderr.splitlines() if " ERROR: " in line]
    assert [e for e in errors if not (scrapys_errors and re.search(scrapys_errors, e))] == []
    return CrawlResult.from_dict(json.loads(out.read_text()))


def assert_complete_and_polite(web, result):
    assert result.server.fetch_counts() == {page: 1 for page in web.reachable()}
    in_flight = result.server.max_concurrent_requests_per_host()
    assert max(in_flight.values()) == 1, in_flight
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


def test_files_pipeline_downloads_are_polite_and_not_pages(tmp_path):
    """Each page brings two files, downloaded by the Files pipeline outside the scheduler:
    never in flight beside the host's next page, and never counted toward its budget."""
    web = web_of(n_hosts=3, pages=5)
    settings = {
        **ADDON,
        "ITEM_PIPELINES": {"scrapy.pipelines.files.FilesPipeline": 1},
        "FILES_STORE": str(tmp_path / "files"),
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
    # Files counted as pages gave up each host after its first page and two files.
    assert stats.get("twolevel/dropped/budget", 0) == 0


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
    status = {k[4:]: v for k, v in result.crawl_stats.items() if k.startswith("est/")}
    assert status and not [k for k, v in status.items() if "(exception)" in v], status
    memory, disk = (
        int(status["len(engine.scheduler.mqs)"]),
        int(status["len(engine.scheduler.dqs or [])"]),
    )
    assert (memory > 0, disk > 0) == ((False, True) if jobdir else (True, False))
