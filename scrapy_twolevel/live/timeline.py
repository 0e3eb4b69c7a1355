"""What the live view remembers between two looks: the crawl's course (:class:`History`),
each host's recent events (:class:`HostEvents`) and the hosts' recent sessions
(:class:`RecentSessions`), all bounded however long the crawl and however many hosts.

A snapshot (:mod:`.snapshot`) says what the frontier is doing *now*; a person watching a
crawl also asks "how fast lately?", "how long until it is done?" and "what happened to
this host?". These answer them. Pure data, an injected clock reading in every call; no
Scrapy here.
"""

from __future__ import annotations

from collections import OrderedDict, deque
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from ..frontier.hosts import SessionRecord

#: Points :class:`History` keeps; when full, every other point goes (the oldest
#: stretch thins first), so a long crawl keeps its whole course at a coarser grain.
HISTORY_POINTS = 400
#: Seconds over which the "now" rates are measured.
RATE_WINDOW = 30.0
#: Events kept per host, and hosts kept (the least recently active go first).
EVENTS_PER_HOST = 60
HOSTS_KEPT = 2000
#: Sessions kept over all hosts (one crawl-wide ring: a host page shows those of its host).
SESSIONS_KEPT = 20_000


@dataclass(frozen=True, slots=True)
class Point:
    """The crawl at one moment: counts since it started."""

    elapsed: float
    pages: int
    quality: float
    pending: int
    errors: int
    refusals: int


class History:
    """The crawl's course, one :class:`Point` every few seconds, at most
    :data:`HISTORY_POINTS` of them."""

    def __init__(self, points: int = HISTORY_POINTS) -> None:
        if points < 4:
            raise ValueError(f"points must be >= 4, got {points}")
        self._max = points
        self.points: list[Point] = []

    def add(self, point: Point) -> None:
        self.points.append(point)
        if len(self.points) > self._max:
            # Thin the older half only: the recent stretch keeps its resolution for the
            # "now" rates.
            half = len(self.points) // 2
            self.points = self.points[:half:2] + self.points[half:]

    def rates(self, now: Point, window: float = RATE_WINDOW) -> dict[str, float | None]:
        """Pages per second over the last ``window`` seconds and since the start; errors
        and refusals per minute over the window; seconds to drain the pending requests at
        the recent rate (``None`` when nothing is being fetched)."""
        since = [p for p in self.points if p.elapsed >= now.elapsed - window]
        base = since[0] if since else None
        span = now.elapsed - base.elapsed if base is not None else 0.0
        if base is None or span <= 0:
            recent = errors = refusals = None
        else:
            recent = (now.pages - base.pages) / span
            errors = 60 * (now.errors - base.errors) / span
            refusals = 60 * (now.refusals - base.refusals) / span
        overall = now.pages / now.elapsed if now.elapsed > 0 else None
        drain = now.pending / recent if recent else None
        return {
            "pages_per_s_now": recent,
            "pages_per_s_overall": overall,
            "errors_per_min": errors,
            "refusals_per_min": refusals,
            "drain_s": None if now.pending == 0 else drain,
        }

    def to_rows(self) -> list[list[float]]:
        """``[elapsed s, pages, quality, pending]`` per point, for the dashboard's plot."""
        return [[p.elapsed, p.pages, round(p.quality, 6), p.pending] for p in self.points]


class HostEvents:
    """Each host's last :data:`EVENTS_PER_HOST` events (``(time, kind, detail)``) for the
    :data:`HOSTS_KEPT` hosts with the latest events."""

    def __init__(self, per_host: int = EVENTS_PER_HOST, hosts: int = HOSTS_KEPT) -> None:
        self._per_host = per_host
        self._hosts = hosts
        self._events: OrderedDict[str, deque[tuple[float, str, str]]] = OrderedDict()

    def add(self, host: str, when: float, kind: str, detail: str = "") -> None:
        events = self._events.get(host)
        if events is None:
            events = self._events[host] = deque(maxlen=self._per_host)
            if len(self._events) > self._hosts:
                self._events.popitem(last=False)
        else:
            self._events.move_to_end(host)
        events.append((when, kind, detail))

    def of(self, host: str) -> list[tuple[float, str, str]]:
        return list(self._events.get(host, ()))


class RecentSessions:
    """The last :data:`SESSIONS_KEPT` finished sessions of the crawl (the frontier reports
    each one, :class:`~scrapy_twolevel.frontier.hosts.SessionRecord`)."""

    def __init__(self, kept: int = SESSIONS_KEPT) -> None:
        self._sessions: deque[SessionRecord] = deque(maxlen=kept)

    def ended(self, record: SessionRecord) -> None:
        self._sessions.append(record)

    def of(self, host: str) -> list[SessionRecord]:
        return [s for s in self._sessions if s.host == host]


def host_timeline(
    now: float,
    sessions: Iterable[SessionRecord],
    events: Iterable[tuple[float, str, str]],
) -> list[dict[str, Any]]:
    """One host's story, oldest first: its sessions (start, length, pages, whether it
    failed), the wait each left it in (until when, and why) and its events, with times as
    seconds before ``now`` (negative)."""
    rows: list[dict[str, Any]] = []
    for s in sessions:
        pages = f"{s.served} of {s.budget} page{'' if s.budget == 1 else 's'}"
        rows.append(
            {
                "at_s": round(s.started - now, 3),
                "kind": "session",
                "duration_s": round(s.ended - s.started, 3),
                "detail": pages + (", ended by failures" if s.failed else ""),
            }
        )
        if s.wait_until is not None:
            rows.append(
                {
                    "at_s": round(s.ended - now, 3),
                    "kind": "wait",
                    "duration_s": round(s.wait_until - s.ended, 3),
                    "detail": s.wait_reason,
                }
            )
    rows += [{"at_s": round(t - now, 3), "kind": k, "detail": d} for t, k, d in events]
    rows.sort(key=lambda r: r["at_s"])
    return rows
