"""Hosts that must wait in the pure frontier: refusals (429/503, Retry-After), the refusal
gap learnt from them, and a least gap between request starts (Crawl-delay, host delay).

Every expected number is worked out by hand from ``HostEstimate.observe_refusal``
(``REFUSAL_GAP_MIN`` 0.5 s, ``REFUSAL_GROW`` 1.5, ``REFUSAL_SHRINK`` 0.98).
"""

from __future__ import annotations

import pytest
from helpers import FakeClock

from scrapy_twolevel.frontier import (
    BreadthFirst,
    CostParams,
    HostEstimate,
    Measurement,
    TwoLevelFrontier,
)
from scrapy_twolevel.frontier.failures import FailurePolicy
from scrapy_twolevel.frontier.hosts import WAIT_DELAY, WAIT_REFUSED

pytestmark = pytest.mark.unit

PARAMS = CostParams()


def frontier(**kwargs):
    clock = FakeClock(100.0)
    f = TwoLevelFrontier(
        BreadthFirst(),
        PARAMS,
        4,
        failures=FailurePolicy(session_failures=2, backoff=10.0, backoff_max=25.0),
        clock=clock,
        jitter=kwargs.pop("jitter", lambda: 0.0),
        **kwargs,
    )
    return f, clock


def answer(f, host):
    f.observe(
        host,
        Measurement(
            latency=0.01, new_connection=False, served_on_connection=2, closed_by_server=False
        ),
    )
    f.done(host)


def refuse(f, host, retry_after):
    f.observe_refusal(host, retry_after=retry_after)
    f.done(host)


def test_refusal_gap_grows_on_refusal_and_shrinks_on_responses():
    est = HostEstimate.new(PARAMS)
    est.observe_refusal(None)
    assert (est.refusals, est.refusal_gap) == (1, 0.5)  # max(0 * 1.5, 0, 0.5)
    est.observe_refusal(0.2)
    assert est.refusal_gap == pytest.approx(0.75)  # max(0.5 * 1.5, 0.2, 0.5)
    est.observe_refusal(2.0)
    assert est.refusal_gap == 2.0  # the refused request came 2 s after the one before
    est.observe(
        PARAMS,
        Measurement(
            latency=0.01, new_connection=False, served_on_connection=2, closed_by_server=False
        ),
    )
    assert est.refusal_gap == pytest.approx(1.96)  # 2.0 * 0.98
    restored = HostEstimate.from_dict(est.to_dict())
    assert (restored.refusals, restored.refusal_gap) == (3, pytest.approx(1.96))


def test_a_refused_host_waits_for_retry_after_then_keeps_its_gap():
    f, clock = frontier()
    for i in range(5):
        f.push("h", 1.0, i)
    f.push("other", 1.0, "o")
    assert f.pop() == ("h", 0)
    refuse(f, "h", retry_after=2.0)  # gap 0.5; Retry-After says 2 s from now
    host = f.host("h")
    assert (host.retry_at, host.wait_reason) == (102.0, WAIT_REFUSED)
    assert f.refusals == 1 and host.estimate.refusals == 1
    assert f.pop() == ("other", "o")  # the other host is served meanwhile
    f.done("other")
    assert f.pop() is None and f.next_retry_at() == 102.0
    clock.now = 101.99
    assert f.pop() is None
    clock.now = 102.0
    assert f.pop() == ("h", 1)
    clock.now = 102.1
    answer(f, "h")  # gap 0.5 * 0.98 = 0.49 from the start at 102.0
    assert (host.retry_at, host.wait_reason) == (pytest.approx(102.49), WAIT_DELAY)
    assert f.pop() is None
    clock.now = 102.49
    assert f.pop() == ("h", 2)
    refuse(f, "h", retry_after=None)  # refused 0.49 s after the last start
    # gap max(0.49 * 1.5, 0.49, 0.5) = 0.735 from its start at 102.49
    assert host.retry_at == pytest.approx(102.49 + 0.735)
    assert host.estimate.refusal_gap == pytest.approx(0.735)


