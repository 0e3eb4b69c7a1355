"""Unit tests of the Scrapy-free frontier: formulas checked against hand-computed values."""

from __future__ import annotations

from dataclasses import replace

import pytest
from helpers import FakeClock

from scrapy_twolevel.frontier import (
    PLAIN_LANE,
    BreadthFirst,
    CostParams,
    CrawlCapability,
    FifoHostQueue,
    HostEstimate,
    Measurement,
    PerformanceFirst,
    ProcessingCost,
    QualityFirst,
    QualityHostQueue,
    ResourceCapability,
    TwoLevelFrontier,
    ewma,
)
from scrapy_twolevel.frontier.connections import ConnectionTracker, ReplyFacts
from scrapy_twolevel.frontier.estimates import PACE_LEAD, TypicalPage

pytestmark = pytest.mark.unit

PARAMS = CostParams(
    default_requests_per_connection=50,
    keepalive_speedup=1.2,
    alpha=0.8,
    default_connection_time=0.1,
    default_response_time=0.1,
)


def drain(frontier: TwoLevelFrontier) -> list[tuple[str, object]]:
    """Pop everything, finishing every request right after it is handed out."""
    out = []
    while len(frontier):
        popped = frontier.pop()
        assert popped is not None, "a frontier with idle hosts and work must hand something out"
        out.append(popped)
        frontier.done(popped[0])
    return out


# -- estimates ---------------------------------------------------------------------


def test_ewma_hand_computed():
    assert ewma(0.1, 0.5, 0.8) == pytest.approx(0.18)
    assert ewma(10.0, 0.0, 0.0) == 0.0


def test_batch_size_is_min_of_requests_per_connection_and_queue():
    est = HostEstimate.new(PARAMS)
    assert est.batch_size(0) == 0
    assert est.batch_size(10) == 10
    assert est.batch_size(100) == 50
    est.requests_per_connection = 2.4
    assert est.batch_size(100) == 2


def test_session_time_keepalive_and_not():
    est = HostEstimate.new(PARAMS)
    # T = 2 * 0.1 + 10 * 0.1 / 1.2 = 0.2 + 0.8333...
    assert est.session_time(10, PARAMS) == pytest.approx(1.0333333333)
    est.keepalive = False
    # p = 1: T = 0.2 + 1 * 0.1
    assert est.session_time(1, PARAMS) == pytest.approx(0.3)


def test_first_measurement_replaces_default_then_ewma():
    est = HostEstimate.new(PARAMS)
    est.observe(
        PARAMS,
        Measurement(
            latency=0.05, new_connection=False, served_on_connection=2, closed_by_server=False
        ),
    )
    assert est.response_time == pytest.approx(0.05)  # first sample replaces the 0.1 default
    est.observe(
        PARAMS,
        Measurement(
            latency=0.29, new_connection=True, served_on_connection=1, closed_by_server=False
        ),
    )
    assert est.connection_time == pytest.approx(0.24)  # 0.29 - 0.05, first sample
    est.observe(
        PARAMS,
        Measurement(
            latency=0.15, new_connection=True, served_on_connection=1, closed_by_server=False
        ),
    )
    assert est.connection_time == pytest.approx(0.8 * 0.24 + 0.2 * 0.10)  # 0.212
    est.observe(
        PARAMS,
        Measurement(
            latency=0.1, new_connection=False, served_on_connection=2, closed_by_server=False
        ),
    )
    assert est.response_time == pytest.approx(0.8 * 0.05 + 0.2 * 0.1)  # 0.06


def test_first_latency_on_a_new_connection_is_split_in_the_defaults_ratio():
    params = CostParams(default_connection_time=0.1, default_response_time=0.3)
    est = HostEstimate.new(params)
    est.observe(
        params,
        Measurement(
            latency=0.2, new_connection=True, served_on_connection=1, closed_by_server=False
        ),
    )
    assert est.connection_time == pytest.approx(0.05)  # 0.2 * 0.1 / 0.4
    assert est.response_time == pytest.approx(0.15)


def test_observe_http10_host_turns_off_keepalive_and_lowers_requests_per_connection():
    est = HostEstimate.new(PARAMS)
    est.observe(
        PARAMS,
        Measurement(
            latency=0.2, new_connection=True, served_on_connection=1, closed_by_server=True
        ),
    )
    assert est.keepalive is False
    assert est.requests_per_connection == 1
    est.observe(
        PARAMS,
        Measurement(
            latency=0.2, new_connection=True, served_on_connection=3, closed_by_server=True
        ),
    )
    assert est.requests_per_connection == pytest.approx(0.8 * 1 + 0.2 * 3)  # 1.4
    assert est.keepalive is True


def test_observe_keepalive_max_gives_total_per_connection():
    est = HostEstimate.new(PARAMS)
    est.observe(
        PARAMS,
        Measurement(
            latency=0.1,
            new_connection=False,
            served_on_connection=3,
            closed_by_server=False,
            remaining_on_connection=7,
        ),
    )
    assert est.requests_per_connection == 10
    est.observe(
        PARAMS,
        Measurement(
            latency=0.1,
            new_connection=False,
            served_on_connection=4,
            closed_by_server=False,
            remaining_on_connection=16,
        ),
    )
    assert est.requests_per_connection == pytest.approx(0.8 * 10 + 0.2 * 20)  # 12


def test_observe_uncensored_count_raises_estimate():
    est = HostEstimate.new(PARAMS)
    est.observe(
        PARAMS,
        Measurement(
            latency=0.1, new_connection=False, served_on_connection=60, closed_by_server=False
        ),
    )
    assert est.requests_per_connection == 60


def test_estimate_round_trip_and_rejects_garbage():
    est = HostEstimate.new(PARAMS)
    assert HostEstimate.from_dict(est.to_dict()) == est
    with pytest.raises(ValueError, match="not a host estimate"):
        HostEstimate.from_dict({"connection_time": "x"})
    bad = est.to_dict() | {"response_time": -1.0}
    with pytest.raises(ValueError, match="out of range"):
        HostEstimate.from_dict(bad)


