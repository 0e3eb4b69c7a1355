"""Integration: politeness that listens, in real crawls of the local test web.

Hosts that refuse requests coming faster than their rate (429 or 503, with or without
``Retry-After``), a host that goes down mid-crawl and comes back, one broken URL on a host
that serves the rest, and a robots.txt ``Crawl-delay``. The server counts what the crawler
did to each host, so refusals, politeness and lost pages are judged from its side.
"""

from __future__ import annotations

import itertools

import pytest
from crawl_helpers import crawl, free_port

from scrapy_twolevel.testweb import (
    BROKEN_PATH,
    SLOW_BODY_PATH,
    UNAVAILABLE_PATH,
    HostProfile,
    generate_web,
    host_address,
)

pytestmark = pytest.mark.crawl

TWOLEVEL = {
    "SCHEDULER": "scrapy_twolevel.scheduler.TwoLevelScheduler",
    "DOWNLOADER_MIDDLEWARES": {"scrapy_twolevel.middleware.HostMetricsMiddleware": 950},
    "CONCURRENT_REQUESTS": 4,
}
#: Failure handling scaled to a crawl of seconds (the defaults suit crawls of hours).
FAST_FAILURES = {
    "DOWNLOAD_TIMEOUT": 1,
    "TWOLEVEL_BACKOFF": 0.2,
    "TWOLEVEL_BACKOFF_MAX": 0.4,
}


def assert_every_page_once_and_polite(result, web):
    assert result.server.fetch_counts() == {page: 1 for page in web.reachable()}
    in_flight = result.server.max_concurrent_requests_per_host()
    assert max(in_flight.values()) == 1, in_flight


def rate_limited_web(status, retry_after):
    limited = HostProfile(
        connect_delay=0.002,
        response_delay=0.005,
        max_requests_per_connection=50,
        min_interval=0.2,
        refusal_status=status,
        retry_after=retry_after,
    )
    return generate_web(4, 10, seed=5, host_profiles=[limited] * 4)


@pytest.mark.parametrize(
    ("status", "retry_after"), [(429, True), (429, False), (503, True), (503, False)]
)
def test_refusing_hosts_are_paced_and_lose_no_page(tmp_path, status, retry_after):
    """A 429 or a 503, with Retry-After or not (nginx's limit_req answers a bare 503),
    is a refusal. The first parks the host
    (Retry-After: 1 s, or the learnt gap) and sets its gap to 0.5 s (REFUSAL_GAP_MIN),
    above the server's 0.2 s; ten pages shrink it by 0.98 each, to 0.41 s at least: no
    second refusal. The refused request is sent again by the middleware, so
    RetryMiddleware never retries one."""
    web = rate_limited_web(status, retry_after)
    result = crawl(tmp_path, web, TWOLEVEL)
    assert_every_page_once_and_polite(result, web)
    stats = result.crawl_stats
    refused = {i: h.refusals for i, h in result.server.hosts.items()}
    assert all(1 <= n <= 2 for n in refused.values()), refused
    assert stats["twolevel/refusals"] == sum(refused.values())
    assert stats[f"twolevel/refusals/{status}"] == sum(refused.values())
    assert stats["twolevel/refusals/sent_again"] == sum(refused.values())
    assert stats["twolevel/hosts_refusing"] == len(web.hosts)
    assert "retry/count" not in stats  # no attempt of RetryMiddleware's was used


def test_a_url_that_keeps_answering_a_bare_503_is_an_error_page(tmp_path):
    """/_unavailable answers 503 without Retry-After every time, on a host that serves its
    other pages. A rate limit cannot be told from one such answer: its first 5 refusals
    each park the host, grow its gap (0.5, 0.75, 1.125, 1.69, 2.53 s) and are sent again;
    then it is an error page: RetryMiddleware retries it twice, as in stock Scrapy, and
    the gap its refusals taught the host is undone (2.53 / 1.5^5 < 0.5 s: none is left).
    No page of the host is lost."""
    web = generate_web(
        2, 10, seed=3, host_profiles=[HostProfile(connect_delay=0.002, response_delay=0.005)] * 2
    )
    port = free_port()
    unavailable = f"http://{host_address(0)}:{port}{UNAVAILABLE_PATH}"
    result = crawl(tmp_path, web, TWOLEVEL, port=port, extra_seeds=[unavailable])
    assert_every_page_once_and_polite(result, web)
    # 5 refusals, then the request passed on and RetryMiddleware's 2 retries: 8 answers.
    assert result.server.hosts[0].paths[UNAVAILABLE_PATH] == 5 + 1 + 2
    stats = result.crawl_stats
    assert stats["twolevel/refusals/503"] == stats["twolevel/refusals/sent_again"] == 5
    assert stats["twolevel/refusals/taken_for_errors"] == 3
    assert stats["retry/count"] == 2 and stats["retry/max_reached"] == 1
    assert stats[f"twolevel/host/{host_address(0)}/refusal_gap"] == 0.0


