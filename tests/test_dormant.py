"""Dormant hosts (frontier/dormant.py): a host drained and idle for DORMANT_AFTER seconds
is packed into bytes and comes back whole when it gets URLs again."""

from __future__ import annotations

import pytest
from helpers import FakeClock

from scrapy_twolevel.frontier import (
    BreadthFirst,
    CostParams,
    CrawlCapability,
    FifoHostQueue,
    HostEstimate,
    Measurement,
    TwoLevelFrontier,
    dormant,
)
from scrapy_twolevel.frontier.estimates import SharedPrior
from scrapy_twolevel.frontier.frontier import DORMANT_AFTER
from scrapy_twolevel.frontier.hosts import GIVEN_UP_BUDGET, Host

pytestmark = pytest.mark.unit

PARAMS = CostParams()
PAGE = Measurement(
    latency=0.02, new_connection=True, served_on_connection=1, closed_by_server=False
)


def kept(host: Host) -> dict[str, object]:
    """What a dormant host keeps, to compare a host with its unpacked copy."""
    return {
        name: getattr(host, name)
        for name in (
            "answered",
            "failed_sessions",
            "failing_since",
            "failures",
            "fetched",
            "given_up",
            "given_up_for",
            "last_end",
            "min_gap",
            "ready_at",
            "refused_in_a_row",
            "sessions",
        )
    }


def test_pack_and_unpack_keep_every_field_that_must_survive():
    prior = SharedPrior(PARAMS)
    host = Host("a.example", FifoHostQueue(), prior)
    assert kept(
        dormant.unpack("a.example", dormant.pack(host, prior), FifoHostQueue(), prior)
    ) == kept(host)
    host.answered, host.failed_sessions, host.failing_since = True, 2, 12.5
    host.failures, host.fetched, host.refused_in_a_row, host.sessions = 1, 7, 3, 4
    host.given_up, host.given_up_for = True, GIVEN_UP_BUDGET
    host.last_end, host.min_gap, host.ready_at = 99.25, 1.5, 101.0
    estimate = HostEstimate.new(PARAMS)
    estimate.observe(PARAMS, PAGE)
    estimate.refusals, estimate.refusal_gap, estimate.keepalive = 2, 0.75, False
    host.estimate = estimate
    data = dormant.pack(host, prior)
    back = dormant.unpack("a.example", data, FifoHostQueue(), prior)
    assert kept(back) == kept(host)
    assert back.estimate == estimate and back.estimate is not estimate
    assert back.key == "a.example" and back.queue is not host.queue
    # Only what differs from the defaults is packed: a host never measured takes a few bytes.
    fresh = Host("b.example", FifoHostQueue(), prior)
    fresh.fetched = 1
    assert len(dormant.pack(fresh, prior)) == 8 + 4  # the mask, one integer in 4 bytes
    # A count that does not fit in 4 bytes widens every integer of that host, losslessly.
    for big in (2**32, -1, 2**40):
        fresh.fetched = big
        assert len(dormant.pack(fresh, prior)) == 8 + 8
        assert (
            dormant.unpack("b.example", dormant.pack(fresh, prior), FifoHostQueue(), prior).fetched
            == big
        )
    fresh.fetched = 2**32 - 1
    assert len(dormant.pack(fresh, prior)) == 8 + 4
    assert (
        dormant.unpack("b.example", dormant.pack(fresh, prior), FifoHostQueue(), prior).fetched
        == 2**32 - 1
    )
    assert (
        dormant.unpack("b.example", dormant.pack(fresh, prior), FifoHostQueue(), prior).estimate
        is prior
    )


def serve_one_page_each(frontier: TwoLevelFrontier, clock: FakeClock, hosts: list[str]) -> None:
    for key in hosts:
        assert frontier.push(key, 1.0, f"{key}/1")
    while (popped := frontier.pop()) is not None:
        clock.now += 0.01
        frontier.observe(popped[0], PAGE)
        frontier.done(popped[0])


