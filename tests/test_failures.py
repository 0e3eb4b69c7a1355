"""Failing hosts in the pure frontier: estimates, early session end, back-off, give-up.

Every expected number is worked out by hand from the rules in
``scrapy_twolevel/frontier/failures.py`` and ``HostEstimate.observe_failure``.
"""

from __future__ import annotations

import pytest
from helpers import FakeClock

from scrapy_twolevel.frontier import (
    BreadthFirst,
    CostParams,
    CrawlCapability,
    HostEstimate,
    Measurement,
    PerformanceFirst,
    QualityFirst,
    TwoLevelFrontier,
)
from scrapy_twolevel.frontier.failures import FailurePolicy, RefusedUrls, SilentHosts

pytestmark = pytest.mark.unit

PARAMS = CostParams(
    default_requests_per_connection=50,
    keepalive_speedup=1.2,
    alpha=0.8,
    default_connection_time=0.1,
    default_response_time=0.1,
)
RULES = FailurePolicy(session_failures=2, backoff=10.0, backoff_max=25.0, failed_sessions=3)


def frontier(policy=None, max_open=1, rules=RULES, **kwargs):
    clock = FakeClock(100.0)
    given_up = []
    f = TwoLevelFrontier(
        policy or BreadthFirst(),
        PARAMS,
        max_open,
        failures=rules,
        clock=clock,
        on_give_up=lambda host, dropped, why: given_up.append((host, dropped)),
        jitter=kwargs.pop("jitter", lambda: 0.0),  # waits as computed; jitter tested alone
        **kwargs,
    )
    return f, clock, given_up


def fail(f, host, *, timeout=False, elapsed=0.001, repeat=False, silent=False):
    f.observe_failure(host, elapsed=elapsed, timeout=timeout, repeat=repeat, silent=silent)
    f.done(host)


def answer(f, host):
    f.observe(
        host,
        Measurement(
            latency=0.01, new_connection=True, served_on_connection=1, closed_by_server=False
        ),
    )
    f.done(host)


def test_backoff_doubles_and_is_capped():
    assert [RULES.backoff_delay(n) for n in (0, 1, 2, 3, 4)] == [0.0, 10.0, 20.0, 25.0, 25.0]
    assert RULES.backoff_delay(10_000) == 25.0  # no float overflow on a long streak
    never_answered = [RULES.gives_up(n, answered=False, failing_for=0.0) for n in (1, 2, 3)]
    assert never_answered == [False, False, True]
    assert not FailurePolicy(failed_sessions=0).gives_up(1_000, answered=False, failing_for=0)
    # A host that answered before is kept until it has failed for give_up_after (3600 s).
    assert not RULES.gives_up(3, answered=True, failing_for=3599.0)
    assert RULES.gives_up(3, answered=True, failing_for=3600.0)
    assert not RULES.gives_up(2, answered=True, failing_for=1e9)  # and failed 3 sessions
    keep = FailurePolicy(give_up_after=0.0)
    assert not keep.gives_up(1_000, answered=True, failing_for=1e9)  # 0: never


def test_jitter_lengthens_waits_by_at_most_a_tenth():
    assert RULES.backoff_delay(1, 0.0) == 10.0
    assert RULES.backoff_delay(1, 0.5) == pytest.approx(10.5)  # 10 * (1 + 0.1 * 0.5)
    assert RULES.backoff_delay(3, 0.999) == pytest.approx(25.0 * 1.0999)  # cap, then jitter
    f, clock, _ = frontier(jitter=lambda: 0.5)
    for i in range(4):
        f.push("h", 1.0, i)
    f.pop()
    fail(f, "h")
    f.pop()
    fail(f, "h")
    assert f.next_retry_at() == pytest.approx(clock.now + 10.5)


def test_timeout_is_a_response_time_sample_and_lowers_the_success_rate():
    est = HostEstimate.new(PARAMS)
    est.observe_failure(PARAMS, elapsed=30.0, timeout=True)
    # first response-time sample replaces the prior; success rate 0.8*1 + 0.2*0
    assert est.response_time == 30.0
    assert est.connection_time == 0.1
    assert est.success_rate == pytest.approx(0.8)
    est.observe_failure(PARAMS, elapsed=10.0, timeout=True)
    assert est.response_time == pytest.approx(0.8 * 30 + 0.2 * 10)  # 26.0
    assert est.success_rate == pytest.approx(0.64)
    assert est.samples == 2 and est.outcome_samples == 2


