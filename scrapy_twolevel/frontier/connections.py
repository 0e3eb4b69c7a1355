"""Infer connection boundaries from what an HTTP client sees in replies.

Scrapy does not tell a downloader middleware whether a request went over a new or a
reused connection, but the replies say when a connection will end: ``Connection: close``,
``Keep-Alive: max=N`` counting down, HTTP/1.0 without keep-alive, or an idle gap longer
than the keep-alive timeout. Scrapy's HTTP/1.1 handler (Twisted) keeps the two headers
out of ``response.headers``, so the middleware also asks the handler's connection pool
whether the connection stayed open (``kept_open``). This tracker turns those facts into
per-response observations for :class:`~scrapy_twolevel.frontier.estimates.HostEstimate`.

Pure module: no Scrapy, no I/O.
"""

from __future__ import annotations

import re
from collections import deque
from dataclasses import dataclass

_MAX_RE = re.compile(r"\bmax\s*=\s*(\d+)", re.IGNORECASE)
_TIMEOUT_RE = re.compile(r"\btimeout\s*=\s*(\d+(?:\.\d+)?)", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class ReplyFacts:
    """The connection-related facts of one reply."""

    http10: bool
    connection_close: bool
    keepalive_max: int | None = None
    keepalive_timeout: float | None = None

    @classmethod
    def parse(
        cls,
        protocol: str | None,
        connection: str | None,
        keep_alive: str | None,
        kept_open: bool | None = None,
    ) -> ReplyFacts:
        """Build from the reply's protocol (``"HTTP/1.0"``) and header values, and from
        whether the client kept the connection open after it (``None``: not known)."""
        tokens = {t.strip().lower() for t in (connection or "").split(",")}
        http10 = (protocol or "").upper().startswith("HTTP/1.0")
        close = "close" in tokens or (http10 and "keep-alive" not in tokens)
        close = close or kept_open is False
        ka_max = ka_timeout = None
        if keep_alive:
            if m := _MAX_RE.search(keep_alive):
                ka_max = int(m.group(1))
            if m := _TIMEOUT_RE.search(keep_alive):
                ka_timeout = float(m.group(1))
        return cls(http10, close, ka_max, ka_timeout)


@dataclass(frozen=True, slots=True)
class ConnectionObservation:
    """What one reply tells about the connection it came on."""

    new_connection: bool
    served_on_connection: int
    closed_by_server: bool
    remaining_on_connection: int | None


@dataclass(slots=True)
class _HostConnection:
    alive: bool = False
    served: int = 0
    last_reply_at: float = 0.0
    idle_timeout: float = 0.0


#: Seconds past a connection's idle timeout after which its record is shared (see
#: :class:`ConnectionTracker`); longer than any request takes, so no reply can still be on
#: its way over that connection.
GRACE = 600.0


class ConnectionTracker:
    """Per-host model of the (at most one) connection a polite crawler keeps.

    ``idle_timeout`` is how long an unused connection is assumed to survive when the server
    does not announce ``Keep-Alive: timeout=``.

    A broad crawl hears from hundreds of thousands of hosts and serves most of them once.
    Once a host's connection has been idle past its timeout plus ``grace`` (longer than a
    request can take), its record says no more than "answered once, the next request opens
    a connection": it is replaced by a record shared by every such host with the same idle
    timeout, so the host costs a slot in a dict, not an object the collector walks. The
    observations are the same as with its own record.
    """

    def __init__(self, idle_timeout: float = 15.0, grace: float = GRACE) -> None:
        self._idle_timeout = idle_timeout
        self._grace = grace
        self._hosts: dict[str, _HostConnection] = {}
        #: The shared records, by idle timeout (alive False, served 0: a fresh record's).
        self._shared: dict[float, _HostConnection] = {}
        #: Replies in the order they came (time, host): the records to share once expired.
        self._reply_times: deque[float] = deque()
        self._reply_hosts: deque[str] = deque()

    def observe(
        self, host: str, facts: ReplyFacts, sent_at: float, replied_at: float
    ) -> ConnectionObservation:
        conn = self._own(host)
        new = not conn.alive or sent_at - conn.last_reply_at > conn.idle_timeout
        conn.served = 1 if new else conn.served + 1
        closed = facts.connection_close or facts.keepalive_max == 0
        conn.alive = not closed
        conn.last_reply_at = replied_at
        if facts.keepalive_timeout is not None:
            conn.idle_timeout = facts.keepalive_timeout
        self._reply_times.append(replied_at)
        self._reply_hosts.append(host)
        self._share_expired(replied_at)
        return ConnectionObservation(
            new_connection=new,
            served_on_connection=conn.served,
            closed_by_server=closed,
            remaining_on_connection=0 if closed else facts.keepalive_max,
        )

    def connection_lost(self, host: str) -> None:
        """The last request to ``host`` failed: the next one opens a new connection."""
        conn = self._hosts.get(host)
        if conn is not None and not self._is_shared(conn):
            conn.alive = False

    def answered(self, host: str) -> None:
        """The host answered (a refusal, a cached reply too): it has a record from now on."""
        if host not in self._hosts:
            self._hosts[host] = self._shared_record(self._idle_timeout)

    @property
    def own_records(self) -> int:
        """Hosts with a record of their own (the others share one)."""
        return sum(not self._is_shared(conn) for conn in self._hosts.values())

    def _own(self, host: str) -> _HostConnection:
        conn = self._hosts.get(host)
        if conn is None or self._is_shared(conn):
            timeout = self._idle_timeout if conn is None else conn.idle_timeout
            conn = self._hosts[host] = _HostConnection(idle_timeout=timeout)
        return conn

    def _is_shared(self, conn: _HostConnection) -> bool:
        return self._shared.get(conn.idle_timeout) is conn

    def _shared_record(self, idle_timeout: float) -> _HostConnection:
        shared = self._shared.get(idle_timeout)
        if shared is None:
            shared = self._shared[idle_timeout] = _HostConnection(idle_timeout=idle_timeout)
        return shared

    def _share_expired(self, now: float) -> None:
        """Share the records of the oldest replies' hosts whose connection expired (two at
        most per call: the queue shrinks faster than it grows, and no call is long)."""
        times, hosts = self._reply_times, self._reply_hosts
        for _ in range(2):
            if not times:
                return
            host = hosts[0]
            conn = self._hosts[host]
            if conn.last_reply_at > times[0] or self._is_shared(conn):
                pass  # the host replied again since (a later entry stands for it)
            elif now - conn.last_reply_at > conn.idle_timeout + self._grace:
                self._hosts[host] = self._shared_record(conn.idle_timeout)
            else:
                return
            times.popleft()
            hosts.popleft()

    def heard_from(self, host: str) -> bool:
        """Whether the host ever answered."""
        return host in self._hosts

    def __len__(self) -> int:
        return len(self._hosts)