# -- connection inference ----------------------------------------------------------


def test_reply_facts_parse():
    assert ReplyFacts.parse("HTTP/1.0", "", "") == ReplyFacts(True, True)
    assert ReplyFacts.parse("HTTP/1.0", "keep-alive", "").connection_close is False
    facts = ReplyFacts.parse("HTTP/1.1", "Keep-Alive", "timeout=5, max=99")
    assert facts == ReplyFacts(False, False, 99, 5.0)
    assert ReplyFacts.parse("HTTP/1.1", "close", None).connection_close is True
    # Scrapy's HTTP/1.1 handler hides both headers; its connection pool tells instead.
    assert ReplyFacts.parse("HTTP/1.1", "", "", kept_open=False).connection_close is True
    assert ReplyFacts.parse("HTTP/1.1", "", "", kept_open=True).connection_close is False
    assert ReplyFacts.parse("HTTP/1.1", "", "", kept_open=None).connection_close is False


def test_tracker_counts_requests_on_a_connection_until_close():
    tracker = ConnectionTracker(idle_timeout=10)
    keep = ReplyFacts(False, False)
    close = ReplyFacts(False, True)
    first = tracker.observe("h", keep, sent_at=0.0, replied_at=0.1)
    second = tracker.observe("h", keep, sent_at=0.2, replied_at=0.3)
    third = tracker.observe("h", close, sent_at=0.4, replied_at=0.5)
    fourth = tracker.observe("h", keep, sent_at=0.6, replied_at=0.7)
    assert [o.new_connection for o in (first, second, third, fourth)] == [True, False, False, True]
    assert third.served_on_connection == 3 and third.closed_by_server
    assert fourth.served_on_connection == 1


def test_tracker_idle_gap_means_new_connection_and_honours_keepalive_timeout():
    tracker = ConnectionTracker(idle_timeout=10)
    tracker.observe("h", ReplyFacts(False, False, None, 2.0), sent_at=0.0, replied_at=1.0)
    later = tracker.observe("h", ReplyFacts(False, False), sent_at=3.5, replied_at=4.0)
    assert later.new_connection  # 2.5 s idle > the announced 2 s timeout
    tracker.connection_lost("h")
    assert tracker.observe(
        "h", ReplyFacts(False, False), sent_at=4.1, replied_at=4.2
    ).new_connection


def test_tracker_shares_the_records_of_hosts_idle_past_timeout_and_grace_observing_the_same():
    """A broad crawl's drained hosts keep no connection record of their own, and what the
    tracker observes is what a tracker that keeps every record observes."""
    keep, announce = ReplyFacts(False, False), ReplyFacts(False, False, None, 2.0)
    shared, kept = ConnectionTracker(10, grace=5), ConnectionTracker(10, grace=1e9)
    replies = [("a", keep, 0.0, 1.0), ("b", announce, 0.0, 1.0), ("c", keep, 1.0, 2.0)]
    # c keeps talking; a (timeout 10) and b (announced 2) go quiet. Replies are looked at
    # in the order they came: b's record (expired past 2 + 5 s) waits behind a's, and both
    # are shared once a's has expired too (10 + 5 s after its reply).
    replies += [("c", keep, t, t + 0.5) for t in range(3, 30, 2)]
    own_after = []
    for host, facts, sent, replied in replies:
        got = shared.observe(host, facts, sent_at=sent, replied_at=replied)
        assert got == kept.observe(host, facts, sent_at=sent, replied_at=replied)
        own_after.append((replied, shared.own_records))
    assert dict(own_after)[15.5] == 3
    assert dict(own_after)[17.5] == 1  # a's and b's past 16 s: only c has one
    # They come back: a new connection, with what b announced kept (its 2-s timeout).
    for tracker in (shared, kept):
        assert tracker.observe("a", keep, sent_at=40.0, replied_at=40.5).new_connection
        tracker.observe("b", keep, sent_at=40.0, replied_at=40.5)
        later = tracker.observe("b", keep, sent_at=43.0, replied_at=43.5)
        assert later.new_connection  # 2.5 s idle > b's 2 s
    assert shared.own_records == 3
    # A host heard from without a measured reply (a refusal) costs no record of its own.
    shared.answered("d")
    assert shared.heard_from("d") and shared.own_records == 3
    shared.connection_lost("d")  # does not touch the shared record
    assert shared.observe("d", keep, sent_at=50.0, replied_at=50.5).new_connection


# -- queues ------------------------------------------------------------------------


def test_quality_queue_orders_best_first_fifo_among_equals_and_keeps_head_sum():
    q = QualityHostQueue(head_size=2)
    for seq, (quality, item) in enumerate([(1, "a"), (5, "b"), (3, "c"), (5, "d"), (-2, "e")]):
        q.push(quality, seq, item)
    assert q.best_quality() == 5
    assert q.head_sum() == 10  # 5 + 5
    q.set_head_size(4)
    assert q.head_sum() == 14  # 5 + 5 + 3 + 1
    q.set_head_size(5)
    assert q.head_sum() == 14  # the -2 counts as 0
    q.set_head_size(1)
    assert [q.pop() for _ in range(len(q))] == ["b", "d", "c", "a", "e"]
    assert q.head_sum() == 0 and q.best_quality() == 0


def test_fifo_queue_ignores_quality():
    q = FifoHostQueue()
    for seq, quality in enumerate([1, 9, 5]):
        q.push(quality, seq, seq)
    assert [q.pop() for _ in range(3)] == [0, 1, 2]


# -- policies: scores against hand-computed values -------------------------------------


def _queue(qualities, head_size=50):
    q = QualityHostQueue(head_size)
    for seq, quality in enumerate(qualities):
        q.push(quality, seq, seq)
    return q