def test_connection_failure_is_a_connection_time_sample():
    est = HostEstimate.new(PARAMS)
    est.observe_failure(PARAMS, elapsed=0.002, timeout=False)
    assert est.connection_time == 0.002
    assert est.response_time == 0.1
    est.observe(
        PARAMS,
        Measurement(
            latency=0.05, new_connection=False, served_on_connection=2, closed_by_server=False
        ),
    )
    assert est.success_rate == pytest.approx(0.8 * 0.8 + 0.2 * 1.0)  # 0.84


def test_success_rate_scales_performance_first_and_crawl_capability_scores():
    est = HostEstimate.new(PARAMS)
    est.observe_failure(PARAMS, elapsed=0.1, timeout=False)  # connection time stays 0.1
    f, _, _ = frontier()
    for i in range(3):
        f.push("h", 1.0, i)
    queue = f.host("h").queue
    # P = min(50, 3) = 3; T = 2*0.1 + 3*0.1/1.2 = 0.45; S = 0.8
    assert PerformanceFirst().score(queue, est, PARAMS) == pytest.approx(0.8 * 3 / 0.45)
    f2, _, _ = frontier(CrawlCapability())
    for i in range(3):
        f2.push("h", 1.0, i)
    # Measured crawl-capability, nothing measured but the failure: P = 1, T = 0 + 1 * (the
    # prior 0.1 + 0.1, no processing) = 0.2; S = 0.8
    gathered = 1.0 + 1e-9
    assert CrawlCapability().score(f2.host("h").queue, est, PARAMS) == pytest.approx(
        0.8 * gathered / 0.2
    )


def test_session_ends_after_failures_in_a_row_and_the_host_backs_off():
    f, clock, _ = frontier()
    for i in range(5):
        f.push("bad", 1.0, f"b{i}")
    f.push("good", 1.0, "g0")
    assert f.pop() == ("bad", "b0")
    fail(f, "bad")  # one failure: the session goes on
    assert f.pop() == ("bad", "b1")
    fail(f, "bad")  # two in a row: the session ends, the host is backed off for 10 s
    assert f.failed_sessions == 1
    assert f.next_retry_at() == 110.0
    assert f.pop() == ("good", "g0")  # the other host gets the place
    f.done("good")
    assert f.pop() is None and len(f) == 3  # only the backed-off host is left: wait
    clock.now = 109.9
    assert f.pop() is None
    clock.now = 110.0
    assert f.pop() == ("bad", "b2")


def test_a_response_ends_both_streaks():
    f, clock, given_up = frontier()
    for i in range(10):
        f.push("h", 1.0, i)
    f.pop()
    fail(f, "h")
    f.pop()
    fail(f, "h")  # failed session 1
    clock.now += 10
    f.pop()
    f.observe(
        "h",
        Measurement(
            latency=0.01, new_connection=True, served_on_connection=1, closed_by_server=False
        ),
    )
    f.done("h")
    host = f.host("h")
    assert (host.failures, host.failed_sessions) == (0, 0)
    f.pop()
    fail(f, "h")
    f.pop()
    fail(f, "h")  # a new streak starts again at one failed session: 10 s, not 20 s
    assert f.next_retry_at() == clock.now + 10.0
    assert given_up == []


def test_one_failed_url_does_not_back_off_its_host_the_next_one_does():
    """One-request sessions: the failures still count in a row, across sessions."""
    f, clock, _ = frontier()
    f.set_estimate("h", HostEstimate(0.1, 0.1, 1.0))  # one request per session
    for i in range(4):
        f.push("h", 1.0, i)
    f.pop()
    fail(f, "h")  # budget 1 spent, that one request failed: streak 1, not yet a failed session
    assert f.failed_sessions == 0 and f.next_retry_at() is None
    assert f.pop() == ("h", 1)
    fail(f, "h")  # a second URL fails in a row: the session failed, back off
    assert f.failed_sessions == 1 and f.next_retry_at() == clock.now + 10.0