def test_refusals_passed_on_after_the_refusal_retries(tmp_path):
    """TWOLEVEL_REFUSAL_RETRIES=0: the host still waits, but a refusal goes on to
    RetryMiddleware as in stock Scrapy."""
    web = rate_limited_web(429, True)
    result = crawl(tmp_path, web, {**TWOLEVEL, "TWOLEVEL_REFUSAL_RETRIES": 0})
    stats = result.crawl_stats
    assert "twolevel/refusals/sent_again" not in stats
    assert stats["retry/count"] == stats["twolevel/refusals"] >= len(web.hosts)
    assert max(result.server.max_concurrent_requests_per_host().values()) == 1


def outage_web():
    steady = HostProfile(connect_delay=0.002, response_delay=0.01, max_requests_per_connection=50)
    # Host 0 resets every request for 2 s, from 0.3 s after its first request; its 30 pages
    # at 30 ms each take longer than 0.3 s, so the outage comes mid-crawl.
    down = HostProfile(
        connect_delay=0.002,
        response_delay=0.03,
        max_requests_per_connection=50,
        outage_start=0.3,
        outage_length=2.0,
    )
    return generate_web(3, 30, seed=7, host_profiles=[down, steady, steady])


def test_a_host_down_for_a_while_mid_crawl_loses_no_page(tmp_path):
    """It answered before, so it is kept (TWOLEVEL_GIVE_UP_AFTER) and probed; the requests
    that fail while it is backed off go back to its queue without using up an attempt."""
    web = outage_web()
    result = crawl(tmp_path, web, {**TWOLEVEL, **FAST_FAILURES, "TWOLEVEL_GIVE_UP_AFTER": 30})
    assert_every_page_once_and_polite(result, web)
    stats = result.crawl_stats
    assert stats["twolevel/failures/broken"] >= 2  # the outage was seen
    assert stats["twolevel/failures/sent_again"] >= 1
    assert "twolevel/hosts_given_up" not in stats


def test_a_host_failing_longer_than_give_up_after_is_given_up(tmp_path):
    """The same outage against TWOLEVEL_GIVE_UP_AFTER=0.5: now it is given up, and its
    queue dropped and counted (the contrast that shows the setting decides)."""
    web = outage_web()
    result = crawl(tmp_path, web, {**TWOLEVEL, **FAST_FAILURES, "TWOLEVEL_GIVE_UP_AFTER": 0.5})
    stats = result.crawl_stats
    assert stats["twolevel/hosts_given_up"] == 1
    fetched = result.server.fetch_counts()
    lost = web.reachable() - set(fetched)
    assert lost and {web.pages[p].host for p in lost} == {0}


def test_one_broken_url_does_not_give_its_host_up(tmp_path):
    """/_broken resets its connection on every attempt: under the old rules its three
    failed one-request sessions gave the host up (TWOLEVEL_FAILED_SESSIONS=3) and dropped
    the host's other pages; now a retry's failure counts against the host only when it
    came before the host's other URLs, and the host serves the rest."""
    web = generate_web(
        2, 10, seed=3, host_profiles=[HostProfile(connect_delay=0.002, response_delay=0.005)] * 2
    )
    port = free_port()
    broken = f"http://{host_address(0)}:{port}{BROKEN_PATH}"
    result = crawl(tmp_path, web, {**TWOLEVEL, **FAST_FAILURES}, port=port, extra_seeds=[broken])
    assert_every_page_once_and_polite(result, web)
    stats = result.crawl_stats
    # Its three attempts (RETRY_TIMES=2), and one more each time it failed while its host
    # was backed off (sent back without using an attempt, behind the host's other URLs).
    again = stats.get("twolevel/failures/sent_again", 0)
    assert stats["twolevel/failures/broken"] == 3 + again
    assert stats["twolevel/failures/repeat"] == 2 + again
    assert stats["retry/count"] == 2  # RetryMiddleware did its usual work on the URL
    assert "twolevel/hosts_given_up" not in stats


