"""From discovered articles to the per-hour samples a seed's rate model learns from.

A seed page (a news list page) is refetched when new links are likely, so what the model
must learn is each seed's publishing rhythm: how many articles appear per hour, by hour
of day and day of week. This module decides three things:

- **Which seed an article counts for** (:func:`seed_key`): the seed page's host plus the
  first segment of its path (``www.example.com/sport``), because sections of one site
  publish at different rates; a seed URL at the root is keyed by its host alone.
- **When an article was published** (:func:`known_or_midpoint`): its own metadata when the
  page carries it; otherwise the midpoint of the seed's previous fetch and the fetch
  that found it, when those are less than an hour apart (the article appeared between
  them, so the error is at most half an hour, within the model's one-hour resolution);
  otherwise unknown, and the article is left out rather than put in a wrong hour.
- **What a sample is** (:func:`build_samples`): one UTC hour of the window
  ``[as_of - days, as_of)`` (whole hours: 30 days give 720 samples per key) and the count
  of articles published in it, with one-hot features ``h0..h23`` (hour of day) and
  ``w0..w6`` (weekday, Monday = ``w0``); :func:`features` can append the hour and weekday
  as numbers, which the forest also gets (see :mod:`.model`).

**The fallback to the host.** A key with fewer than ``min_samples`` articles of known
publish time in the window is pooled into its host's key. Every key has the same 720
hourly rows, so "samples" counts *articles*: they, not the rows, say how much the counts
can tell about the rate (a Poisson count of mean 0.1 per hour is mostly noise, however
many hours there are). Articles of unknown publish time are not counted: they cannot be
placed in an hour. The host's model learns the pooled shape; each pooled seed gets its own
*share* of the pooled articles as a scale factor, so a small section of a busy host is not
predicted at the whole host's rate. Keys with their own model stay out of the pool, and a
seed with no dated article in the window gets no model at all (the planner's adaptive
fallback takes it).

Pure module: no Scrapy, no I/O; times are epoch seconds (UTC), passed in by the caller.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from urllib.parse import urlsplit

HOUR = 3600.0
DAY = 86400.0
HOURS_PER_WEEK = 168
#: The reference's threshold: 1,000 dated articles in the 30-day window.
DEFAULT_MIN_SAMPLES = 1000
DEFAULT_DAYS = 30
#: The midpoint rule applies only when the two fetches are closer than this.
MIDPOINT_MAX_GAP = HOUR

FEATURE_NAMES: tuple[str, ...] = (
    *(f"h{h}" for h in range(24)),
    *(f"w{w}" for w in range(7)),
)
#: The two numeric columns the forest also gets by default (see :mod:`.model`).
ORDINAL_NAMES: tuple[str, ...] = ("hour", "weekday")


def seed_key(url: str) -> str:
    """``host/first-path-segment`` of a seed URL, or ``host`` when the path is empty.

    The host is lower-cased and keeps an explicit port (``example.com:8080``); the scheme,
    query and fragment are dropped, so ``https://Example.com/Sport/?page=1`` and
    ``http://example.com/Sport`` are both ``example.com/Sport`` (paths are case-sensitive).
    """
    parts = urlsplit(url)
    host = parts.hostname
    if not host:
        raise ValueError(f"seed URL without a host: {url!r}")
    try:
        port = parts.port
    except ValueError as exc:
        raise ValueError(f"seed URL with a bad port: {url!r}") from exc
    if port is not None:
        host = f"{host}:{port}"
    segment = next((s for s in parts.path.split("/") if s), "")
    return f"{host}/{segment}" if segment else host


def host_of(key: str) -> str:
    """The host part of a seed key (the key itself for a host key)."""
    return key.split("/", 1)[0]


def midpoint_time(
    previous_fetch: float | None, this_fetch: float, max_gap: float = MIDPOINT_MAX_GAP
) -> float | None:
    """``(T_last + T_now) / 2`` when ``0 <= T_now - T_last < max_gap``, else ``None``.

    No previous fetch (the seed's first) means the article may be of any age: unknown.
    """
    if previous_fetch is None:
        return None
    gap = this_fetch - previous_fetch
    if not 0.0 <= gap < max_gap:
        return None
    return previous_fetch + gap / 2.0


def known_or_midpoint(
    known: float | None,
    previous_fetch: float | None,
    this_fetch: float,
    max_gap: float = MIDPOINT_MAX_GAP,
) -> float | None:
    """The article's own publish time if known, else the midpoint rule's estimate."""
    if known is not None:
        return float(known)
    return midpoint_time(previous_fetch, this_fetch, max_gap)


def hour_of_day(t: float) -> int:
    """UTC hour of day, 0-23."""
    return math.floor(t / HOUR) % 24


def weekday(t: float) -> int:
    """UTC weekday, Monday = 0 (as :meth:`datetime.date.weekday`); 1970-01-01 was a Thursday."""
    return (math.floor(t / DAY) + 3) % 7


def week_cell(t: float) -> int:
    """Index of ``t``'s (weekday, hour) cell in a 168-cell week: ``weekday * 24 + hour``."""
    # Hours since the epoch, shifted by the 72 hours from Monday to Thursday 1970-01-01.
    return int((t // HOUR + 72) % HOURS_PER_WEEK)


def one_hot(t: float) -> tuple[int, ...]:
    """The 31 features of the hour containing ``t``: ``h0..h23`` then ``w0..w6``."""
    row = [0] * 31
    row[hour_of_day(t)] = 1
    row[24 + weekday(t)] = 1
    return tuple(row)


def features(t: float, ordinal: bool = False) -> tuple[int, ...]:
    """:func:`one_hot`, then with ``ordinal`` the hour (0-23) and weekday (0-6) as numbers."""
    row = one_hot(t)
    return (*row, hour_of_day(t), weekday(t)) if ordinal else row


def window(as_of: float, days: int) -> tuple[float, float]:
    """``[start, end)`` of the training window: whole UTC hours, ending before ``as_of``'s hour.

    The hour in progress at ``as_of`` is left out: its count is not complete yet.
    """
    if days <= 0:
        raise ValueError(f"days must be > 0, got {days}")
    end = math.floor(as_of / HOUR) * HOUR
    return end - days * DAY, end


def hourly_counts(times: Iterable[float], start: float, hours: int) -> list[int]:
    """Articles per hour in ``[start, start + hours * HOUR)``; times outside are ignored."""
    counts = [0] * hours
    for t in times:
        i = math.floor((t - start) / HOUR)
        if 0 <= i < hours:
            counts[i] += 1
    return counts


@dataclass(frozen=True)
class Series:
    """The hourly samples one model is fitted on.

    ``key`` is a seed key with enough articles of its own, or a host pooling the seeds
    that fell back to it (``seeds``). ``counts[i]`` is the number of articles published in
    ``[start + i * HOUR, start + (i + 1) * HOUR)``.
    """

    key: str
    start: float
    counts: tuple[int, ...]
    seeds: tuple[str, ...]
    pooled: bool

    @property
    def articles(self) -> int:
        return sum(self.counts)

    @property
    def hours(self) -> int:
        return len(self.counts)

    def hour_starts(self) -> list[float]:
        return [self.start + i * HOUR for i in range(len(self.counts))]

    def features(self, ordinal: bool = False) -> list[tuple[int, ...]]:
        """One row of :func:`features` per hour (hour and weekday of its start)."""
        return [features(t, ordinal) for t in self.hour_starts()]


@dataclass(frozen=True)
class Route:
    """Where a seed's rate comes from: ``share`` times the rate of series ``key``."""

    key: str
    share: float


@dataclass(frozen=True)
class Samples:
    """Everything :func:`build_samples` decided: series to fit, and each seed's route."""

    start: float
    end: float
    min_samples: int
    series: dict[str, Series]
    routes: dict[str, Route]
    #: Dated articles per seed in the window (what the fallback rule counts).
    articles: dict[str, int]
    #: Articles whose publish time was unknown (``None``), per seed.
    unknown: dict[str, int] = field(default_factory=dict)
    #: Dated articles outside ``[start, end)``, ignored.
    outside: int = 0


def build_samples(
    events: Iterable[tuple[str, float | None]],
    as_of: float,
    *,
    days: int = DEFAULT_DAYS,
    min_samples: int = DEFAULT_MIN_SAMPLES,
) -> Samples:
    """Per-key hourly counts from ``(seed_key, publish_time)`` pairs, as of ``as_of``.

    ``publish_time`` is epoch seconds (UTC) or ``None`` when unknown (apply
    :func:`known_or_midpoint` first to use the midpoint rule). Seed keys are taken as given
    (make them with :func:`seed_key`). A seed key with a path and at least
    ``min_samples`` dated articles in the window gets its own series; every other seed
    (host keys included) is pooled into its host's series with its share of the pooled
    articles; seeds with none get no route.
    """
    if min_samples < 0:
        raise ValueError(f"min_samples must be >= 0, got {min_samples}")
    start, end = window(as_of, days)
    hours = days * 24
    by_seed: dict[str, list[float]] = defaultdict(list)
    unknown: Counter[str] = Counter()
    outside = 0
    for key, t in events:
        if t is None:
            unknown[key] += 1
        elif start <= t < end:
            by_seed[key].append(float(t))
        else:
            outside += 1
    articles = {k: len(v) for k, v in by_seed.items()}
    series: dict[str, Series] = {}
    routes: dict[str, Route] = {}
    pools: dict[str, list[str]] = defaultdict(list)
    for key in sorted(by_seed):
        if "/" in key and articles[key] >= min_samples:
            counts = tuple(hourly_counts(by_seed[key], start, hours))
            series[key] = Series(key, start, counts, (key,), pooled=False)
            routes[key] = Route(key, 1.0)
        else:
            pools[host_of(key)].append(key)
    for host, seeds in sorted(pools.items()):
        total = sum(articles[s] for s in seeds)
        counts = tuple(hourly_counts((t for s in seeds for t in by_seed[s]), start, hours))
        series[host] = Series(host, start, counts, tuple(seeds), pooled=True)
        for s in seeds:
            routes[s] = Route(host, articles[s] / total)
    return Samples(
        start=start,
        end=end,
        min_samples=min_samples,
        series=series,
        routes=routes,
        articles=articles,
        unknown=dict(unknown),
        outside=outside,
    )