def test_a_url_that_fails_again_counts_once_against_its_host():
    """RetryMiddleware's retries of a host's only URL: Scrapy retries at once, and nobody
    can tell the URL's fault from the host's, so the host is not backed off."""
    f, _, given_up = frontier()
    f.push("h", 1.0, "u")
    f.pop()
    fail(f, "h")  # the URL's first failure: streak 1
    for _ in range(5):  # its retries (pushed back by RetryMiddleware) fail again
        f.push("h", 1.0, "retry")
        f.pop()
        fail(f, "h", repeat=True)
    host = f.host("h")
    assert (host.failures, f.failed_sessions, f.repeat_failures) == (1, 0, 5)
    assert f.next_retry_at() is None and given_up == []
    assert f.host("h").estimate.outcome_samples == 6  # the estimate learns from all six


def test_a_url_failing_again_before_the_hosts_other_urls_counts():
    """A host that went down: its best URL fails, and its retry fails before any other
    URL of the host was tried: that is the host's second failure in a row."""
    f, clock, _ = frontier(QualityFirst())
    for i in range(3):
        f.push("h", 1.0, f"u{i}")
    f.pop()
    fail(f, "h")
    f.push("h", 5.0, "retry")  # ahead of the others
    assert f.pop() == ("h", "retry")
    fail(f, "h", repeat=True)
    assert f.failed_sessions == 1 and f.next_retry_at() == clock.now + 10.0


def test_a_host_that_answered_is_kept_until_give_up_after_then_given_up():
    rules = FailurePolicy(
        session_failures=1, backoff=10.0, backoff_max=25.0, failed_sessions=3, give_up_after=100
    )
    f, clock, given_up = frontier(rules=rules)
    for i in range(20):
        f.push("h", 1.0, i)
    f.pop()
    answer(f, "h")  # it served a page, then goes down
    started = clock.now
    waits = []
    while not given_up:
        assert f.pop() is not None
        fail(f, "h")
        retry = f.next_retry_at()
        if retry is not None:
            waits.append(retry - clock.now)
            clock.now = retry
    # back-offs 10, 20, 25, 25, 25: failing since `started`; at 100 s (after the fifth
    # wait) the sixth failed session gives it up
    assert waits == [10.0, 20.0, 25.0, 25.0, 25.0]
    assert clock.now - started == 105.0
    assert given_up == [("h", 13)]  # 20 - 1 answered - 6 failed


def test_failures_spread_over_sessions_still_count_in_a_row():
    """A session with a success that ends on a failure leaves the streak running."""
    f, clock, _ = frontier()
    f.set_estimate("h", HostEstimate(0.1, 0.1, 2.0))  # two requests per session
    for i in range(6):
        f.push("h", 1.0, i)
    f.pop()
    f.observe(
        "h",
        Measurement(
            latency=0.01, new_connection=True, served_on_connection=1, closed_by_server=False
        ),
    )
    f.done("h")
    f.pop()
    fail(f, "h")  # budget spent, one success in it: a normal end, streak 1
    assert f.failed_sessions == 0 and f.next_retry_at() is None
    f.pop()
    fail(f, "h")  # second failure in a row, in the next session: a failed session
    assert f.failed_sessions == 1 and f.next_retry_at() == clock.now + 10.0


def test_host_is_given_up_after_failed_sessions_in_a_row_and_its_urls_dropped():
    f, clock, given_up = frontier(max_open=2)
    f.push("busy", 1.0, "b")
    assert f.pop() == ("busy", "b")  # in flight all along: the crawl is not only failing hosts
    for i in range(10):
        f.push("dead", 1.0, i)
    waits = []
    for session in range(3):
        for _ in range(2 if session == 0 else 1):  # after a back-off: a one-request probe
            assert f.pop() is not None
            fail(f, "dead", timeout=True, elapsed=5.0)
        assert f.pop() is None
        retry = f.next_retry_at()
        if retry is not None:
            waits.append(retry - clock.now)
            clock.now = retry
    assert waits == [10.0, 20.0]  # the third failed session gives up: no third wait
    assert given_up == [("dead", 6)]  # 10 queued - 2 tried - 2 probes
    assert (f.hosts_given_up, f.dropped_host_failed, len(f)) == (1, 6, 0)
    assert f.push("dead", 1.0, "late") is False  # later URLs are dropped as they come
    assert f.dropped_host_failed == 7 and len(f) == 0
    assert f.pop() is None
    answer(f, "busy")
    assert f.push("alive", 1.0, "x") is True and f.pop() == ("alive", "x")