def test_robots_crawl_delay_spaces_that_hosts_requests(tmp_path):
    fast = HostProfile(connect_delay=0.002, response_delay=0.005, max_requests_per_connection=50)
    delayed = HostProfile(
        connect_delay=0.002, response_delay=0.005, max_requests_per_connection=50, crawl_delay=0.3
    )
    web = generate_web(2, 8, seed=2, n_seeds=2, host_profiles=[delayed, fast])
    result = crawl(tmp_path, web, {**TWOLEVEL, "ROBOTSTXT_OBEY": True})
    assert_every_page_once_and_polite(result, web)
    assert result.crawl_stats["twolevel/crawl_delay_hosts"] == 1

    def gaps(host):
        times = [e.time for e in result.server.events if e.host == host and e.page_id is not None]
        return [b - a for a, b in itertools.pairwise(times)]

    # 0.3 s between request starts; the server times its responses, and a new connection
    # adds 2 ms to one of them (connect_delay), loopback a few more
    assert min(gaps(0)) >= 0.28
    assert min(gaps(1)) < 0.3  # the other host is not held to it


def test_host_budgets_cap_pages_per_host(tmp_path):
    profile = HostProfile(connect_delay=0.002, response_delay=0.003, max_requests_per_connection=50)
    web = generate_web(3, 20, seed=4, n_seeds=3, host_profiles=[profile] * 3)
    settings = {
        **TWOLEVEL,
        "TWOLEVEL_HOST_BUDGET": 5,
        "TWOLEVEL_HOST_BUDGETS": {host_address(1): 0},  # this one has none
    }
    result = crawl(tmp_path, web, settings)
    fetched = {}
    for page in result.server.fetch_counts():
        host = web.pages[page].host
        fetched[host] = fetched.get(host, 0) + 1
    reachable = {h: sum(web.pages[p].host == h for p in web.reachable()) for h in range(3)}
    assert fetched == {0: 5, 1: reachable[1], 2: 5}
    stats = result.crawl_stats
    assert stats["twolevel/hosts_at_budget"] == 2
    assert stats["twolevel/dropped/budget"] >= 1
    assert "twolevel/hosts_given_up" not in stats


def test_a_given_up_hosts_requests_leave_the_jobdir_store(tmp_path):
    """Its queued rows are deleted, not left leased: a resumed crawl must not queue them
    again (before, they came back on every resume)."""
    import sqlite3

    profile = HostProfile(connect_delay=0.002, response_delay=0.003, max_requests_per_connection=50)
    web = generate_web(
        4, 15, seed=3, n_seeds=4, host_profiles=[profile] * 4, failures={1: "refuse"}
    )
    jobdir = tmp_path / "job"
    settings = {**TWOLEVEL, **FAST_FAILURES, "JOBDIR": str(jobdir)}
    result = crawl(tmp_path, web, settings)
    stats = result.crawl_stats
    assert stats["twolevel/hosts_given_up"] == 1
    assert stats["twolevel/dropped/host_failed"] >= 1
    with sqlite3.connect(jobdir / "twolevel" / "frontier.sqlite3") as db:
        assert db.execute("SELECT COUNT(*) FROM requests").fetchone()[0] == 0


#: A download timeout no test crawl below comes near unless a hang takes all of it.
LONG_TIMEOUT = 60
#: Settings of a crawl whose hosts that never answer get 0.2 s, not DOWNLOAD_TIMEOUT.
SILENT_HOSTS = {
    **TWOLEVEL,
    **FAST_FAILURES,
    "DOWNLOAD_TIMEOUT": LONG_TIMEOUT,
    "TWOLEVEL_FIRST_ANSWER_TIMEOUT": 0.2,
}


def crawl_with_hang_hosts(tmp_path, n_hosts, pages_per_host, n_seeds=None, **settings):
    """Crawl a web whose hosts 1 and 4 never answer; every page of the others fetched once,
    politely, and both hang hosts given up. Returns the crawl's stats."""
    web = generate_web(
        n_hosts,
        pages_per_host,
        seed=3,
        n_seeds=n_seeds,
        failures={1: "hang", 4: "hang"},
        host_profiles=[HostProfile(connect_delay=0.002, response_delay=0.005)] * n_hosts,
    )
    result = crawl(tmp_path, web, {**SILENT_HOSTS, **settings})
    assert_every_page_once_and_polite(result, web)
    assert result.crawl_stats["twolevel/hosts_given_up"] == 2
    return result.crawl_stats


def test_a_host_that_never_answered_times_out_sooner(tmp_path):
    """Two hosts that accept connections and never answer, DOWNLOAD_TIMEOUT 60 s: each of
    their requests gets TWOLEVEL_FIRST_ANSWER_TIMEOUT (0.2 s), doubled per timeout, so the
    crawl ends long before a single 60-s timeout could (with the old rule it took at
    least 60 s), and every other page is fetched."""
    stats = crawl_with_hang_hosts(tmp_path, 6, 8)
    timeouts = stats["twolevel/failures/slow"]
    assert timeouts >= 4  # at least two failed sessions per host
    # Every request to them was shortened, and the first one of each of the 4 hosts
    # that answer (one request in flight per host), none after.
    assert stats["twolevel/metrics/first_answer_timeouts"] == timeouts + 4
    assert stats["elapsed_time_seconds"] < LONG_TIMEOUT


