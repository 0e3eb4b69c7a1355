"""From discovered articles to per-hour samples: seed keys, the midpoint rule, the UTC
calendar, and the fallback from host + path to host, on hand-counted histories."""

from __future__ import annotations

import pytest

from scrapy_twolevel.recrawl.samples import (
    FEATURE_NAMES,
    build_samples,
    features,
    host_of,
    hour_of_day,
    hourly_counts,
    known_or_midpoint,
    midpoint_time,
    one_hot,
    seed_key,
    week_cell,
    weekday,
    window,
)

pytestmark = pytest.mark.unit

HOUR = 3600.0
DAY = 86400.0
#: Monday 2024-01-01 00:00 UTC.
MONDAY = 1704067200.0


# -- seed keys --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "key"),
    [
        ("https://Example.com/Sport/?page=1#top", "example.com/Sport"),
        ("http://example.com/sport", "example.com/sport"),
        ("https://example.com/sport/football/123.html", "example.com/sport"),
        ("https://example.com//world/", "example.com/world"),
        ("https://example.com/", "example.com"),
        ("https://example.com", "example.com"),
        ("https://example.com/?page=2", "example.com"),
        ("http://example.com:8080/a/b", "example.com:8080/a"),
    ],
)
def test_seed_key_is_host_plus_first_path_segment(url, key):
    assert seed_key(url) == key


def test_seed_key_needs_a_host():
    with pytest.raises(ValueError, match="without a host"):
        seed_key("/sport/")
    with pytest.raises(ValueError, match="bad port"):
        seed_key("http://example.com:99999/")


def test_host_of():
    assert host_of("example.com/sport") == "example.com"
    assert host_of("example.com") == "example.com"


# -- the midpoint rule --------------------------------------------------------------------


def test_midpoint_of_fetches_less_than_an_hour_apart():
    assert midpoint_time(1000.0, 2000.0) == 1500.0
    assert midpoint_time(0.0, 3599.0) == 1799.5


def test_no_midpoint_an_hour_or_more_apart_or_without_a_previous_fetch():
    assert midpoint_time(0.0, 3600.0) is None
    assert midpoint_time(0.0, 7200.0) is None
    assert midpoint_time(None, 2000.0) is None
    assert midpoint_time(2000.0, 1000.0) is None  # clock went back: no estimate
    assert midpoint_time(0.0, 7200.0, max_gap=8000.0) == 3600.0


def test_a_known_publish_time_wins_over_the_midpoint():
    assert known_or_midpoint(123.0, 1000.0, 2000.0) == 123.0
    assert known_or_midpoint(None, 1000.0, 2000.0) == 1500.0
    assert known_or_midpoint(None, None, 2000.0) is None


# -- the UTC calendar and the features ------------------------------------------------------


def test_calendar():
    assert weekday(0.0) == 3  # 1970-01-01 was a Thursday
    assert weekday(MONDAY) == 0
    assert weekday(MONDAY - 1) == 6  # Sunday 23:59:59
    assert hour_of_day(MONDAY + 13 * HOUR + 59 * 60) == 13
    assert week_cell(MONDAY + 2 * DAY + 5 * HOUR) == 2 * 24 + 5
    assert week_cell(MONDAY - 1) == 167
    assert week_cell(-1.0) == weekday(-1.0) * 24 + hour_of_day(-1.0)


def test_features_are_one_hot_hour_then_weekday():
    assert len(FEATURE_NAMES) == 31
    assert FEATURE_NAMES[0] == "h0" and FEATURE_NAMES[24] == "w0"
    row = one_hot(MONDAY + 2 * DAY + 5 * HOUR)  # Wednesday 05:xx
    assert [FEATURE_NAMES[i] for i, v in enumerate(row) if v] == ["h5", "w2"]
    assert features(MONDAY + 2 * DAY + 5 * HOUR, ordinal=True) == (*row, 5, 2)


def test_window_is_whole_hours_before_the_hour_in_progress():
    as_of = MONDAY + 30 * DAY + 1800  # 30 minutes into an hour
    start, end = window(as_of, 30)
    assert end == MONDAY + 30 * DAY
    assert start == MONDAY
    with pytest.raises(ValueError, match="days"):
        window(as_of, 0)