def test_never_give_up_when_failed_sessions_is_zero():
    rules = FailurePolicy(session_failures=1, backoff=0.0, backoff_max=0.0, failed_sessions=0)
    f, _, given_up = frontier(rules=rules)
    for i in range(20):
        f.push("h", 1.0, i)
    for _ in range(20):
        popped = f.pop()
        assert popped is not None  # no back-off with backoff=0: tried again at once
        fail(f, "h")
    assert given_up == [] and f.failed_sessions == 20 and len(f) == 0


def test_backed_off_host_is_not_opened_even_when_pushed_to():
    f, clock, _ = frontier(max_open=2)
    for i in range(3):
        f.push("bad", 1.0, i)
    f.pop()
    fail(f, "bad")
    f.pop()
    fail(f, "bad")
    f.push("bad", 1.0, "new")  # a new URL must not rank the backed-off host
    assert f.pop() is None
    clock.now = f.next_retry_at()
    assert f.pop()[0] == "bad"


def test_no_limit_on_open_hosts():
    f, _, _ = frontier(max_open=None)
    for h in range(100):
        f.push(f"h{h}", 1.0, h)
    popped = [f.pop() for _ in range(100)]
    assert all(p is not None for p in popped)
    assert f.open_hosts == 100 and f.pop() is None  # every host busy


def test_after_a_back_off_one_probe_then_full_sessions_once_it_answers():
    # Sessions not extended: the probe's own session ends after its one request.
    f, clock, _ = frontier(extend_sessions=False)
    for i in range(10):
        f.push("h", 1.0, i)
    f.pop()
    fail(f, "h")
    f.pop()
    fail(f, "h")  # failed session: back off
    clock.now = f.next_retry_at()
    f.pop()
    assert f.host("h").session_budget == 1  # the probe
    f.observe(
        "h",
        Measurement(
            latency=0.01, new_connection=True, served_on_connection=1, closed_by_server=False
        ),
    )
    f.done("h")  # it answered: the probe session ends normally, the streaks are reset
    assert f.failed_sessions == 1 and f.next_retry_at() is None
    f.pop()
    assert f.host("h").session_budget == 7  # min(50 per connection, 7 queued): full again


def test_a_host_down_for_five_minutes_loses_nothing_under_the_defaults():
    """The issue's case, on a fake clock with the default FailurePolicy: a host that served
    pages goes down for 300 s and comes back. What the middleware does is played here: a
    failure at a backed-off host sends the URL back without using an attempt (ranked
    behind the host's others); any other failure uses one of RetryMiddleware's two retries,
    and a URL whose third counted attempt fails would be lost."""
    f, clock, given_up = frontier(rules=FailurePolicy(), max_open=None)
    for i in range(50):
        f.push("h", 1.0, (i, 0))  # (url, counted attempts so far)
    down = (clock.now + 1.0, clock.now + 301.0)
    lost, served, penalty = [], 0, 0
    while len(f):
        popped = f.pop()
        if popped is None:
            clock.now = f.next_retry_at()
            continue
        url, counted = popped[1]
        clock.now += 0.05
        if down[0] <= clock.now < down[1]:
            f.observe_failure("h", elapsed=0.05, timeout=False, repeat=counted > 0)
            f.done("h")
            if f.backed_off("h"):
                penalty += 1
                f.push("h", -penalty, (url, counted))  # sent back, no attempt used
            elif counted < 2:
                f.push("h", 1.0 - 1 - counted, (url, counted + 1))  # RetryMiddleware
            else:
                lost.append(url)
        else:
            answer(f, "h")
            served += 1
    assert (given_up, lost, served) == ([], [], 50)
    assert clock.now > down[1]  # it was served again after the outage


