"""What the test web's server saw: per-host counters and every response, as JSON too.

:class:`ServerStats` is kept by :class:`~.server.TestWebServer` and served at ``/_stats``;
:func:`fetch_remote_stats` reads it back in another process. The counters are the ground
truth of the tests' politeness checks (requests in flight per host, overlaps).
"""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields
from typing import Any, NamedTuple


class ResponseEvent(NamedTuple):
    """One response written by a host, in the order they were written."""

    time: float  # the server's clock (monotonic by default)
    host: int
    path: str
    connection_id: int
    page_id: int | None  # the page served (200) or redirecting (301); None for the rest
    status: int
    method: str


@dataclass
class HostStats:
    """Counters for one host (or, in :attr:`ServerStats.total`, for all hosts together)."""

    connections_total: int = 0
    connections_open: int = 0
    max_connections_open: int = 0
    #: A request is in flight from when its head is fully received until its response is written.
    requests_in_flight: int = 0
    max_requests_in_flight: int = 0
    requests_total: int = 0
    #: Requests received while another request to the same host was in flight: each one is
    #: a politeness violation of a crawler that promises one request at a time per host.
    requests_overlapping: int = 0
    responses_total: int = 0
    #: Requests received but never answered because the connection closed first.
    requests_aborted: int = 0
    #: Requests refused for coming too soon (429 or 503, see ``HostSpec.min_interval``).
    refusals: int = 0
    #: Responses per path (any method, any status).
    paths: dict[str, int] = field(default_factory=dict)
    #: Requests per name in their ``Host`` header (port left out; "" when absent): shows
    #: which of a host's names and aliases a crawler used.
    host_headers: dict[str, int] = field(default_factory=dict)

    def reset(self) -> None:
        """Zero the history but keep what is open right now, so counts stay consistent."""
        open_, in_flight = self.connections_open, self.requests_in_flight
        for f in fields(self):
            setattr(self, f.name, {} if f.default_factory is dict else 0)
        self.connections_open = self.max_connections_open = open_
        self.requests_in_flight = self.max_requests_in_flight = in_flight