def test_policy_scores_hand_computed():
    est = HostEstimate.new(PARAMS)
    est.requests_per_connection = 2
    q = _queue([5, 3, 1], head_size=2)
    # P = min(2, 3) = 2; T = 0.2 + 2 * 0.1 / 1.2 = 0.366666...
    assert PerformanceFirst().score(q, est, PARAMS) == pytest.approx(2 / 0.3666666667)
    assert QualityFirst().score(q, est, PARAMS) == 5
    assert BreadthFirst().score(q, est, PARAMS) == 0
    # Crawl-capability, measured. Nothing measured yet: P = 1, T = G + P * (W + X) with
    # G = 0, W = the prior 0.1 + 0.1, X = 0: C = 5 / 0.2.
    capability = CrawlCapability()
    assert capability.session_length(3, est) == 1
    head = _queue([5, 3, 1], head_size=1)
    assert capability.score(head, est, PARAMS) == pytest.approx(25.0)
    # Measured: W = 0.05 back to back, 0.3 after idle, so G = 0.25 > W and a session pays:
    # P = min(2, 3) = 2; X = 0.02; T = 0.25 + 2 * (0.05 + 0.02) = 0.39; C = 8 / 0.39.
    est.service_time, est.service_samples = 0.05, 1
    est.idle_service_time, est.idle_samples = 0.3, 1
    est.processing_time, est.processing_samples = 0.02, 1
    assert capability.session_length(3, est) == 2
    assert capability.score(q, est, PARAMS) == pytest.approx(8 / 0.39)


def test_resource_capability_prices_host_time_per_connection_and_cpu_whole():
    eight = replace(PARAMS, connections=8)
    policy = ResourceCapability()
    # A slow host of valuable pages: W = 0.5 s, X = 0.005 s, next page 0.3.
    slow = replace(HostEstimate.new(PARAMS), service_time=0.5, service_samples=1)
    slow.processing_time, slow.processing_samples = 0.005, 1
    # A fast host of heavy pages: W = 0.01 s, X = 0.02 s, next page 0.05.
    heavy = replace(HostEstimate.new(PARAMS), service_time=0.01, service_samples=1)
    heavy.processing_time, heavy.processing_samples = 0.02, 1
    valuable, modest = _queue([0.3], head_size=1), _queue([0.05], head_size=1)
    # Crawl-capability, T + P * X: 0.3 / 0.505 = 0.594 against 0.05 / 0.03 = 1.667.
    capability = CrawlCapability()
    assert capability.score(valuable, slow, eight) == pytest.approx(0.3 / 0.505)
    assert capability.score(modest, heavy, eight) == pytest.approx(0.05 / 0.03)
    # T / K + P * X with K = 8: 0.3 / (0.0625 + 0.005) = 4.444 against
    # 0.05 / (0.00125 + 0.02) = 2.353: the slow host's connection is one of eight.
    assert policy.score(valuable, slow, eight) == pytest.approx(0.3 / 0.0675)
    assert policy.score(modest, heavy, eight) == pytest.approx(0.05 / 0.02125)
    # One connection (no limit set): the same as crawl-capability.
    assert policy.score(valuable, slow, PARAMS) == pytest.approx(0.3 / 0.505)
    # A session: G = 0.25 s, P = 2 (as above): (0.25 + 2 * 0.05) / 8 + 2 * 0.02 = 0.08375.
    est = HostEstimate.new(PARAMS)
    est.requests_per_connection = 2
    est.service_time, est.service_samples = 0.05, 1
    est.idle_service_time, est.idle_samples = 0.3, 1
    est.processing_time, est.processing_samples = 0.02, 1
    assert policy.score(_queue([5, 3, 1], head_size=2), est, eight) == pytest.approx(8 / 0.08375)


def test_crawl_capability_with_zero_qualities_ranks_by_throughput():
    fast, slow = HostEstimate.new(PARAMS), HostEstimate.new(PARAMS)
    slow.service_time, slow.service_samples = 1.0, 1
    q = _queue([0, 0, 0])
    assert CrawlCapability().score(q, fast, PARAMS) > CrawlCapability().score(q, slow, PARAMS)


# -- frontier ----------------------------------------------------------------------


def test_never_two_requests_in_flight_to_one_host():
    f = TwoLevelFrontier(BreadthFirst(), PARAMS, max_open_hosts=4)
    for i in range(3):
        f.push("a", 0, i)
    assert f.pop() == ("a", 0)
    assert f.pop() is None  # a is busy, nothing else to open
    f.done("a")
    assert f.pop() == ("a", 1)


def test_at_most_max_open_hosts_and_sessions_are_non_preemptive():
    f = TwoLevelFrontier(QualityFirst(), PARAMS, max_open_hosts=1)
    for i in range(3):
        f.push("low", 1, f"low{i}")
    assert f.pop() == ("low", "low0")
    f.push("high", 100, "high0")  # better host appears mid-session
    f.done("low")
    # The open session of "low" is not cut short: it still has budget and URLs.
    assert f.pop() == ("low", "low1")
    f.done("low")
    assert f.pop() == ("low", "low2")
    f.done("low")
    assert f.pop() == ("high", "high0")


def test_session_budget_ends_session_and_lets_next_host_in():
    f = TwoLevelFrontier(BreadthFirst(), PARAMS, max_open_hosts=1)
    f.set_estimate("a", replace(HostEstimate.new(PARAMS), requests_per_connection=2))
    for i in range(3):
        f.push("a", 0, f"a{i}")
    f.push("b", 0, "b0")
    assert [item for _, item in drain(f)] == ["a0", "a1", "b0", "a2"]


def test_breadth_first_serves_hosts_in_arrival_order():
    f = TwoLevelFrontier(BreadthFirst(), PARAMS, max_open_hosts=1)
    for host in "cab":
        f.push(host, 0, host)
    assert [h for h, _ in drain(f)] == ["c", "a", "b"]


