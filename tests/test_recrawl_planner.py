"""The recrawl planner on rate profiles whose answers can be worked out by hand: the k rule,
the square-root budget split, the bounds and scroll-off guards, online learning, and the
adaptive fallback; with a fake clock."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import pytest
from helpers import FakeClock

from scrapy_twolevel.recrawl.planner import RecrawlPlanner, fetches_per_day, solve_theta

pytestmark = pytest.mark.unit

HOUR = 3600.0
DAY = 86400.0
MONDAY = 1704067200.0  # 2024-01-01 00:00 UTC
MIN = 60.0


class Rates:
    """A predictor from plain functions of time (articles per hour)."""

    def __init__(self, **rates: Callable[[float], float] | float) -> None:
        self.rates = {
            k.replace("_", "."): (v if callable(v) else (lambda t, v=v: v))
            for k, v in rates.items()
        }

    def rate(self, seed_key: str, t: float) -> float | None:
        f = self.rates.get(seed_key)
        return None if f is None else f(t)

    def seeds(self) -> list[str]:
        return list(self.rates)


def planner(predictor, **kwargs) -> RecrawlPlanner:
    kwargs.setdefault("min_interval", 1.0)
    kwargs.setdefault("max_interval", 7 * DAY)
    kwargs.setdefault("learn", False)
    return RecrawlPlanner(predictor, **kwargs)


# -- the k rule (gamma = 1) ---------------------------------------------------------------


def test_k_rule_fetches_when_k_articles_are_expected():
    p = planner(Rates(a=6.0), gamma=1.0, threshold=3.0)  # 6/h, k = 3: every 30 min
    assert p.next_fetch("a", MONDAY, 0) == MONDAY + 30 * MIN


def test_k_rule_integrates_across_a_change_of_rate():
    # Nothing until 10:00, then 6 an hour: from 09:00, 3 are expected at 10:30.
    night = Rates(a=lambda t: 0.0 if t < MONDAY + 10 * HOUR else 6.0)
    p = planner(night, gamma=1.0, threshold=3.0)
    assert p.next_fetch("a", MONDAY + 9 * HOUR, 0) == pytest.approx(MONDAY + 10.5 * HOUR)
    # 2 an hour until 10:00, then 6: from 09:30, 1 by 10:00, 2 more by 10:20.
    slow = Rates(a=lambda t: 2.0 if t < MONDAY + 10 * HOUR else 6.0)
    p = planner(slow, gamma=1.0, threshold=3.0)
    assert p.next_fetch("a", MONDAY + 9.5 * HOUR, 0) == pytest.approx(MONDAY + 10 * HOUR + 20 * MIN)


def test_square_root_rule_with_a_threshold():
    # gamma = 1/2, rate 4/h, theta = 1: sqrt(4) / 1 = 2 fetches an hour.
    p = planner(Rates(a=4.0), gamma=0.5, threshold=1.0)
    assert p.next_fetch("a", MONDAY, 0) == pytest.approx(MONDAY + 30 * MIN)


# -- the budget split -----------------------------------------------------------------------


def test_square_root_budget_split_between_two_seeds():
    # Rates 4 and 1 an hour, 72 fetches a day: sqrt(4) : sqrt(1) = 2 : 1, i.e. 2 and 1 an hour.
    p = planner(Rates(a=4.0, b=1.0), budget=72.0, gamma=0.5)
    assert p.next_fetch("a", MONDAY, 0) == pytest.approx(MONDAY + 30 * MIN)
    assert p.next_fetch("b", MONDAY, 0) == pytest.approx(MONDAY + HOUR)
    assert p.theta == pytest.approx(1.0)
    assert p.budget_status == "ok"


def test_k_rule_budget_split_is_proportional_to_the_rate():
    # gamma = 1, 120 a day: 4 : 1 gives 4 and 1 fetches an hour; k = 1 article per fetch.
    p = planner(Rates(a=4.0, b=1.0), budget=120.0, gamma=1.0)
    assert p.next_fetch("a", MONDAY, 0) == pytest.approx(MONDAY + 15 * MIN)
    assert p.next_fetch("b", MONDAY, 0) == pytest.approx(MONDAY + HOUR)
    assert p.theta == pytest.approx(1.0)


def test_budget_split_across_hours():
    # One seed, 9/h from 00:00 to 12:00 and 1/h after; 48 a day with the square-root rule:
    # 3u for 12 h and u for 12 h -> 48u = 48, u = 1: 3 fetches an hour by day, 1 at night.
    rate = Rates(a=lambda t: 9.0 if (t - MONDAY) % DAY < 12 * HOUR else 1.0)
    p = planner(rate, budget=48.0, gamma=0.5)
    assert p.next_fetch("a", MONDAY, 0) == pytest.approx(MONDAY + 20 * MIN)
    assert p.next_fetch("a", MONDAY + 13 * HOUR, 0) == pytest.approx(MONDAY + 14 * HOUR)


def test_adaptive_seeds_are_paid_out_of_the_budget():
    # "new" has no model: its first interval is an hour (24 a day), leaving 48 for "a",
    # rate 4: the budget gives it 2 an hour.
    p = planner(Rates(a=4.0), budget=72.0, gamma=0.5, initial_interval=HOUR)
    assert p.next_fetch("new", MONDAY, 0) == MONDAY + HOUR
    assert p.next_fetch("a", MONDAY, 0) == pytest.approx(MONDAY + 30 * MIN)


def test_budget_below_the_floor_fetches_at_the_floor():
    # Max interval 2 h: at least 12 a day per seed; a budget of 5 cannot be met.
    p = planner(Rates(a=4.0), budget=5.0, max_interval=2 * HOUR)
    assert p.next_fetch("a", MONDAY, 0) == MONDAY + 2 * HOUR
    assert math.isinf(p.theta) and "below the floor" in p.budget_status


def test_solve_theta_meets_the_budget_exactly():
    rng = np.random.default_rng(0)
    rates = rng.exponential(3.0, (4, 168)) * (rng.random((4, 168)) > 0.2)
    kwargs = {
        "gamma": 0.5,
        "limits": [None, 5.0, 10.0, None],
        "step": HOUR,
        "min_interval": 60.0,
        "max_interval": 6 * HOUR,
    }
    for target in (100.0, 400.0, 1500.0):
        theta, status = solve_theta(rates, target, **kwargs)
        assert status == "ok"
        assert fetches_per_day(rates, theta, **kwargs) == pytest.approx(target, rel=1e-9)
    theta, status = solve_theta(rates, 1e9, **kwargs)
    assert "above the ceiling" in status


# -- bounds and guards ----------------------------------------------------------------------


def test_interval_bounds():
    p = planner(
        Rates(a=600.0, b=0.0), gamma=1.0, threshold=1.0, min_interval=60.0, max_interval=6 * HOUR
    )
    assert p.next_fetch("a", MONDAY, 0) == MONDAY + 60.0  # wants 6 s
    assert p.next_fetch("b", MONDAY, 0) == MONDAY + 6 * HOUR  # nothing expected, ever


def test_scroll_off_guard_keeps_half_the_page():
    # 60/h with k = 40 would wait 40 min; a page of 20 allows 10 expected: 10 min.
    p = planner(Rates(a=60.0), gamma=1.0, threshold=40.0, list_size=20)
    assert p.next_fetch("a", MONDAY, 0) == pytest.approx(MONDAY + 10 * MIN)
    p = planner(Rates(a=60.0), gamma=1.0, threshold=40.0, list_size={"a": 40})
    assert p.next_fetch("a", MONDAY, 0) == pytest.approx(MONDAY + 20 * MIN)
    assert p.scroll_limit("b") is None


def test_scroll_off_guard_follows_a_burst_the_model_does_not_know():
    # The model says 1/h (k = 1: an hour), but the last 10 minutes brought 10 new links:
    # at that observed rate, half a page of 20 fills in 10 minutes.
    p = planner(Rates(a=1.0), gamma=1.0, threshold=1.0, list_size=20)
    assert p.next_fetch("a", MONDAY, 0) == MONDAY + HOUR
    assert p.next_fetch("a", MONDAY + 10 * MIN, 10) == pytest.approx(MONDAY + 20 * MIN)
    # No page size known: no guard.
    p = planner(Rates(a=1.0), gamma=1.0, threshold=1.0)
    p.next_fetch("a", MONDAY, 0)
    assert p.next_fetch("a", MONDAY + 10 * MIN, 10) == MONDAY + 10 * MIN + HOUR


# -- online learning ------------------------------------------------------------------------


def test_online_learning_scales_the_rate_by_what_fetches_find():
    # Predicted 6/h, k = 3 (30 min); the site publishes twice as much.
    p = planner(
        Rates(a=6.0), gamma=1.0, threshold=3.0, learn=True, prior_articles=10.0, half_life=1e12
    )
    t = MONDAY
    assert p.next_fetch("a", t, 99) == t + 30 * MIN  # first fetch: its links say nothing
    assert p.multiplier("a") == 1.0
    t += 30 * MIN
    nxt = p.next_fetch("a", t, 6)  # 6 found where 3 were expected
    assert p.multiplier("a") == pytest.approx(16 / 13)
    assert nxt == pytest.approx(t + 3 / (6 * 16 / 13) * HOUR)
    for _ in range(300):  # one article every 5 minutes
        found = math.floor((nxt - MONDAY) / 300) - math.floor((t - MONDAY) / 300)
        t, nxt = nxt, p.next_fetch("a", nxt, found)
    assert p.multiplier("a") == pytest.approx(2.0, rel=0.02)
    assert nxt - t == pytest.approx(15 * MIN, rel=0.05)


def test_learning_forgets_with_the_half_life():
    p = planner(
        Rates(a=6.0), gamma=1.0, threshold=3.0, learn=True, prior_articles=1.0, half_life=HOUR
    )
    p.next_fetch("a", MONDAY, 0)
    p.next_fetch("a", MONDAY + HOUR, 18)  # 18 found, 6 expected: m = 19 / 7
    assert p.multiplier("a") == pytest.approx(19 / 7)
    p.next_fetch("a", MONDAY + 2 * HOUR, 6)  # halved, then 6 of 6: (1 + 9 + 6) / (1 + 3 + 6)
    assert p.multiplier("a") == pytest.approx(16 / 10)
    p.forget("a")
    assert p.multiplier("a") == 1.0


# -- seeds without a model, and the clock -----------------------------------------------------


def test_adaptive_fallback_for_seeds_without_a_model():
    p = planner(None, min_interval=600.0, max_interval=2 * HOUR, initial_interval=HOUR)
    t = MONDAY
    assert p.next_fetch("x", t, 5) == t + HOUR  # first fetch: the initial interval
    assert p.next_fetch("x", t + HOUR, 3) == t + HOUR + 0.8 * HOUR  # new links: x 0.8
    assert p.next_fetch("x", t + 2 * HOUR, 0) == pytest.approx(t + 2 * HOUR + 1.12 * HOUR)
    assert p.next_fetch("x", t + 4 * HOUR, 0) == t + 4 * HOUR + 1.568 * HOUR
    assert p.next_fetch("x", t + 6 * HOUR, 0) == t + 8 * HOUR  # clamped at 2 h
    # A seed the predictor does not know takes the same path.
    q = planner(Rates(a=6.0), gamma=1.0, threshold=3.0, initial_interval=HOUR)
    assert q.next_fetch("unknown", t, 0) == t + HOUR


def test_the_clock_is_read_when_no_time_is_given():
    clock = FakeClock(MONDAY + 5 * HOUR)
    p = planner(Rates(a=6.0), gamma=1.0, threshold=3.0, clock=clock)
    assert p.next_fetch("a", None, 0) == MONDAY + 5.5 * HOUR
    clock.now += 10 * MIN
    assert p.next_fetch("a", None, 1) == MONDAY + 5 * HOUR + 40 * MIN


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"gamma": 1.5, "threshold": 1.0}, "gamma"),
        ({}, "budget .* or a threshold"),
        ({"budget": 0.0}, "budget"),
        ({"threshold": -1.0}, "threshold"),
        ({"threshold": 1.0, "min_interval": 10.0, "max_interval": 5.0}, "min_interval"),
        ({"threshold": 1.0, "scroll_fraction": 0.0}, "scroll_fraction"),
        ({"threshold": 1.0, "adaptive_decrease": 1.0}, "adaptive_decrease"),
    ],
)
def test_bad_parameters_are_refused(kwargs, message):
    with pytest.raises(ValueError, match=message):
        RecrawlPlanner(Rates(a=1.0), **kwargs)


def test_negative_new_links_are_refused():
    with pytest.raises(ValueError, match="new_links"):
        planner(Rates(a=1.0), threshold=1.0).next_fetch("a", MONDAY, -1)
