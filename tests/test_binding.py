"""Unit tests of binding-capability: the measured price of a CPU second, the policy's
scores at a price against hand-computed values, and the frontier ranking hosts again."""

from __future__ import annotations

from dataclasses import replace

import pytest
from helpers import FakeClock

from scrapy_twolevel.frontier import (
    BindingCapability,
    CostParams,
    CrawlCapability,
    HostEstimate,
    QualityHostQueue,
    ResourceCapability,
    TwoLevelFrontier,
)
from scrapy_twolevel.frontier.binding import HIGHEST, INTERVAL, RESCORE_SHARE, CpuPrice

pytestmark = pytest.mark.unit

EIGHT = CostParams(
    default_connection_time=0.1,
    default_response_time=0.1,
    connections=8,
)


def _queue(quality: float) -> QualityHostQueue:
    q = QualityHostQueue(1)
    q.push(quality, 0, 0)
    return q


def _estimate(service: float, cpu: float) -> HostEstimate:
    est = replace(HostEstimate.new(EIGHT), service_time=service, service_samples=1)
    est.processing_time, est.processing_samples = cpu, 1
    return est


# A slow host of valuable pages (W = 0.5 s, X = 5 ms, next page 0.3) and a fast host of
# heavy pages (W = 10 ms, X = 20 ms, next page 0.05), eight connections.
SLOW, HEAVY = _estimate(0.5, 0.005), _estimate(0.01, 0.02)


def test_binding_capability_scores_at_a_price_hand_computed():
    policy = BindingCapability()
    valuable, modest = _queue(0.3), _queue(0.05)
    # r = 1: T / K + P * X, resource-capability's scores.
    at_one = replace(EIGHT, cpu_price=1.0)
    for queue, est in ((valuable, SLOW), (modest, HEAVY)):
        assert policy.score(queue, est, at_one) == pytest.approx(
            ResourceCapability().score(queue, est, EIGHT)
        )
    # r = 1/8: 0.3 / (0.0625 + 0.005 / 8) = 4.7525 against 0.05 / (0.00125 + 0.0025) =
    # 13.33: the fast host first, as crawl-capability (whose scores are 1/8 of these).
    low = replace(EIGHT, cpu_price=1 / 8)
    assert policy.score(valuable, SLOW, low) == pytest.approx(0.3 / 0.063125)
    assert policy.score(modest, HEAVY, low) == pytest.approx(0.05 / 0.00375)
    for queue, est in ((valuable, SLOW), (modest, HEAVY)):
        assert policy.score(queue, est, low) == pytest.approx(
            8 * CrawlCapability().score(queue, est, EIGHT)
        )
    # r = 64: 0.3 / (0.0625 + 0.32) = 0.7843 against 0.05 / (0.00125 + 1.28) = 0.03902:
    # quality per CPU second decides.
    high = replace(EIGHT, cpu_price=64.0)
    assert policy.score(valuable, SLOW, high) == pytest.approx(0.3 / 0.3825)
    assert policy.score(modest, HEAVY, high) == pytest.approx(0.05 / 1.28125)


def test_resource_capability_ignores_the_price():
    policy = ResourceCapability()
    queue = _queue(0.3)
    assert policy.score(queue, SLOW, replace(EIGHT, cpu_price=64.0)) == policy.score(
        queue, SLOW, EIGHT
    )


def _cpu_price(start: float = 1.0) -> tuple[CpuPrice, FakeClock, FakeClock]:
    wall, cpu = FakeClock(100.0), FakeClock(10.0)
    return CpuPrice(wall, cpu, 8, start=start), wall, cpu


def test_cpu_price_rises_while_the_core_is_saturated_and_falls_when_it_has_room():
    price, wall, cpu = _cpu_price()
    assert price.sample() is None  # no interval has passed
    wall.now += INTERVAL
    cpu.now += 0.95 * INTERVAL
    assert price.sample() == 4.0
    assert price.busy == pytest.approx(0.95)
    wall.now += 2.0
    cpu.now += 1.9
    assert price.sample() == 16.0
    for expected in (64.0, None):  # at most HIGHEST, then no change
        wall.now += 1.0
        cpu.now += 1.0
        assert price.sample() == expected
    assert price.price == HIGHEST
    # 80% busy: between the thresholds, the price stays.
    wall.now += 1.0
    cpu.now += 0.8
    assert price.sample() is None
    # 30% busy: down by 4 a second, to 1/K at least.
    seen = []
    for _ in range(6):
        wall.now += 1.0
        cpu.now += 0.3
        seen.append(price.sample())
    assert seen == [16.0, 4.0, 1.0, 0.25, 0.125, None]
    assert price.changes == 8


def test_cpu_price_start_is_bounded_and_rescoring_spaces_the_looks():
    assert _cpu_price(start=1000.0)[0].price == HIGHEST
    assert _cpu_price(start=0.0)[0].price == 1 / 8
    price, wall, cpu = _cpu_price()
    wall.now += 1.0
    cpu.now += 1.0
    assert price.sample() == 4.0
    price.rescored(0.5)  # a re-scoring of 0.5 s: the next look 0.5 / 1% = 50 s on
    wall.now += 49.0
    cpu.now += 49.0
    assert price.sample() is None
    wall.now += 1.0
    assert price.sample() == 16.0
    assert 0.5 / RESCORE_SHARE == 50.0


def test_reprice_ranks_waiting_hosts_again_at_the_new_price():
    def frontier_at(cpu_price: float) -> TwoLevelFrontier:
        f = TwoLevelFrontier(BindingCapability(), replace(EIGHT, cpu_price=cpu_price), 1)
        f.set_estimate("slow", replace(SLOW))
        f.set_estimate("heavy", replace(HEAVY))
        f.push("blocker", 1.0, "b")
        f.push("slow", 0.3, "s")
        f.push("heavy", 0.05, "h")
        assert f.pop() == ("blocker", "b")  # holds the one place while the others rank
        return f

    low = frontier_at(1 / 8)
    low.reprice(64.0)  # the core binds now
    assert low.params.cpu_price == 64.0
    low.done("blocker")
    assert low.pop() == ("slow", "s")
    high = frontier_at(64.0)
    high.reprice(1 / 8)  # connections bind now
    high.done("blocker")
    assert high.pop() == ("heavy", "h")


def test_reprice_keeps_first_come_order_among_ties_and_leaves_other_policies_alone():
    f = TwoLevelFrontier(BindingCapability(), EIGHT, 1)
    for host in ("a", "b", "c", "d"):
        f.push(host, 1.0, host)
    assert f.pop() == ("a", "a")
    f.reprice(64.0)
    f.done("a")
    served = []
    while (popped := f.pop()) is not None:
        served.append(popped[0])
        f.done(popped[0])
    assert served == ["b", "c", "d"]
    # crawl-capability's scores do not depend on the price: repricing keeps its ranking.
    g = TwoLevelFrontier(CrawlCapability(), EIGHT, 1)
    g.set_estimate("slow", replace(SLOW))
    g.set_estimate("heavy", replace(HEAVY))
    g.push("blocker", 1.0, "b")
    g.push("slow", 0.3, "s")
    g.push("heavy", 0.05, "h")
    assert g.pop() == ("blocker", "b")
    g.reprice(64.0)
    g.done("blocker")
    assert g.pop() == ("heavy", "h")