def test_performance_first_opens_the_fastest_host_first():
    f = TwoLevelFrontier(PerformanceFirst(), PARAMS, max_open_hosts=1)
    f.set_estimate("slow", replace(HostEstimate.new(PARAMS), response_time=1.0))
    f.set_estimate("fast", replace(HostEstimate.new(PARAMS), response_time=0.01))
    f.push("slow", 0, "s")
    f.push("fast", 0, "f")
    assert [h for h, _ in drain(f)] == ["fast", "slow"]


def test_quality_first_orders_urls_and_hosts_by_quality():
    f = TwoLevelFrontier(QualityFirst(), PARAMS, max_open_hosts=1)
    f.push("a", 1, "a1")
    f.push("b", 7, "b7")
    f.push("a", 3, "a3")
    assert [item for _, item in drain(f)] == ["b7", "a3", "a1"]


def test_crawl_capability_prefers_quality_per_second():
    f = TwoLevelFrontier(CrawlCapability(), PARAMS, max_open_hosts=1)
    # "best" has the single best URL but is 100x slower: quality-first would pick it,
    # crawl-capability picks the host that gathers more quality per second.
    slow = replace(HostEstimate.new(PARAMS), service_time=10.0, service_samples=1)
    f.set_estimate("slow", slow)
    f.push("slow", 10, "s")
    for i in range(5):
        f.push("fast", 3, f"f{i}")
    assert drain(f)[0][0] == "fast"


def test_plain_lane_needs_no_host_and_is_never_busy():
    f = TwoLevelFrontier(BreadthFirst(), PARAMS, max_open_hosts=1)
    f.push(PLAIN_LANE, 0, "data1")
    f.push(PLAIN_LANE, 0, "data2")
    assert f.pop() == (PLAIN_LANE, "data1")
    assert f.pop() == (PLAIN_LANE, "data2")
    assert len(f) == 0


def test_re_ranking_compacts_the_heap():
    f = TwoLevelFrontier(QualityFirst(), PARAMS, max_open_hosts=1)
    for i in range(5000):
        f.push(f"h{i % 10}", i, i)  # every push improves the host's best: a re-rank
    assert len(f._ranking._heap) <= 2 * 10 + 64  # stale entries compacted away
    assert drain(f)[0] == ("h9", 4999)


def test_sessions_report_their_length_with_the_injected_clock():
    clock = FakeClock()
    records = []
    f = TwoLevelFrontier(BreadthFirst(), PARAMS, 1, clock=clock, on_session_end=records.append)
    f.push("a", 0, 1)
    f.push("a", 0, 2)
    f.pop()
    clock.now = 2.5
    f.done("a")
    f.pop()
    clock.now = 4.0
    f.done("a")
    assert [(r.host, r.served, r.budget, r.started, r.ended) for r in records] == [
        ("a", 2, 2, 0.0, 4.0)
    ]


def test_a_session_record_says_what_its_host_waits_for_when_it_ends():
    """Backed off 10 s after a failed session (one failure ends one here), parked until a
    refusal's Retry-After of 30 s, or free at once (its one URL served: nothing to wait
    for)."""
    from scrapy_twolevel.frontier.failures import FailurePolicy

    clock = FakeClock(100.0)
    records = []
    f = TwoLevelFrontier(
        BreadthFirst(),
        PARAMS,
        None,
        failures=FailurePolicy(session_failures=1, backoff=10.0, backoff_max=25.0),
        clock=clock,
        jitter=lambda: 0.0,
        on_session_end=records.append,
    )
    for host in ("failing", "refuser", "free"):
        f.push(host, 0.5, f"{host}/0")
    f.push("failing", 0.4, "failing/1")  # more to serve: they wait, not idle
    f.push("refuser", 0.4, "refuser/1")
    served = {f.pop()[0] for _ in range(3)}
    assert served == {"failing", "refuser", "free"}
    clock.now = 101.0
    f.observe_failure("failing", elapsed=1.0, timeout=False)
    f.done("failing")
    f.observe_refusal("refuser", retry_after=30.0)
    f.done("refuser")
    f.done("free")
    waits = {r.host: (r.failed, r.wait_until, r.wait_reason) for r in records}
    assert waits["failing"] == (True, 111.0, "backoff")
    assert waits["refuser"] == (False, 131.0, "refused")
    assert waits["free"] == (False, None, "")


def test_done_for_unknown_or_idle_host_is_harmless():
    f = TwoLevelFrontier(BreadthFirst(), PARAMS, 1)
    f.done("nobody")
    f.push("a", 0, 1)
    f.done("a")  # not busy: ignored
    assert drain(f) == [("a", 1)]


def test_unmeasured_hosts_share_the_prior_until_their_first_observation():
    f = TwoLevelFrontier(PerformanceFirst(), PARAMS, 1)
    f.push("a", 0, 1)
    f.push("b", 0, 2)
    a, b = f.host("a"), f.host("b")
    assert a.estimate is b.estimate  # one shared prior, not one object per host
    f.observe(
        "a",
        Measurement(
            latency=0.5, new_connection=False, served_on_connection=2, closed_by_server=False
        ),
    )
    assert a.estimate is not b.estimate
    assert a.estimate.response_time == 0.5  # the first sample replaces the default
    assert b.estimate.response_time == PARAMS.default_response_time  # b untouched
    assert b.estimate.samples == 0
    with pytest.raises(AttributeError, match="set_estimate"):
        b.estimate.response_time = 9.0  # would change every unmeasured host
    with pytest.raises(AttributeError, match="set_estimate"):
        b.estimate.observe(
            PARAMS,
            Measurement(
                latency=1.0, new_connection=True, served_on_connection=1, closed_by_server=True
            ),
        )


def test_invalid_max_open_hosts():
    with pytest.raises(ValueError, match="max_open_hosts"):
        TwoLevelFrontier(BreadthFirst(), PARAMS, 0)


