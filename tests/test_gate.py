"""HostGate: one request inside per host, none before the server's Retry-After (fake clock)."""

from __future__ import annotations

import pytest
from helpers import FakeClock

from scrapy_twolevel.frontier.gate import HostGate

pytestmark = pytest.mark.unit


def test_one_request_inside_per_host_the_rest_in_arrival_order():
    gate = HostGate(FakeClock(100.0))
    admitted: list[str] = []
    assert gate.enter("a", lambda: admitted.append("a1")) is True
    assert gate.enter("a", lambda: admitted.append("a2")) is False
    assert gate.enter("a", lambda: admitted.append("a3")) is False
    assert gate.enter("b", lambda: admitted.append("b1")) is True  # another host: no wait
    assert (gate.waiting("a"), admitted) == (2, [])
    gate.leave("a")
    assert admitted == ["a2"] and gate.inside("a")
    gate.leave("a")
    gate.leave("a")
    assert admitted == ["a2", "a3"] and not gate.inside("a") and gate.waiting("a") == 0


def test_no_request_enters_before_the_hold_and_the_first_waiter_goes_at_its_end():
    clock = FakeClock(100.0)
    gate = HostGate(clock)
    admitted: list[int] = []
    assert gate.enter("a", lambda: None)
    gate.hold("a", 130.0)  # the answer: 429, Retry-After: 30
    gate.leave("a")
    assert gate.enter("a", lambda: admitted.append(1)) is False
    assert gate.enter("a", lambda: admitted.append(2)) is False
    assert gate.next_wake() == 130.0
    clock.now = 129.9
    gate.wake()
    assert admitted == []
    clock.now = 130.0
    gate.wake()
    assert admitted == [1]  # one inside; the second waits for it to leave
    assert gate.next_wake() is None
    gate.leave("a")
    assert admitted == [1, 2]
    assert gate.not_before("a") == 0.0  # past holds are forgotten


def test_a_shorter_or_past_hold_does_not_shorten_a_longer_one():
    clock = FakeClock(100.0)
    gate = HostGate(clock)
    gate.hold("a", 160.0)
    gate.hold("a", 120.0)
    gate.hold("b", 90.0)  # already past
    assert (gate.not_before("a"), gate.not_before("b")) == (160.0, 0.0)
    assert gate.enter("b", lambda: None) is True


def test_a_newcomer_does_not_overtake_requests_already_waiting():
    clock = FakeClock(100.0)
    gate = HostGate(clock)
    order: list[str] = []
    gate.hold("a", 110.0)
    gate.enter("a", lambda: order.append("first"))
    clock.now = 111.0  # the hold has passed, but nobody called wake() yet
    assert gate.enter("a", lambda: order.append("second")) is False
    gate.wake()
    gate.leave("a")
    assert order == ["first", "second"]