def test_retry_after_longer_than_the_gap_wins_and_a_shorter_one_does_not_shorten_it():
    f, clock = frontier()
    for i in range(3):
        f.push("h", 1.0, i)
    f.pop()
    refuse(f, "h", retry_after=0.1)  # Retry-After 0.1 s, but the gap is 0.5 s
    assert f.host("h").retry_at == 100.5
    clock.now = 100.5
    f.pop()
    refuse(f, "h", retry_after=60.0)
    assert f.host("h").retry_at == 160.5


def test_a_refusal_ends_the_failure_streaks_the_server_is_up():
    f, _ = frontier()
    for i in range(5):
        f.push("h", 1.0, i)
    f.pop()
    f.observe_failure("h", elapsed=0.01, timeout=False)
    f.done("h")
    assert f.host("h").failures == 1
    f.pop()
    refuse(f, "h", retry_after=1.0)
    host = f.host("h")
    assert (host.failures, host.failed_sessions, host.answered) == (0, 0, True)


def test_a_refusal_reported_after_done_still_parks_the_host():
    """Outcomes may arrive after done(): the host, idle in its session, waits all the same."""
    f, clock = frontier()
    f.set_estimate("h", HostEstimate(0.1, 0.1, 10.0))  # sessions of several requests
    for i in range(5):
        f.push("h", 1.0, i)
    f.pop()
    f.done("h")  # idle in its session, ready for its next request
    f.observe_refusal("h", retry_after=5.0)
    assert f.pop() is None  # not served from its session: it waits
    assert f.host("h").open is False and f.next_retry_at() == 105.0
    clock.now = 105.0
    assert f.pop() == ("h", 1)


def test_least_gap_from_settings_and_per_host_crawl_delay():
    f, clock = frontier(min_gap=1.0)
    for i in range(3):
        f.push("a", 1.0, i)
        f.push("b", 1.0, i)
    f.set_min_gap("b", 3.0)  # robots.txt Crawl-delay: 3
    assert f.pop() == ("a", 0)
    assert f.pop() == ("b", 0)
    clock.now = 100.2
    answer(f, "a")
    answer(f, "b")
    assert f.host("a").retry_at == 101.0  # the started request + 1 s
    assert f.host("b").retry_at == 103.0
    clock.now = 101.0
    assert f.pop() == ("a", 1) and f.pop() is None


def test_gap_waits_are_lengthened_by_jitter_never_shortened():
    f, _ = frontier(min_gap=2.0, jitter=lambda: 0.5)
    f.push("a", 1.0, 0)
    f.push("a", 1.0, 1)
    f.pop()
    answer(f, "a")
    assert f.host("a").retry_at == pytest.approx(102.1)  # 2 * (1 + 0.1 * 0.5)


def test_budget_patterns_first_match_then_default():
    from scrapy_twolevel.frontier.budgets import make_budget

    budget = make_budget(50, {"*.big.example": 5, "free.example": 0, "*.example": 20})
    assert budget("a.big.example") == 5
    assert budget("free.example") is None  # 0: no budget
    assert budget("x.example") == 20
    assert budget("other.org") == 50
    assert make_budget(0, {})("any") is None


def test_a_host_at_its_budget_takes_no_more_urls():
    dropped_items = []
    given = []
    f, _ = frontier(
        budget=lambda host: 3 if host == "small" else None,
        on_dropped=dropped_items.append,
        on_give_up=lambda host, dropped, why: given.append((host, dropped, why)),
    )
    for i in range(6):
        f.push("small", 1.0, i)
        f.push("big", 1.0, i)
    served = {"small": 0, "big": 0}
    while (popped := f.pop()) is not None:
        served[popped[0]] += 1
        answer(f, popped[0])
    # 3 responses, then its 3 queued URLs dropped; the other host is not limited
    assert served == {"small": 3, "big": 6}
    assert given == [("small", 3, "budget")] and dropped_items == [3, 4, 5]
    assert (f.hosts_at_budget, f.dropped_budget, f.hosts_given_up) == (1, 3, 0)
    assert f.push("small", 1.0, "late") is False and f.dropped_budget == 4


