"""What the live view remembers between looks (scrapy_twolevel/live/timeline.py): the
crawl's course and its rates, each host's events, its sessions, worked by hand."""

from __future__ import annotations

import pytest

from scrapy_twolevel.frontier.hosts import SessionRecord
from scrapy_twolevel.live.timeline import (
    History,
    HostEvents,
    Point,
    RecentSessions,
    host_timeline,
)

pytestmark = pytest.mark.unit


def point(elapsed, pages, pending=0, errors=0, refusals=0, quality=0.0):
    return Point(elapsed, pages, quality, pending, errors, refusals)


def test_rates_over_the_window_overall_and_the_time_to_drain():
    history = History()
    for p in (point(0, 0), point(10, 20, errors=1), point(20, 50, errors=2, refusals=3)):
        history.add(p)
    now = point(40, 110, pending=120, errors=5, refusals=3)
    # The window's first point is t = 10 (t = 0 is older than 40 - 30): over 30 s,
    # 90 pages (3/s), 4 errors (8/min), 3 refusals (6/min); 110 pages in 40 s overall;
    # 120 pending at 3/s: 40 s.
    assert history.rates(now, window=30) == {
        "pages_per_s_now": 3.0,
        "pages_per_s_overall": 2.75,
        "errors_per_min": 8.0,
        "refusals_per_min": 6.0,
        "drain_s": 40.0,
    }


def test_rates_before_two_points_and_when_nothing_moves_say_unknown():
    history = History()
    assert history.rates(point(0, 0)) == {
        "pages_per_s_now": None,
        "pages_per_s_overall": None,
        "errors_per_min": None,
        "refusals_per_min": None,
        "drain_s": None,
    }
    history.add(point(10, 5, pending=7))
    stalled = history.rates(point(20, 5, pending=7))
    assert stalled["pages_per_s_now"] == 0.0 and stalled["drain_s"] is None  # never, at 0/s
    assert history.rates(point(20, 9, pending=0))["drain_s"] is None  # nothing to drain


def test_a_full_history_thins_its_older_half_and_keeps_the_recent_points():
    history = History(points=4)
    for t in range(5):
        history.add(point(t, t))
    # Five points over four: the older half (t = 0, 1) keeps every other point.
    assert [p.elapsed for p in history.points] == [0, 2, 3, 4]
    assert history.to_rows()[-1] == [4, 4, 0.0, 0]
    with pytest.raises(ValueError, match="points must be >= 4"):
        History(points=3)


def test_host_events_keep_the_latest_per_host_for_the_most_recently_active_hosts():
    events = HostEvents(per_host=2, hosts=2)
    events.add("a", 1.0, "failed", "down")
    events.add("b", 2.0, "refused", "Retry-After 5 s")
    events.add("a", 3.0, "failed", "slow")  # a is now the most recently active
    events.add("c", 4.0, "refused")  # a third host: b, the least recent, goes
    assert events.of("b") == []
    events.add("a", 5.0, "refused")  # a keeps its last two
    assert events.of("a") == [(3.0, "failed", "slow"), (5.0, "refused", "")]
    assert events.of("c") == [(4.0, "refused", "")]


def test_a_hosts_timeline_has_its_sessions_and_events_oldest_first_before_now():
    sessions = RecentSessions(kept=2)
    sessions.ended(SessionRecord("h", 3, 5, 10.0, 12.5))
    sessions.ended(SessionRecord("other", 1, 1, 11.0, 11.1))
    # Failed: backed off until 19.5; it pushes the first session out.
    sessions.ended(SessionRecord("h", 0, 1, 16.0, 17.0, True, 19.5, "backoff"))
    assert [s.started for s in sessions.of("h")] == [16.0]
    rows = host_timeline(
        20.0,
        [SessionRecord("h", 3, 5, 10.0, 12.5), *sessions.of("h")],
        [(15.0, "refused", "Retry-After 2 s"), (12.0, "failed", "slow")],
    )
    assert rows == [
        {"at_s": -10.0, "kind": "session", "duration_s": 2.5, "detail": "3 of 5 pages"},
        {"at_s": -8.0, "kind": "failed", "detail": "slow"},
        {"at_s": -5.0, "kind": "refused", "detail": "Retry-After 2 s"},
        {
            "at_s": -4.0,
            "kind": "session",
            "duration_s": 1.0,
            "detail": "0 of 1 page, ended by failures",
        },
        {"at_s": -3.0, "kind": "wait", "duration_s": 2.5, "detail": "backoff"},
    ]