@pytest.mark.parametrize("block_size", [1, 3, 256])
def test_randomized_order_and_head_sum_match_a_full_recount(block_size):
    """Against a sorted mirror: pop order (best first, FIFO among equals) and head sums,
    with blocks small enough that equal qualities span many of them."""
    import random

    rng = random.Random(7)
    q = QualityHostQueue(head_size=5, block_size=block_size)
    mirror = []
    for seq in range(2000):
        if mirror and rng.random() < 0.4:
            mirror.sort(key=lambda e: (-e[0], e[1]))
            assert q.pop() == mirror.pop(0)[1]
        else:
            quality = rng.choice([rng.uniform(-1, 5), 2.0, 2.0, 0.0])
            changed = q.push(quality, seq, seq)
            mirror.append((quality, seq))
            mirror.sort(key=lambda e: (-e[0], e[1]))
            # push says whether the new entry joined the head (the next session's URLs)
            assert changed == ((quality, seq) in mirror[: q._head_size])
        if rng.random() < 0.05:
            q.set_head_size(rng.randint(1, 9))
            size = q._head_size
        else:
            size = q._head_size
        best = sorted(mirror, key=lambda e: (-e[0], e[1]))[:size]
        assert q.head_sum() == pytest.approx(sum(max(x, 0) for x, _ in best), abs=1e-9)


def test_fifo_queue_stays_fifo_across_compactions():
    q = FifoHostQueue()
    expected, out = [], []
    for i in range(500):
        q.push(0, i, i)
        expected.append(i)
        if i % 3 == 0:
            out.append(q.pop())
    out += [q.pop() for _ in range(len(q))]
    assert out == expected and len(q) == 0


# -- measured service times and pace (crawl-capability, politeness) -------------------------


def _measured(response_time: float = 0.01) -> HostEstimate:
    est = HostEstimate.new(PARAMS)
    est.response_time, est.response_samples = response_time, 1
    return est


def test_a_held_response_is_a_pace_sample_and_pace_shrinks_when_not_held():
    est = _measured(0.01)
    held = dict(new_connection=False, served_on_connection=2, closed_by_server=False)
    # 0.51 s against a usual 0.01: held 0.5 s. Sent 0.1 s after the previous request,
    # itself not held: the server wants 0.1 + 0.5 - 0 = 0.6 s between request starts.
    assert est.observe(
        PARAMS, Measurement(latency=0.51, **held), gap=0.1, idle=False
    ) == pytest.approx(0.5)
    assert est.pace == pytest.approx(0.6)
    # Held 0.4 s, sent 0.52 s after one held 0.5 s: sample 0.52 + 0.4 - 0.5 = 0.42,
    # pace = 0.8 * 0.6 + 0.2 * 0.42 = 0.564.
    assert est.observe(
        PARAMS, Measurement(latency=0.41, **held), gap=0.52, idle=False
    ) == pytest.approx(0.4)
    assert est.pace == pytest.approx(0.564)
    # Not held (0.015 < 2 * usual): no hold, the pace shrinks by PACE_DECAY.
    assert est.observe(PARAMS, Measurement(latency=0.015, **held), gap=1.0, idle=False) == 0.0
    assert est.pace == pytest.approx(0.564 * 0.95)
    # The holds were left out of the response time.
    assert est.response_time < 0.02


def test_a_short_hold_after_a_long_gap_is_no_pace_sample():
    est = _measured(0.005)
    held = dict(new_connection=False, served_on_connection=2, closed_by_server=False)
    # 0.065 s against a usual 0.005: held 0.06 s, but sent 6.44 s after the previous
    # request: it would imply a pace of 6.5 s of which the hold is under a tenth
    # (PACE_HOLD_SHARE). Left out of the latency as a hold; no pace sample, no shrink.
    assert est.observe(
        PARAMS, Measurement(latency=0.065, **held), gap=6.44, idle=True
    ) == pytest.approx(0.06)
    assert (est.pace, est.pace_samples) == (0.0, 0)
    # The same hold 0.3 s after the previous request: 0.06 of 0.3 + 0.06 - 0.06 = 0.3
    # is a fifth: a pace of 0.3 s.
    assert est.observe(
        PARAMS, Measurement(latency=0.065, **held), gap=0.3, idle=False
    ) == pytest.approx(0.06)
    assert (est.pace, est.pace_samples) == (pytest.approx(0.3), 1)


def test_the_pace_never_exceeds_a_spacing_the_host_let_through():
    est = _measured(0.01)
    held = dict(new_connection=False, served_on_connection=2, closed_by_server=False)
    # Held 0.1 s, 0.04 s after the previous request: pace 0.04 + 0.1 = 0.14. The host
    # let two requests start within 0.04 s plus this one's latency, 0.11 s: its pace is
    # at most 0.15.
    est.observe(PARAMS, Measurement(latency=0.11, **held), gap=0.04, idle=False)
    assert (est.pace, est.pace_bound) == (pytest.approx(0.14), pytest.approx(0.15))
    # The crawler's own lag: "held" 0.7 s after a 6-s gap, a sample of 6 + 0.7 - 0.1 =
    # 6.6 s (the hold is over a tenth of it). The bound, loosened once to 0.15 * 1.05 =
    # 0.1575, caps the sample: pace = 0.8 * 0.14 + 0.2 * 0.1575 = 0.1435, not 1.432.
    est.observe(PARAMS, Measurement(latency=0.71, **held), gap=6.0, idle=True)
    assert est.pace == pytest.approx(0.1435)
    assert est.pace_bound == pytest.approx(0.1575)
    # Not held, 0.5 s after the previous request: the bound loosens to 0.1575 * 1.05 =
    # 0.165375 (0.51 is no tighter) and the pace shrinks by PACE_DECAY.
    est.observe(PARAMS, Measurement(latency=0.01, **held), gap=0.5, idle=False)
    assert est.pace_bound == pytest.approx(0.165375)
    assert est.pace == pytest.approx(0.1435 * 0.95)