def test_a_drained_host_is_packed_after_dormant_after_and_comes_back_with_its_state():
    clock = FakeClock(1000.0)
    frontier = TwoLevelFrontier(CrawlCapability(), PARAMS, 4, clock=clock)
    serve_one_page_each(frontier, clock, ["a.example", "b.example"])
    frontier.set_min_gap("a.example", 2.0)  # robots.txt Crawl-delay, kept while dormant
    estimate = frontier.host("a.example").estimate
    assert frontier.dormant_count == 0
    clock.now += DORMANT_AFTER - 1
    assert frontier.pop() is None
    assert frontier.dormant_count == 0  # not yet
    clock.now += 2
    assert frontier.pop() is None
    assert frontier.dormant_count == 2 and frontier.host_count == 2
    # Every host is still listed (as a copy), with its estimate.
    listed = {h.key: h for h in frontier.hosts()}
    assert set(listed) == {"a.example", "b.example"}
    assert listed["a.example"].estimate == estimate and listed["a.example"].fetched == 1
    # New URLs bring it back with what it had learnt.
    assert frontier.push("a.example", 1.0, "a.example/2")
    assert frontier.dormant_count == 1
    host = frontier.host("a.example")
    assert host.estimate == estimate and host.min_gap == 2.0 and host.sessions == 1
    popped = frontier.pop()
    assert popped == ("a.example", "a.example/2")


def test_a_host_given_up_stays_given_up_while_dormant():
    clock = FakeClock(1000.0)
    frontier = TwoLevelFrontier(BreadthFirst(), PARAMS, 4, clock=clock, budget=lambda host: 1)
    serve_one_page_each(frontier, clock, ["a.example"])
    clock.now += DORMANT_AFTER + 1
    frontier.pop()
    assert frontier.dormant_count == 1
    assert not frontier.push("a.example", 1.0, "a.example/late")  # its budget is spent
    assert frontier.dropped_budget == 1


def test_busy_waiting_or_refilled_hosts_are_not_packed():
    clock = FakeClock(1000.0)
    frontier = TwoLevelFrontier(BreadthFirst(), PARAMS, 4, clock=clock)
    serve_one_page_each(frontier, clock, ["a.example", "b.example", "c.example"])
    frontier.push("a.example", 1.0, "a.example/2")  # refilled: queued, ranked
    frontier.hold("b.example", DORMANT_AFTER * 3)  # waiting (a Retry-After)
    clock.now += DORMANT_AFTER + 1
    assert frontier.pop() == ("a.example", "a.example/2")  # a is busy from now on
    assert frontier.dormant_count == 1  # c only
    assert {h.key for h in frontier.hosts()} == {"a.example", "b.example", "c.example"}
    # b's wait ends, it is found drained again, and packed a DORMANT_AFTER later.
    clock.now += DORMANT_AFTER * 2
    frontier.done("a.example")
    assert frontier.pop() is None
    clock.now += DORMANT_AFTER + 1
    assert frontier.pop() is None
    assert frontier.dormant_count == 3


def test_never_packed_when_dormant_after_is_none():
    clock = FakeClock(1000.0)
    frontier = TwoLevelFrontier(BreadthFirst(), PARAMS, 4, clock=clock, dormant_after=None)
    serve_one_page_each(frontier, clock, ["a.example"])
    clock.now += DORMANT_AFTER * 10
    assert frontier.pop() is None
    assert frontier.dormant_count == 0 and frontier.host_count == 1


def test_a_copy_of_a_dormant_host_takes_no_urls():
    clock = FakeClock(1000.0)
    frontier = TwoLevelFrontier(BreadthFirst(), PARAMS, 4, clock=clock)
    serve_one_page_each(frontier, clock, ["a.example"])
    clock.now += DORMANT_AFTER + 1
    frontier.pop()
    (copy,) = frontier.hosts()
    with pytest.raises(TypeError):
        copy.queue.push(1.0, 1, "x")
