"""A crawl judged from nginx's access log: what the servers saw, not what the crawler says.

Each log line is one request (:data:`realweb.servers.LOG_FORMAT`): it ended at ``$msec``
and began ``$request_time`` before (the server's time on it, a rate-limit delay included).
Time 0 is the first request's beginning. From the lines:

- **quality over time**: each page's quality (:mod:`realweb.corpus`) counts once, when its
  first 200 response ended; 1.0 is every reachable page;
- **duplicates**: 200 responses to a page already served;
- **politeness**: a request that began while another request to the same host was still
  being served (``overlapping``), and the most requests in flight at one host;
- **in flight**: requests being served, over all hosts, per second;
- **connections**: distinct connection numbers per host (nginx's ``$connection``).
"""

from __future__ import annotations

import bisect
import re
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

_LINE = re.compile(r'^(\S+) (\S+) (\d+) (\d+) (\S+) (\d+) (\d+) "(.*)"$')


@dataclass(frozen=True)
class Request:
    start: float
    end: float
    connection: int
    on_connection: int
    host: str
    status: int
    bytes: int
    uri: str


def read_log(path: Path) -> list[Request]:
    """The log's requests by end time, on a clock whose 0 is the first one's beginning
    (:func:`origin`)."""
    requests = _raw(path)
    if not requests:
        return []
    t0 = min(r.start for r in requests)
    shifted = [Request(r.start - t0, r.end - t0, *(getattr(r, f) for f in _REST)) for r in requests]
    return sorted(shifted, key=lambda r: r.end)


_REST = ("connection", "on_connection", "host", "status", "bytes", "uri")


def _raw(path: Path) -> list[Request]:
    requests = []
    for line in path.read_text().splitlines():
        m = _LINE.match(line)
        if m is None:
            continue
        end, took = float(m[1]), float(m[2])
        requests.append(
            Request(end - took, end, int(m[3]), int(m[4]), m[5], int(m[6]), int(m[7]), m[8])
        )
    return requests


def origin(path: Path) -> float | None:
    """The wall-clock time :func:`read_log`'s 0 stands for (``None``: an empty log)."""
    requests = _raw(path)
    return min(r.start for r in requests) if requests else None


@dataclass
class Judgement:
    """What a crawl achieved, as the servers saw it."""

    curve: list[tuple[float, float]]  # (time, quality gathered so far), one per new page
    pages: int
    requests: int
    duplicates: int
    statuses: dict[int, int]
    overlapping: int
    max_in_flight_per_host: int
    connections: int
    last_end: float
    in_flight: list[float]  # mean requests in flight over all hosts, per second
    per_host: dict[str, dict[str, Any]] = field(default_factory=dict)

    def quality_at(self, t: float) -> float:
        i = bisect.bisect_right([c[0] for c in self.curve], t)
        return self.curve[i - 1][1] if i else 0.0

    def time_to(self, quality: float) -> float | None:
        for t, q in self.curve:
            if q >= quality - 1e-12:
                return t
        return None

    def summary(self, window: float | None) -> dict[str, Any]:
        final = self.curve[-1][1] if self.curve else 0.0
        out = {
            "pages": self.pages,
            "requests": self.requests,
            "duplicates": self.duplicates,
            "statuses": {str(k): v for k, v in sorted(self.statuses.items())},
            "overlapping": self.overlapping,
            "max_in_flight_per_host": self.max_in_flight_per_host,
            "connections": self.connections,
            "last_end_s": round(self.last_end, 3),
            "quality": round(final, 6),
            "time_to_half_s": _round(self.time_to(0.5)),
            "time_to_80pct_s": _round(self.time_to(0.8 * final)) if final else None,
        }
        if window is not None:
            out["quality_at_quarter"] = round(self.quality_at(window / 4), 6)
            out["quality_at_window"] = round(self.quality_at(window), 6)
        return out


def _round(x: float | None) -> float | None:
    return None if x is None else round(x, 3)


def judge(
    requests: list[Request], quality: dict[str, dict[str, float]], window: float | None = None
) -> Judgement:
    """``quality``: host address -> {page path: quality}. ``window``: ignore requests that
    began after it (a crawl stopped at its window may have a few in flight)."""
    if window is not None:
        requests = [r for r in requests if r.start <= window]
    served: set[tuple[str, str]] = set()
    curve: list[tuple[float, float]] = []
    gathered = 0.0
    duplicates = 0
    per_host: dict[str, dict[str, Any]] = defaultdict(
        lambda: {"requests": 0, "pages": 0, "quality": 0.0, "connections": set(), "spans": []}
    )
    for r in requests:
        host = per_host[r.host]
        host["requests"] += 1
        host["connections"].add(r.connection)
        host["spans"].append((round(r.start, 3), round(r.end, 3)))
        if r.status != 200:
            continue
        key = (r.host, r.uri.lstrip("/"))
        if key in served:
            duplicates += 1
            continue
        served.add(key)
        q = quality.get(r.host, {}).get(key[1], 0.0)
        host["pages"] += 1
        host["quality"] += q
        gathered += q
        curve.append((r.end, gathered))
    overlapping, max_per_host = 0, 0
    for host in per_host.values():
        events = sorted([(s, 1) for s, _ in host["spans"]] + [(e, -1) for _, e in host["spans"]])
        level = 0
        for _, step in events:
            level += step
            if step > 0 and level > 1:
                overlapping += 1
            max_per_host = max(max_per_host, level)
        host["connections"] = len(host["connections"])
    last_end = max((r.end for r in requests), default=0.0)
    return Judgement(
        curve=curve,
        pages=len(served),
        requests=len(requests),
        duplicates=duplicates,
        statuses=dict(Counter(r.status for r in requests)),
        overlapping=overlapping,
        max_in_flight_per_host=max_per_host,
        connections=sum(h["connections"] for h in per_host.values()),
        last_end=last_end,
        in_flight=in_flight_series(requests, last_end),
        per_host=dict(per_host),
    )


def in_flight_series(requests: list[Request], until: float, step: float = 1.0) -> list[float]:
    """Mean number of requests being served (over all hosts) in each ``step`` seconds."""
    n = int(until / step) + 1
    busy = [0.0] * n
    for r in requests:
        t = r.start
        while t < r.end:
            i = int(t / step)
            edge = min(r.end, (i + 1) * step)
            if i < n:
                busy[i] += edge - t
            t = edge
    return [round(b / step, 3) for b in busy]
