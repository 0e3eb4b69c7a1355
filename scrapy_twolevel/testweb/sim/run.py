"""What one simulated crawl did: its downloads, in completion order, and the figures derived
from them (pages and quality over time, t50/t80, the summary the benchmarks report).

Pure module: no Scrapy, no Twisted, no I/O.
"""

from __future__ import annotations

import itertools
import math
from bisect import bisect_left, bisect_right
from dataclasses import dataclass, field
from typing import NamedTuple

from scrapy_twolevel.frontier import HostEstimate

__all__ = ["CrawlRun", "Fetch"]


class Fetch(NamedTuple):
    """One download: which page, on which server, when, and over what connection."""

    page: int
    host: int
    started: float
    finished: float
    new_connection: bool
    #: Requests to the same server in flight when this one was sent (0 when polite).
    concurrent: int


@dataclass
class CrawlRun:
    """What one simulated crawl did, and the figures derived from it.

    ``fetches`` are in completion order. ``quality_total`` is the sum of the stored
    qualities over the whole web; every quality figure is a fraction of it.
    """

    variant: str
    connections: int
    fetches: list[Fetch]
    quality: list[float]  # stored quality of each fetched page, in completion order
    quality_total: float
    connections_opened: int
    politeness_violations: int
    sessions: int = 0
    max_parallel_per_server: int = 0
    #: The frontier's final estimate per host key (two-level runs only).
    estimates: dict[str, HostEstimate] = field(default_factory=dict)
    _times: list[float] = field(init=False, repr=False)
    _cumulative: list[float] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._times = [f.finished for f in self.fetches]
        total = self.quality_total or 1.0
        self._cumulative = [q / total for q in itertools.accumulate(self.quality)]

    @property
    def pages(self) -> int:
        return len(self.fetches)

    @property
    def total_time(self) -> float:
        """Time of the last download (0 for an empty crawl)."""
        return self._times[-1] if self._times else 0.0

    def pages_at(self, t: float) -> int:
        """Pages downloaded by time ``t`` (a download counts when its response is complete)."""
        return bisect_right(self._times, t)

    def quality_at(self, t: float) -> float:
        """Fraction of the web's total quality downloaded by time ``t``."""
        n = bisect_right(self._times, t)
        return self._cumulative[n - 1] if n else 0.0

    def time_to_quality(self, fraction: float) -> float:
        """First time the downloaded quality reaches ``fraction`` of the total (inf if never)."""
        i = bisect_left(self._cumulative, fraction - 1e-12)
        return self._times[i] if i < len(self._times) else math.inf

    def time_to_pages(self, fraction: float) -> float:
        """First time ``fraction`` of this crawl's pages are downloaded."""
        if not self._times:
            return math.inf
        i = max(0, math.ceil(fraction * len(self._times)) - 1)
        return self._times[i]

    def quality_at_pages(self, fraction: float) -> float:
        """Fraction of the total quality in the first ``fraction`` of the pages downloaded."""
        if not self._times:
            return 0.0
        i = max(0, math.ceil(fraction * len(self._times)) - 1)
        return self._cumulative[i]

    def mean_quality(self, until: float) -> float:
        """Mean of the quality fraction over ``[0, until]``: the area under the quality curve.

        1.0 would be all the quality at time 0; a crawl that gathers quality evenly until
        ``until`` scores 0.5. One number to rank quality curves by, unlike a reading at one
        time, which saturates near the end of a crawl.
        """
        if until <= 0:
            return 0.0
        total = self.quality_total or 1.0
        area = math.fsum(
            q * (until - f.finished)
            for q, f in zip(self.quality, self.fetches, strict=True)
            if f.finished <= until
        )
        return area / total / until

    def curve(self, points: int = 200, until: float | None = None) -> dict[str, list[float]]:
        """``points`` evenly spaced samples of pages and quality fraction, from 0 to ``until``."""
        end = self.total_time if until is None else until
        times = [end * i / (points - 1) for i in range(points)] if points > 1 else [end]
        return {
            "t": [round(t, 6) for t in times],
            "pages": [self.pages_at(t) for t in times],
            "quality": [round(self.quality_at(t), 6) for t in times],
        }

    def summary(self, baseline_time: float | None = None) -> dict[str, float | int | str]:
        """The figures of the reference study; ``baseline_time`` is breadth-first's total time."""
        out: dict[str, float | int | str] = {
            "variant": self.variant,
            "connections": self.connections,
            "pages": self.pages,
            "total_time": self.total_time,
            "pages_per_s": self.pages / self.total_time if self.total_time else 0.0,
            "t50": self.time_to_quality(0.5),
            "t80": self.time_to_quality(0.8),
            "t90": self.time_to_quality(0.9),
            "quality_at_half_pages": self.quality_at_pages(0.5),
            "connections_opened": self.connections_opened,
            "politeness_violations": self.politeness_violations,
            "max_parallel_per_server": self.max_parallel_per_server,
            "sessions": self.sessions,
        }
        if baseline_time:
            out["pages_at_half_bf"] = self.pages_at(0.5 * baseline_time)
            out["quality_at_30pct_bf"] = self.quality_at(0.3 * baseline_time)
            out["quality_at_33pct_bf"] = self.quality_at(baseline_time / 3)
            out["quality_at_50pct_bf"] = self.quality_at(0.5 * baseline_time)
            out["mean_quality_bf"] = self.mean_quality(baseline_time)
        return out