def test_a_hold_no_longer_than_a_stall_of_the_crawlers_own_loop_is_no_pace_sample():
    est = _measured(0.01)
    est.pace = 0.2
    held = dict(new_connection=False, served_on_connection=2, closed_by_server=False)
    # 0.71 s against a usual 0.01: "held" 0.7 s, but the crawler's loop stalled 0.72 s
    # meanwhile (a long callback): it may have read the reply late. Still left out of the
    # host's time per request, but no pace sample: the pace shrinks, 0.2 * 0.95 = 0.19.
    delay = est.observe(PARAMS, Measurement(latency=0.71, lag=0.72, **held), gap=0.3, idle=False)
    assert delay == pytest.approx(0.7)
    assert (est.pace, est.pace_samples) == (pytest.approx(0.19), 0)
    assert est.service_time == pytest.approx(0.01)
    # Held 0.5 s while the loop stalled 0.2 s in all: 0.3 s more than the crawler can
    # explain (at least DELAY_MIN), a pace sample of 0.3 + 0.5 - 0 (the last hold was not
    # the server's): the first sample replaces the pace, 0.8. (The bound, 0.3 + 0.71 =
    # 1.01 loosened to 1.0605, and 0.3 + 0.51 = 0.81, does not cap it.)
    est.observe(PARAMS, Measurement(latency=0.51, lag=0.2, **held), gap=0.3, idle=False)
    assert (est.pace, est.pace_samples) == (pytest.approx(0.8), 1)


def test_a_server_that_slows_down_loosens_the_bound_on_its_pace():
    est = _measured(0.01)
    held = dict(new_connection=False, served_on_connection=2, closed_by_server=False)
    est.observe(PARAMS, Measurement(latency=0.1, **held), gap=0.1, idle=False)
    assert est.pace_bound == pytest.approx(0.2)
    # The server now wants 1 s: each request sent 0.2 s after the last is held 0.8 s
    # (latency 0.81) while the bound grows 5% a response: min(0.2 * 1.05**n, 1.01).
    for n in range(1, 41):
        est.observe(PARAMS, Measurement(latency=0.81, **held), gap=0.2, idle=False)
        assert est.pace_bound == pytest.approx(min(0.2 * 1.05**n, 1.01))
        assert est.pace <= est.pace_bound
    # After 34 responses (0.2 * 1.05**34 = 1.05) the bound is what the server let
    # through, 0.2 + 0.81 s, and no longer holds the pace down.
    assert est.pace_bound == pytest.approx(1.01)


def test_on_a_new_connection_only_time_beyond_the_usual_set_up_is_a_hold():
    est = _measured(0.01)
    new = dict(new_connection=True, served_on_connection=1, closed_by_server=True)
    # Set-up never measured: the extra time is taken for it, not for a hold.
    assert est.observe(PARAMS, Measurement(latency=0.5, **new), gap=0.1) == 0.0
    assert est.pace == 0.0
    # A host that closes after every request: response 0.01 s, set-up 0.02 s measured.
    est = _measured(0.01)
    est.connection_time, est.connection_samples = 0.02, 1
    # 0.05 s against a usual 0.01 + 0.02 = 0.03: under twice that, not held. (Sent 1 s
    # after the request before: the pace is at most 1.05 s, no bound on the 0.6 below.)
    assert est.observe(PARAMS, Measurement(latency=0.05, **new), gap=1.0) == 0.0
    # connection = 0.05 - 0.01 = 0.04: 0.8 * 0.02 + 0.2 * 0.04 = 0.024.
    assert est.connection_time == pytest.approx(0.024)
    # 0.534 s against a usual 0.01 + 0.024 = 0.034: held 0.5 s; sent 0.1 s after the
    # previous request, not held: pace 0.1 + 0.5 = 0.6. The set-up sample leaves the hold
    # out: 0.034 - 0.01 = 0.024, so the set-up stays 0.024.
    assert est.observe(PARAMS, Measurement(latency=0.534, **new), gap=0.1) == pytest.approx(0.5)
    assert est.pace == pytest.approx(0.6)
    assert est.connection_time == pytest.approx(0.024)
    # Closed after one request, twice: no keep-alive, one request per connection.
    assert (est.keepalive, est.requests_per_connection) == (False, 1.0)


def test_service_times_after_idle_and_back_to_back_give_the_session_gain():
    est = HostEstimate.new(PARAMS)
    common = dict(new_connection=False, served_on_connection=1, closed_by_server=False)
    assert est.service(PARAMS) == pytest.approx(0.2)  # the prior: 0.1 + 0.1
    est.observe(PARAMS, Measurement(latency=0.1, elapsed=0.4, **common), idle=True)
    assert (est.service(PARAMS), est.session_gain()) == (pytest.approx(0.4), 0.0)
    est.observe(
        PARAMS, Measurement(latency=0.05, elapsed=0.1, processing=0.03, **common), idle=False
    )
    assert est.service(PARAMS) == pytest.approx(0.1)
    assert est.session_gain() == pytest.approx(0.3)  # 0.4 after idle - 0.1 back to back
    assert est.processing_time == pytest.approx(0.03)
    again = HostEstimate.from_dict(est.to_dict())
    assert (again.service_time, again.idle_service_time, again.processing_time) == (
        pytest.approx(0.1),
        pytest.approx(0.4),
        pytest.approx(0.03),
    )