class ServerStats:
    """What the server saw; rebuilt from ``/_stats`` JSON in other processes via from_dict."""

    def __init__(self, n_hosts: int) -> None:
        self.hosts: dict[int, HostStats] = {i: HostStats() for i in range(n_hosts)}
        self.total = HostStats()
        self.events: list[ResponseEvent] = []
        #: Every request received by a host, in order: ``(time, host, path)``.
        self.arrivals: list[tuple[float, int, str]] = []
        #: Every ``Retry-After`` a host answered: ``(time, host, seconds)``.
        self.waits_asked: list[tuple[float, int, float]] = []
        self.control_requests = 0
        #: The server's clock when the first request to any host arrived (None: none yet);
        #: the time origin of a crawl's curves.
        self.first_request_at: float | None = None

    # -- queries ---------------------------------------------------------------------------
    def max_concurrent_requests_per_host(self) -> dict[int, int]:
        """Highest number of simultaneous in-flight requests each host saw (politeness)."""
        return {i: h.max_requests_in_flight for i, h in self.hosts.items()}

    def max_concurrent_connections_per_host(self) -> dict[int, int]:
        """Highest number of simultaneously open connections each host saw."""
        return {i: h.max_connections_open for i, h in self.hosts.items()}

    def overlapping_requests(self) -> int:
        """Requests that arrived while another one to the same host was in flight."""
        return self.total.requests_overlapping

    def connections_per_host(self) -> dict[int, int]:
        """Connections accepted per host (fewer means better keep-alive reuse)."""
        return {i: h.connections_total for i, h in self.hosts.items()}

    def fetch_counts(self) -> dict[int, int]:
        """GETs answered for a page of the web, per page id (pages never fetched are absent).

        A plain page counts when answered 200, a redirecting page when answered 301 (its
        target counts on its own when fetched), so a full crawl with a dupefilter gives
        ``{p: 1 for p in web.reachable()}``. Not counted: HEADs, robots.txt, 404s, errors
        (400, 405, 421) and requests to failing hosts, which are never answered: their
        :class:`HostStats` count them (``connections_total``, ``requests_total``,
        ``requests_aborted``), except a ``refuse`` host's, which the server never sees.
        """
        counts: dict[int, int] = {}
        for page_id in self.order():
            counts[page_id] = counts.get(page_id, 0) + 1
        return counts

    def order(self) -> list[int]:
        """Page ids of the responses :meth:`fetch_counts` counts, in the order written."""
        return [e.page_id for e in self.events if e.page_id is not None and e.method == "GET"]

    # -- serialisation ---------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """JSON-able form (host keys become strings, events become lists)."""
        return {
            "hosts": {str(i): asdict(h) for i, h in self.hosts.items()},
            "total": asdict(self.total),
            "control_requests": self.control_requests,
            "first_request_at": self.first_request_at,
            "events": [list(e) for e in self.events],
            "arrivals": [list(a) for a in self.arrivals],
            "waits_asked": [list(w) for w in self.waits_asked],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ServerStats:
        """Inverse of :meth:`to_dict`."""
        stats = cls(0)
        stats.hosts = {int(i): HostStats(**h) for i, h in data["hosts"].items()}
        stats.total = HostStats(**data["total"])
        stats.control_requests = data["control_requests"]
        stats.first_request_at = data["first_request_at"]
        stats.events = [ResponseEvent(*e) for e in data["events"]]
        stats.arrivals = [(float(t), int(h), str(p)) for t, h, p in data.get("arrivals", ())]
        stats.waits_asked = [
            (float(t), int(h), float(s)) for t, h, s in data.get("waits_asked", ())
        ]
        return stats

    # -- updates (server side) ---------------------------------------------------------------
    def reset(self) -> None:
        """Forget history (e.g. between benchmark runs) without a restart."""
        for h in (*self.hosts.values(), self.total):
            h.reset()
        self.events.clear()
        self.arrivals.clear()
        self.waits_asked.clear()
        self.control_requests = 0
        self.first_request_at = None

    def _each(self, host: int) -> tuple[HostStats, HostStats]:
        return self.hosts[host], self.total

    def connection_opened(self, host: int) -> None:
        for h in self._each(host):
            h.connections_total += 1
            h.connections_open += 1
            h.max_connections_open = max(h.max_connections_open, h.connections_open)

    def connection_closed(self, host: int) -> None:
        for h in self._each(host):
            h.connections_open -= 1

    def request_received(self, host: int, now: float, host_header: str, path: str = "") -> None:
        if self.first_request_at is None:
            self.first_request_at = now
        self.arrivals.append((now, host, path))
        overlapping = self.hosts[host].requests_in_flight > 0
        for h in self._each(host):
            h.host_headers[host_header] = h.host_headers.get(host_header, 0) + 1
            h.requests_total += 1
            h.requests_overlapping += overlapping
            h.requests_in_flight += 1
            h.max_requests_in_flight = max(h.max_requests_in_flight, h.requests_in_flight)

    def asked_to_wait(self, host: int, now: float, retry_after: str) -> None:
        self.waits_asked.append((now, host, float(retry_after)))

    def early_arrivals(self) -> list[tuple[float, int, str]]:
        """Requests that reached a host before the ``Retry-After`` it had answered had
        passed: each one a crawler that did not listen."""
        early = []
        for asked_at, host, seconds in self.waits_asked:
            early += [
                arrival
                for arrival in self.arrivals
                if arrival[1] == host and asked_at < arrival[0] < asked_at + seconds
            ]
        return early

    def request_aborted(self, host: int) -> None:
        for h in self._each(host):
            h.requests_in_flight -= 1
            h.requests_aborted += 1

    def response_written(self, event: ResponseEvent) -> None:
        for h in self._each(event.host):
            h.requests_in_flight -= 1
            h.responses_total += 1
            h.refusals += event.status in (429, 503)
            h.paths[event.path] = h.paths.get(event.path, 0) + 1
        self.events.append(event)


def fetch_remote_stats(control_url: str, *, timeout: float = 10.0) -> ServerStats:
    """Read a server's stats over HTTP (blocking; for tests and benchmark drivers)."""
    with urllib.request.urlopen(f"{control_url}/_stats", timeout=timeout) as response:
        return ServerStats.from_dict(json.loads(response.read()))