def test_a_host_that_never_answered_gives_its_place_up_while_others_wait(tmp_path):
    """Eight seed hosts for two places, two of them never answer: each timeout within
    the first-answer time backs such a host off at once, and its request goes back to
    its queue for the probe, so no RetryMiddleware attempt is spent holding a place that
    six answering hosts wait for (with SESSION_FAILURES = 2, the first timeout was
    retried at once, a second 0.4-s hold of the place)."""
    stats = crawl_with_hang_hosts(tmp_path, 8, 6, n_seeds=8, CONCURRENT_REQUESTS=2)
    # RetryMiddleware's attempts: at most the one after each host's last failure, when it
    # is given up (that copy is dropped); the old rule spent two per host (4 here).
    assert stats.get("retry/count", 0) <= 2
    assert stats["twolevel/failures/sent_again"] >= 2  # one per host at least, for its probe


def test_a_slow_host_that_answers_gets_the_full_timeout_from_then_on(tmp_path):
    """Every response of host 0 takes 0.25 s, longer than its first-answer timeout (0.1 s):
    its first attempts time out (0.1, then 0.2 s), a later one (0.4 s or more) gets an
    answer, and from then on its requests get DOWNLOAD_TIMEOUT: no page lost, no more
    timeouts. The shortened attempts use up no RetryMiddleware attempt (RETRY_TIMES = 0
    here; with 2, a loaded machine once lost host 0's seed when 0.4 s was not enough)."""
    slow = HostProfile(connect_delay=0.002, response_delay=0.25)
    fast = HostProfile(connect_delay=0.002, response_delay=0.005)
    web = generate_web(2, 6, seed=4, n_seeds=2, host_profiles=[slow, fast])
    settings = {
        **TWOLEVEL,
        **FAST_FAILURES,
        "DOWNLOAD_TIMEOUT": LONG_TIMEOUT,
        "TWOLEVEL_FIRST_ANSWER_TIMEOUT": 0.1,
        "RETRY_TIMES": 0,
    }
    result = crawl(tmp_path, web, settings)
    assert set(result.server.fetch_counts()) == web.reachable()
    assert max(result.server.max_concurrent_requests_per_host().values()) == 1
    stats = result.crawl_stats
    # At least two timeouts (0.1 s, 0.2 s < 0.25 s), then an answer; shortened: each of
    # those, the attempt that got the answer, and the fast host's first request; none after.
    timeouts = stats["twolevel/failures/slow"]
    assert timeouts >= 2
    assert stats["twolevel/metrics/first_answer_timeouts"] == timeouts + 2
    assert stats["twolevel/failures/sent_again"] == timeouts
    assert "twolevel/hosts_given_up" not in stats


def test_a_hosts_first_headers_count_as_its_answer(tmp_path):
    """The first request to host 1 is /_slow_body: its headers come at once, its body
    1.5 s later. Cut at the first-answer timeout (0.5 s), but the host has answered, so
    the retry gets DOWNLOAD_TIMEOUT and is fetched: one timeout, not three (0.5, 1, 2 s)."""
    web = generate_web(2, 4, seed=2, n_seeds=1, host_profiles=[HostProfile(0.002, 0.005)] * 2)
    seeded = {web.pages[p].host for p in web.seeds}
    (other,) = {0, 1} - seeded
    port = free_port()
    slow = f"http://{host_address(other)}:{port}{SLOW_BODY_PATH}"
    settings = {
        **TWOLEVEL,
        **FAST_FAILURES,
        "TWOLEVEL_POLICY": "breadth-first",  # URLs first come, first served
        "DOWNLOAD_TIMEOUT": LONG_TIMEOUT,
        "TWOLEVEL_FIRST_ANSWER_TIMEOUT": 0.5,
    }
    result = crawl(tmp_path, web, settings, port=port, extra_seeds=[slow])
    assert_every_page_once_and_polite(result, web)
    stats = result.crawl_stats
    assert stats["twolevel/failures/slow"] == 1
    # Sent again by the host metrics middleware, no RetryMiddleware attempt used: fetched.
    assert stats["twolevel/failures/sent_again"] == 1 and "retry/count" not in stats
    # Shortened: the slow body's first attempt and host 0's first request, no other.
    assert stats["twolevel/metrics/first_answer_timeouts"] == 2