def test_one_huge_page_moves_a_host_time_per_page_by_its_typical_size_not_its_transfer():
    est = HostEstimate.new(PARAMS)
    common = dict(new_connection=False, served_on_connection=1, closed_by_server=False)
    # 20 KB: headers after 5 ms, body 25 ms later (1.25 µs per byte); 4 ms of CPU.
    est.observe(
        PARAMS,
        Measurement(latency=0.005, elapsed=0.03, size=20_000, processing=0.004, **common),
        idle=False,
    )
    assert est.service_time == pytest.approx(0.005)  # per request
    assert est.page_size == pytest.approx(20_000)
    assert est.transfer_time() == pytest.approx(0.025)
    assert est.service(PARAMS) == pytest.approx(0.03)
    # 2.5 MB: headers after 5 ms, body 4 s later; 0.5 s of CPU.
    est.observe(
        PARAMS,
        Measurement(latency=0.005, elapsed=4.005, size=2_500_000, processing=0.5, **common),
        idle=False,
    )
    assert est.service_time == pytest.approx(0.005)
    # Geometric: exp(0.8 ln 20,000 + 0.2 ln 2,500,000) = 20,000 * 125 ** 0.2 = 52,530.
    assert est.page_size == pytest.approx(52_530.2, rel=1e-5)
    # Decayed sums: (0.8 * 0.025 + 4) s over (0.8 * 20,000 + 2,500,000) bytes = 1.5978 µs
    # per byte; at 52,530 bytes 0.08393 s. (Averaging whole times: 0.8 * 0.03 + 0.2 * 4.005
    # = 0.825 s.)
    assert est.transfer_time() == pytest.approx(52_530.2 * 4.02 / 2_516_000, rel=1e-5)
    assert est.service(PARAMS) == pytest.approx(0.005 + 0.083930, rel=1e-4)
    # The huge page's CPU at the typical size: 0.5 * 52,530 / 2,500,000 = 0.010506 s;
    # averaged: 0.8 * 0.004 + 0.2 * 0.010506 = 0.0053012.
    assert est.processing_time == pytest.approx(0.0053012, rel=1e-4)
    again = HostEstimate.from_dict(est.to_dict())
    assert again.service(PARAMS) == pytest.approx(est.service(PARAMS))
    # An empty body (a redirect) counts for the bandwidth, not the typical page.
    est.observe(PARAMS, Measurement(latency=0.005, elapsed=0.005, size=0, **common), idle=False)
    assert (est.page_size, est.size_samples) == (pytest.approx(52_530.2, rel=1e-5), 2)


def test_processing_cost_is_cpu_per_byte_over_windows():
    cpu = FakeClock()
    cost = ProcessingCost(cpu, window=2)
    assert cost.response(1000) == 0.0  # no window complete yet
    cpu.now = 0.03  # 30 ms of CPU for the two responses' 3000 bytes: 10 µs per byte
    assert cost.response(2000) == pytest.approx(0.02)
    assert cost.per_byte == pytest.approx(1e-5)
    assert cost.response(500) == pytest.approx(0.005)


def test_a_paced_host_waits_while_others_are_ready_and_is_sent_early_when_none_is():
    clock = FakeClock()
    f = TwoLevelFrontier(BreadthFirst(), PARAMS, max_open_hosts=2, clock=clock)
    for i in range(3):
        f.push("a", 0, f"a{i}")
    f.push("b", 0, "b0")
    obs = dict(new_connection=False, served_on_connection=2, closed_by_server=False)
    assert f.pop() == ("a", "a0")
    f.observe("a", Measurement(latency=0.01, **{**obs, "new_connection": True}))
    f.done("a")
    clock.now = 0.1
    assert f.pop() == ("a", "a1")
    clock.now = 0.61
    # a0's 0.01 s on a new connection was split in the defaults' ratio: response time
    # 0.005. a1 took 0.51: held 0.505 s, sent 0.1 s after a0: pace 0.1 + 0.505 = 0.605.
    f.observe("a", Measurement(latency=0.51, **obs))
    f.done("a")  # the session ends: the server would hold a's next request until then
    # Ranked again PACE_LEAD before: the crawler takes a while to send it.
    assert f.next_retry_at() == pytest.approx(0.1 + 0.505 + 0.605 - PACE_LEAD)
    assert f.pop() == ("b", "b0")  # b is ready: a waits
    f.done("b")
    clock.now = 0.7
    # Nothing is ready and a connection is free: a's request is sent now, to be held.
    assert f.pop() == ("a", "a2")
    assert f.pop() is None


# -- sessions past P while no host wants the place ----------------------------------

KEPT = dict(new_connection=False, served_on_connection=2, closed_by_server=False)


def capability(max_open: int, **kwargs: object) -> TwoLevelFrontier:
    """Crawl-capability with nothing measured: P = 1 (G = 0, not > W)."""
    return TwoLevelFrontier(CrawlCapability(), PARAMS, max_open, **kwargs)


def serve_one_of_two(f: TwoLevelFrontier) -> None:
    """Queue a0 and a1 for "a", serve a0 over a connection the host keeps alive."""
    for i in range(2):
        f.push("a", 1, f"a{i}")
    assert f.pop() == ("a", "a0")
    f.observe("a", Measurement(latency=0.01, **KEPT))
    f.done("a")


def test_a_session_goes_on_over_its_connection_while_no_host_wants_its_place():
    records: list = []
    f = capability(2, on_session_end=records.append)
    for i in range(3):
        f.push("a", 1, f"a{i}")
    f.push("b", 1, "b0")
    assert f.pop() == ("a", "a0")
    assert f.host("a").session_budget == 1  # P = 1
    f.observe("a", Measurement(latency=0.01, **KEPT))
    f.done("a")
    # One of two places is taken: "b" can open in the other, so "a" keeps its connection.
    assert f.pop() == ("a", "a1")
    assert (f.sessions_ended, f.session_extensions, f.open_hosts) == (0, 1, 1)
    assert f.pop() == ("b", "b0")  # the free place still goes to the best ranked host
    f.done("b")
    f.done("a")
    assert f.pop() == ("a", "a2")
    f.done("a")  # drained: the session ends
    assert [(r.host, r.served, r.budget) for r in records] == [("b", 1, 1), ("a", 3, 3)]