def test_when_only_failing_hosts_are_left_one_that_never_answered_goes_at_its_second_failure():
    """FAILED_SESSIONS is 3, but with nothing else to crawl a third probe would only hold
    the crawl open: a host that never answered goes at its second failed session then.
    While another host has a request in flight, the third is waited for."""
    f, clock, given_up = frontier(max_open=2)
    f.push("busy", 1.0, "b0")
    assert f.pop() == ("busy", "b0")  # in flight all along
    for i in range(5):
        f.push("dead", 1.0, f"d{i}")
    for expected in ("d0", "d1"):  # a session ends after 2 failures in a row
        assert f.pop() == ("dead", expected)
        fail(f, "dead", timeout=True)
    assert f.next_retry_at() == 110.0  # failed session 1: back off 10 s
    clock.now = 110.0
    assert f.pop() == ("dead", "d2")
    fail(f, "dead", timeout=True)  # failed session 2; busy is in flight: not the end game
    assert given_up == [] and f.next_retry_at() == 130.0
    clock.now = 130.0
    assert f.pop() == ("dead", "d3")
    fail(f, "dead", timeout=True)  # failed session 3: given up by the ordinary rule
    assert given_up == [("dead", 1)]

    f, clock, given_up = frontier(max_open=2)
    for i in range(5):
        f.push("dead", 1.0, f"d{i}")
    for expected in ("d0", "d1"):
        assert f.pop() == ("dead", expected)
        fail(f, "dead", timeout=True)
    assert given_up == [] and f.next_retry_at() == 110.0  # alone, it still gets a probe
    clock.now = 110.0
    assert f.pop() == ("dead", "d2")
    fail(f, "dead", timeout=True)  # failed session 2 with nothing else left: given up
    assert given_up == [("dead", 2)]


def test_the_end_game_counts_open_hosts_that_only_failed_as_failing():
    """Dead hosts come in groups: while one waits out its back-off, another is open with
    a timeout running. That one has never answered and has failed: it is no work for the
    crawl either, so the first is given up at its second failed session all the same."""
    f, clock, given_up = frontier(max_open=2)
    for i in range(5):
        f.push("dead", 1.0, f"d{i}")
    f.push("other", 1.0, "o0")
    f.push("other", 1.0, "o1")
    assert dict([f.pop(), f.pop()]) == {"dead": "d0", "other": "o0"}
    fail(f, "dead", timeout=True)
    fail(f, "other", timeout=True)  # both still open, one failure each
    assert f.pop() == ("dead", "d1")
    assert f.pop() == ("other", "o1")  # in flight from now on, never answered
    fail(f, "dead", timeout=True)  # dead: failed session 1, backed off 10 s
    assert given_up == []
    clock.now = 110.0
    assert f.pop() == ("dead", "d2")
    fail(f, "dead", timeout=True)  # failed session 2, only failing hosts left: given up
    assert given_up == [("dead", 2)]


def test_a_silent_timeout_ends_the_session_of_a_host_that_never_answered_at_once():
    """A timeout within the shortened first-answer time backs a host that never answered
    off at its first failure (not after SESSION_FAILURES = 2) when another host waits for
    its place. With no host waiting, or once it has answered, it counts as one failure."""
    f, _, _ = frontier(max_open=1)
    for i in range(3):
        f.push("silent", 1.0, f"s{i}")
    f.push("other", 0.5, "o0")
    assert f.pop() == ("silent", "s0")
    fail(f, "silent", timeout=True, elapsed=10.0, silent=True)
    assert f.backed_off("silent") and f.next_retry_at() == 110.0  # backoff 10 s
    assert f.pop() == ("other", "o0")  # the place is free at once

    f, _, _ = frontier(max_open=1)
    for i in range(3):
        f.push("alone", 1.0, f"a{i}")
    assert f.pop() == ("alone", "a0")
    fail(f, "alone", timeout=True, silent=True)  # nobody waits: one failure of two
    assert not f.backed_off("alone") and f.pop() == ("alone", "a1")

    f, _, _ = frontier(max_open=1)
    for i in range(3):
        f.push("slow", 1.0, f"s{i}")
    f.push("other", 0.5, "o0")
    assert f.pop() == ("slow", "s0")
    answer(f, "slow")
    assert f.pop() == ("slow", "s1")
    fail(f, "slow", timeout=True, silent=True)  # answered before: one failure of two
    assert not f.backed_off("slow") and f.pop() == ("slow", "s2")