def test_a_host_given_up_for_its_budget_while_idle_in_its_session_is_never_served_again():
    """The budget's last response reported after ``done`` (Scrapy 2.19 signals a request's
    end before its middlewares see the response): the host is open and idle, so giving it
    up must end its session. It used to stay ready with an empty queue, and every later
    ``pop`` raised ``IndexError``: no other host was served and the crawl never ended."""
    f, _ = frontier(budget=lambda host: 1 if host == "small" else None)
    for i in range(3):
        f.push("small", 1.0, i)
    f.push("other", 1.0, "o")
    assert f.pop() == ("small", 0)
    f.done("small")  # idle in its session, two URLs left
    f.observe(
        "small",
        Measurement(
            latency=0.01, new_connection=False, served_on_connection=1, closed_by_server=False
        ),
    )
    assert f.host("small").given_up and not f.host("small").open
    assert (f.open_hosts, len(f)) == (0, 1)
    assert f.pop() == ("other", "o")
    f.done("other")
    assert f.pop() is None and len(f) == 0


def test_pages_of_budgeted_hosts_are_reported_and_restored():
    pages = []
    f, _ = frontier(
        budget=lambda host: 3 if host == "small" else None,
        on_page=lambda host, fetched: pages.append((host, fetched)),
    )
    for i in range(4):
        f.push("small", 1.0, i)
        f.push("big", 1.0, i)
    served = []
    while (popped := f.pop()) is not None:
        served.append(popped[0])
        answer(f, popped[0])
    assert served.count("small") == 3 and served.count("big") == 4
    assert pages == [("small", 1), ("small", 2), ("small", 3)]  # only the host with a budget
    # A resumed crawl: the two pages count, so one more is its budget.
    g, _ = frontier(budget=lambda host: 3 if host == "small" else None)
    for i in range(4):
        g.push("small", 1.0, i)
    g.restore_pages("small", 2)
    assert g.pop()[0] == "small"
    answer(g, "small")
    assert g.host("small").given_up and g.pop() is None and len(g) == 0
    # One that had its budget is given up at once, its queued URLs dropped.
    h, _ = frontier(budget=lambda host: 3)
    for i in range(2):
        h.push("done", 1.0, i)
    h.restore_pages("done", 3)
    assert h.host("done").given_up and len(h) == 0 and h.pop() is None
    assert h.dropped_budget == 2


def test_a_host_that_refuses_everything_gets_its_requests_passed_on():
    """Five refusals in a row with the gap grown each time (0.5 s to 2.5 s) are a rate
    limit no more: the sixth refused request is not worth sending again."""
    f, clock = frontier()
    for i in range(8):
        f.push("h", 1.0, i)
    answers = []
    for _ in range(6):
        clock.now = max(clock.now, f.host("h").retry_at)
        assert f.pop() is not None
        answers.append(f.observe_refusal("h", retry_after=None))
        f.done("h")
    assert answers == [True] * 5 + [False]
    clock.now = f.host("h").retry_at
    f.pop()
    answer(f, "h")  # a response: it paces, it does not refuse everything
    assert f.host("h").refused_in_a_row == 0


def test_a_url_refused_five_times_before_is_the_urls_problem():
    """A request already refused REFUSAL_STREAK (5) times: one 503 page, not a rate limit
    (a rate-limited host takes a URL within four, 0.5 to 1.7 s apart, for 36 requests a
    minute). Not sent again, and the host's gap is left as it was."""
    f, clock = frontier()
    for i in range(4):
        f.push("h", 1.0, i)
    f.pop()
    assert f.observe_refusal("h", retry_after=None, refused_before=4) is True  # gap 0.5
    f.done("h")
    clock.now = f.host("h").retry_at
    f.pop()
    answer(f, "h")  # gap 0.5 * 0.98 = 0.49
    clock.now = f.host("h").retry_at
    f.pop()
    assert f.observe_refusal("h", retry_after=None, refused_before=5) is False
    assert f.host("h").estimate.refusal_gap == pytest.approx(0.49)


def test_the_refusal_gap_is_capped():
    est = HostEstimate.new(PARAMS)
    for _ in range(30):
        est.observe_refusal(None)
    assert est.refusal_gap == 30.0  # REFUSAL_GAP_MAX, not 0.5 * 1.5**29