def test_a_session_ends_at_p_when_a_ranked_host_waits_for_its_place():
    f = capability(1)
    for i in range(2):
        f.push("a", 1, f"a{i}")
    f.push("b", 1, "b0")
    assert f.pop() == ("a", "a0")
    f.done("a")  # every place taken and "b" waits: P = 1 ends the session
    assert (f.sessions_ended, f.session_extensions) == (1, 0)
    assert f.pop() == ("b", "b0")


def test_with_one_place_and_no_other_host_the_session_goes_on():
    f = capability(1)
    serve_one_of_two(f)
    assert f.pop() == ("a", "a1")
    assert (f.sessions_ended, f.session_extensions) == (0, 1)


def test_a_session_ends_when_a_ranked_host_has_a_better_next_url():
    f = capability(2)
    f.push("a", 5, "a5")
    f.push("a", 1, "a1")
    f.push("b", 3, "b3")
    assert f.pop() == ("a", "a5")
    f.done("a")  # a's next URL (1) is worse than b's (3): no better URL waits for a
    assert (f.sessions_ended, f.session_extensions) == (1, 0)
    assert f.pop() == ("b", "b3")


def test_no_extension_for_a_host_that_closes_its_connections():
    f = capability(2)
    for i in range(2):
        f.push("a", 1, f"a{i}")
    f.pop()
    closed = dict(new_connection=True, served_on_connection=1, closed_by_server=True)
    f.observe("a", Measurement(latency=0.01, **closed))
    assert f.host("a").estimate.keepalive is False
    f.done("a")  # its next request opens a new connection anyway: nothing to save
    assert (f.sessions_ended, f.session_extensions) == (1, 0)


def test_an_extended_session_stops_at_requests_per_connection():
    f = capability(2)
    f.set_estimate("a", replace(HostEstimate.new(PARAMS), requests_per_connection=2))
    for i in range(4):
        f.push("a", 1, f"a{i}")
    served = []
    for _ in range(2):
        served.append(f.pop())
        f.done("a")
    assert served == [("a", "a0"), ("a", "a1")]
    # Two served on the connection the host keeps for two: the session ends there.
    assert (f.sessions_ended, f.session_extensions) == (1, 1)


def test_sessions_end_at_p_when_extension_is_off():
    f = capability(2, extend_sessions=False)
    serve_one_of_two(f)
    assert (f.sessions_ended, f.session_extensions) == (1, 0)


def test_no_extension_without_a_limit_on_open_hosts():
    # With no limit the frontier cannot tell whether a place is wanted (the downloader's).
    f = capability(None)  # type: ignore[arg-type]
    serve_one_of_two(f)
    assert (f.sessions_ended, f.session_extensions) == (1, 0)


def test_a_paced_host_ends_its_session_even_with_places_free():
    clock = FakeClock()
    f = capability(4, clock=clock)
    for i in range(3):
        f.push("a", 1, f"a{i}")
    f.pop()
    f.observe("a", Measurement(latency=0.01, **{**KEPT, "new_connection": True}))
    f.done("a")
    clock.now = 0.1
    assert f.pop() == ("a", "a1")  # extended: no host wants the place
    clock.now = 0.61
    f.observe("a", Measurement(latency=0.51, **KEPT))  # held: the server paces it
    f.done("a")
    assert (f.sessions_ended, f.session_extensions) == (1, 1)


@pytest.mark.parametrize(
    ("b_cpu", "goes_on"),
    [
        # a: next URL 4, 0.04 s of the crawler's CPU per page: 100 per second of CPU.
        # b: next URL 3, 0.01 s per page: 300 per second. b is the better use of the CPU.
        (0.01, False),
        # b's pages as heavy as a's: 4 / 0.04 >= 3 / 0.04, a goes on.
        (0.04, True),
    ],
)
def test_a_host_of_heavy_pages_ends_its_session_for_a_better_use_of_the_crawlers_cpu(
    b_cpu, goes_on
):
    f = capability(2)
    f.set_estimate("a", replace(HostEstimate.new(PARAMS), processing_time=0.04))
    f.set_estimate("b", replace(HostEstimate.new(PARAMS), processing_time=b_cpu))
    f.push("a", 9, "a9")
    f.push("a", 4, "a4")
    f.push("b", 3, "b3")
    assert f.pop() == ("a", "a9")
    f.done("a")
    assert (f.sessions_ended, f.session_extensions) == ((0, 1) if goes_on else (1, 0))
    if goes_on:
        assert f.pop() == ("a", "a4")


def test_a_hosts_first_page_is_weighed_against_the_crawls_typical_page():
    typical = TypicalPage()
    assert typical.size == 0.0
    for size in (4_000, 16_000, 0, None):  # no body, or none known: no page
        typical.add(size)
    assert (typical.pages, typical.size) == (2, pytest.approx(8_000))  # sqrt(4e3 * 16e3)
    f = TwoLevelFrontier(CrawlCapability(), PARAMS, max_open_hosts=2)
    common = dict(new_connection=False, served_on_connection=1, closed_by_server=False)
    for host, size in (("a", 4_000), ("a", 16_000), ("b", 2_700_000), ("b", 8_000)):
        f.push(host, 1.0, size)
        assert f.pop() == (host, size)
        f.observe(host, Measurement(latency=0.005, elapsed=0.01, size=size, **common))
        f.done(host)
        if host == "b" and size > 8_000:
            # b's first page, 2.7 MB, against the crawl's typical 8 KB counted as two of
            # b's pages: 8,000 * 337.5 ** (1/3) = 55,699 bytes, not 2.7 MB.
            assert f.host("b").estimate.page_size == pytest.approx(55_699, rel=1e-4)
    # Later pages as before: exp(0.8 ln 55,699 + 0.2 ln 8,000) = 37,937.
    assert f.host("b").estimate.page_size == pytest.approx(55_699**0.8 * 8_000**0.2, rel=1e-4)
    # a's first page came before any: it stood alone (4,000), then 0.8/0.2 as before.
    assert f.host("a").estimate.page_size == pytest.approx(4_000**0.8 * 16_000**0.2)
    assert f.typical_page.pages == 4