def test_hourly_counts():
    times = [MONDAY, MONDAY + 10, MONDAY + HOUR - 1, MONDAY + HOUR, MONDAY + 5 * HOUR, MONDAY - 1]
    assert hourly_counts(times, MONDAY, 3) == [3, 1, 0]


# -- history -> samples -------------------------------------------------------------------

AS_OF = MONDAY + 2 * DAY + 600  # Wednesday 00:10: the window is Monday and Tuesday


def history() -> list[tuple[str, float | None]]:
    big, small, front, other = "h.example/big", "h.example/small", "h.example", "g.example/x"
    events: list[tuple[str, float | None]] = []
    events += [(big, MONDAY + 60.0 * i) for i in range(3)]  # hour 0
    events += [(big, MONDAY + 9 * HOUR + 1)]  # hour 9
    events += [(big, MONDAY + DAY + 9 * HOUR)]  # Tuesday 09:00, hour 33
    events += [(small, MONDAY + 30 * HOUR), (small, MONDAY + 30 * HOUR + 5)]
    events += [(front, MONDAY + 30 * HOUR + 9), (front, MONDAY + 47 * HOUR + 3599)]
    events += [(small, None), (small, None), (front, None)]  # unknown publish times
    events += [(big, MONDAY - 1), (big, MONDAY + 2 * DAY)]  # before and after the window
    events += [(other, None)]  # only unknown times: no model
    return events


def test_samples_with_enough_articles_keep_their_own_key():
    s = build_samples(history(), AS_OF, days=2, min_samples=5)
    assert (s.start, s.end) == (MONDAY, MONDAY + 2 * DAY)
    big = s.series["h.example/big"]
    assert big.hours == 48 and big.articles == 5 and not big.pooled
    expected = [0] * 48
    expected[0], expected[9], expected[33] = 3, 1, 1
    assert list(big.counts) == expected
    assert s.routes["h.example/big"].key == "h.example/big"
    assert s.routes["h.example/big"].share == 1.0
    assert big.features()[33] == one_hot(MONDAY + DAY + 9 * HOUR)
    assert s.outside == 2


def test_samples_below_the_threshold_fall_back_to_the_host_with_their_share():
    s = build_samples(history(), AS_OF, days=2, min_samples=5)
    pool = s.series["h.example"]
    assert pool.pooled and set(pool.seeds) == {"h.example/small", "h.example"}
    # small: two at 30 h; the front page: one at 30 h and one at 47 h.
    assert pool.counts[30] == 3 and pool.counts[47] == 1 and pool.articles == 4
    assert s.routes["h.example/small"].key == "h.example"
    assert s.routes["h.example/small"].share == pytest.approx(0.5)
    assert s.routes["h.example"].share == pytest.approx(0.5)
    # "Samples" counts dated articles in the window: unknown times are not counted.
    assert s.articles == {"h.example/big": 5, "h.example/small": 2, "h.example": 2}
    assert s.unknown == {"h.example/small": 2, "h.example": 1, "g.example/x": 1}
    assert "g.example/x" not in s.routes and "g.example" not in s.series


def test_the_threshold_is_inclusive():
    own = build_samples(history(), AS_OF, days=2, min_samples=5)
    assert "h.example/big" in own.series
    pooled = build_samples(history(), AS_OF, days=2, min_samples=6)
    assert "h.example/big" not in pooled.series
    assert pooled.routes["h.example/big"].key == "h.example"
    assert pooled.routes["h.example/big"].share == pytest.approx(5 / 9)
    assert pooled.series["h.example"].counts[0] == 3


def test_a_host_key_is_pooled_even_above_the_threshold():
    s = build_samples(history(), AS_OF, days=2, min_samples=1)
    assert s.series["h.example"].seeds == ("h.example",)
    assert s.routes["h.example"].share == 1.0
    assert not s.series["h.example/small"].pooled


def test_thirty_days_make_720_samples_per_key():
    events = [("h.example/a", MONDAY + 1800 + HOUR * i) for i in range(720)]
    s = build_samples(events, MONDAY + 30 * DAY, min_samples=700)
    series = s.series["h.example/a"]
    assert series.hours == 720 and set(series.counts) == {1}
    with pytest.raises(ValueError, match="min_samples"):
        build_samples(events, MONDAY, min_samples=-1)