def test_the_end_game_gives_up_backed_off_hosts_that_never_answered_once_nothing_is_open():
    """Two hosts that never answered are backed off after their second failed session
    (20 s, so not yet given up: another host was still crawling then). When that host's
    last request is done and nothing is open, the next pop gives both up instead of
    holding the crawl open 20 s for probes that would give them up anyway. A host that
    answered before and is backed off is kept (and keeps the crawl waiting for its probe)."""
    f, clock, given_up = frontier(max_open=3)
    for host in ("dead1", "dead2"):
        for i in range(4):
            f.push(host, 1.0, f"{host}-{i}")
    f.push("live", 0.1, "l0")
    f.push("live", 0.1, "l1")
    popped = dict(f.pop() for _ in range(3))
    assert popped == {"dead1": "dead1-0", "dead2": "dead2-0", "live": "l0"}
    for host in ("dead1", "dead2"):
        fail(f, host, timeout=True)
    assert dict(f.pop() for _ in range(2)) == {"dead1": "dead1-1", "dead2": "dead2-1"}
    for host in ("dead1", "dead2"):
        fail(f, host, timeout=True)  # failed session 1: back off 10 s
    clock.now = 110.0
    assert dict(f.pop() for _ in range(2)) == {"dead1": "dead1-2", "dead2": "dead2-2"}
    for host in ("dead1", "dead2"):
        fail(f, host, timeout=True)  # failed probe, session 2; live is open: kept
    assert given_up == [] and f.next_retry_at() == 130.0
    answer(f, "live")
    assert f.pop() == ("live", "l1")
    assert given_up == []  # live is still open
    answer(f, "live")
    assert f.pop() is None  # nothing open, only failing hosts left: the end game
    assert sorted(given_up) == [("dead1", 1), ("dead2", 1)] and len(f) == 0  # 1 URL left each

    f, clock, given_up = frontier(max_open=2)
    for i in range(3):
        f.push("was_up", 1.0, f"w{i}")
    assert f.pop() == ("was_up", "w0")
    answer(f, "was_up")
    for expected in ("w1", "w2"):
        assert f.pop() == ("was_up", expected)
        fail(f, "was_up", timeout=True)  # went down after answering: backed off
    assert f.pop() is None and given_up == [] and f.backed_off("was_up")


def test_silent_hosts_double_the_first_answer_timeout_up_to_the_ceiling():
    heard: set[str] = set()
    silent = SilentHosts(10.0, heard.__contains__)
    assert silent.timeout("a", 30.0) == 10.0
    silent.timed_out("a")
    assert silent.timeout("a", 30.0) == 20.0
    silent.timed_out("a")
    assert silent.timeout("a", 30.0) is None  # 40 s: the download timeout is shorter
    assert silent.timeout("b", 30.0) == 10.0  # per host
    heard.add("a")  # it answered: the full timeout, and its count is forgotten
    assert silent.timeout("a", 30.0) is None and len(silent) == 0
    silent.timed_out("a")  # a host that answered before times out: no shortening
    assert silent.timeout("a", 30.0) is None and len(silent) == 0
    for _ in range(2000):  # a long streak must not overflow the power
        silent.timed_out("c")
    assert silent.timeout("c", 30.0) is None
    off = SilentHosts(0.0, heard.__contains__)
    off.timed_out("d")
    assert off.timeout("d", 30.0) is None and len(off) == 0


def test_refused_urls_count_bare_refusals_per_url_until_it_answers():
    refused = RefusedUrls(limit=2, size=3)
    assert [refused.record("a") for _ in range(4)] == [0, 1, 2, 3]
    refused.answered("a")  # it answered after all: a rate limit's refusals, forgotten
    assert refused.record("a") == 0
    for url in ("b", "c", "d"):  # size 3: the least recently refused ("a") goes
        refused.record(url)
    assert len(refused) == 3 and refused.record("a") == 0


def test_forgiving_refusals_undoes_their_growth_of_the_gap():
    est = HostEstimate.new(PARAMS)
    for _ in range(5):
        est.observe_refusal(0.01)  # 0.5, 0.75, 1.125, 1.6875, 2.53125
    assert est.refusal_gap == 0.5 * 1.5**4
    est.forgive_refusals(5)  # 2.53125 / 7.59375 = 0.333 < 0.5: they alone made it
    assert est.refusal_gap == 0.0
    est.observe_refusal(0.01)
    est.observe_refusal(0.01)  # 0.75: the host's own
    for _ in range(3):
        est.observe_refusal(0.01)  # then one URL's: 1.125, 1.6875, 2.53125
    est.forgive_refusals(3)
    assert est.refusal_gap == 0.75
