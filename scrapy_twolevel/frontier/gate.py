"""The door to each host's server: one request at a time, none before its ``Retry-After``.

The frontier hands out at most one request per host, but not every request comes from the
frontier: robots.txt, the Files and Images pipelines and ``engine.download_async`` send
theirs straight to the downloader, and Scrapy's per-slot concurrency does not hold them
back (under Scrapy 2.19 a host had a page and two files in flight at once). So politeness
is kept where every request passes, just before the download: a request *enters* its
host's gate, and *leaves* when its response or failure comes back. While one is inside,
the others wait in arrival order; while the server's ``Retry-After`` runs, all wait.

Pure module: no Scrapy, no Twisted. Waiting requests are callbacks (``admit()``); the caller
arms one timer at :meth:`HostGate.next_wake` and calls :meth:`HostGate.wake` then.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable

Admit = Callable[[], None]


class HostGate:
    """At most one request inside per host; none before the host's ``not_before`` time."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        #: Hosts with a request inside (sent, not yet answered).
        self._inside: set[str] = set()
        #: Hosts that asked to be left alone until a time (``Retry-After``); dropped once past.
        self._not_before: dict[str, float] = {}
        #: Requests waiting to enter, per host, in arrival order.
        self._waiting: dict[str, deque[Admit]] = {}

    def enter(self, host: str, admit: Admit) -> bool:
        """``True``: the request may go now (it is inside). ``False``: it waits, and
        ``admit()`` is called once it is inside (from :meth:`leave` or :meth:`wake`)."""
        if host not in self._waiting and self._may_enter(host):
            self._inside.add(host)
            return True
        self._waiting.setdefault(host, deque()).append(admit)
        return False

    def leave(self, host: str) -> None:
        """The request inside ``host``'s gate has its answer: let the next one in, if its
        time has come."""
        self._inside.discard(host)
        self._admit_next(host)

    def hold(self, host: str, until: float) -> None:
        """The server asked for no request before ``until`` (clock time)."""
        if until > self._not_before.get(host, 0.0) and until > self._clock():
            self._not_before[host] = until

    def next_wake(self) -> float | None:
        """The earliest time a waiting request may enter but for its host's hold, or
        ``None`` (nothing waits on a hold: :meth:`leave` admits the rest)."""
        times = [
            self._not_before[host]
            for host in self._waiting
            if host not in self._inside and host in self._not_before
        ]
        return min(times) if times else None

    def wake(self) -> None:
        """Admit the requests whose host's hold has passed."""
        for host in [h for h in self._waiting if h not in self._inside]:
            self._admit_next(host)

    def waiting(self, host: str) -> int:
        return len(self._waiting.get(host, ()))

    def inside(self, host: str) -> bool:
        return host in self._inside

    def not_before(self, host: str) -> float:
        """Clock time before which ``host`` takes no request (0: none)."""
        return self._not_before.get(host, 0.0)

    def _may_enter(self, host: str) -> bool:
        if host in self._inside:
            return False
        until = self._not_before.get(host)
        if until is None:
            return True
        if until > self._clock():
            return False
        del self._not_before[host]
        return True

    def _admit_next(self, host: str) -> None:
        queue = self._waiting.get(host)
        if not queue or not self._may_enter(host):
            return
        admit = queue.popleft()
        if not queue:
            del self._waiting[host]
        self._inside.add(host)
        admit()
