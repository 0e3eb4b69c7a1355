"""What the frontier does with a host whose requests fail: end its session, back off, give up.

A host that times out or refuses connections must not keep one of the K open places for
hours, and must not win the ranking because it was never measured. Failures are folded
into the host's estimates (see :meth:`HostEstimate.observe_failure`), and this policy
decides the rest:

* failures are judged where they belong: a URL that fails again (a retry of a URL that
  already failed) while nothing else of its host is queued counts once against its host,
  so a host that serves its other pages is not given up for one broken URL, and a host
  with one URL is retried at once as Scrapy does; with other URLs waiting, failing again
  before any of them counts (a host that went down);
* a session ends early after ``session_failures`` failures (of different URLs) in a row,
  and a probe (the one-request session after a back-off) that fails counts as failed too;
* such a *failed session* backs the host off for ``backoff * 2**(n - 1)`` seconds (``n``
  failed sessions in a row), capped at ``backoff_max``, lengthened by up to ``JITTER`` so
  that hosts that failed together are not probed together; its URLs stay queued;
* after ``failed_sessions`` failed sessions in a row a host that never answered is given
  up: its queued URLs are dropped and counted, and later URLs for it are dropped as they
  arrive; when nothing else is left to crawl, already at its second failed session (the
  crawl would only wait for its probes). A host that has answered before (a server that
  went down mid-crawl) is kept, probed at the capped back-off, until it has been failing
  for ``give_up_after`` seconds (0: never given up) -- StormCrawler and Nutch keep such
  hosts for hours to a day.

Any response (a refusal too: the server is up) resets both streaks. Pure module: no
Scrapy, no I/O.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class FailurePolicy:
    """The failure rules, all settings (see :mod:`scrapy_twolevel.config`)."""

    #: Failures in a row that end a host's session (``TWOLEVEL_SESSION_FAILURES``).
    session_failures: int = 2
    #: Seconds a host waits after its first failed session (``TWOLEVEL_BACKOFF``).
    backoff: float = 30.0
    #: Longest wait between two sessions of a failing host (``TWOLEVEL_BACKOFF_MAX``).
    backoff_max: float = 600.0
    #: Failed sessions in a row before the host is given up; 0: never
    #: (``TWOLEVEL_FAILED_SESSIONS``).
    failed_sessions: int = 3
    #: Seconds a host that has answered before may keep failing before it is given up; 0:
    #: never (``TWOLEVEL_GIVE_UP_AFTER``).
    give_up_after: float = 3600.0
    #: Seconds the first request to a host that never answered may take before it times
    #: out, doubled after each of its timeouts; 0: the download timeout
    #: (``TWOLEVEL_FIRST_ANSWER_TIMEOUT``; see :class:`SilentHosts`).
    first_answer_timeout: float = 10.0

    def backoff_delay(self, failed_in_a_row: int, jitter: float = 0.0) -> float:
        """Seconds to wait after the ``failed_in_a_row``-th failed session (1, 2, ...).

        ``jitter`` in [0, 1) lengthens the wait by up to :data:`JITTER` of it (never
        shortens it: the cap is a promise to the server, not to the crawl).
        """
        if failed_in_a_row < 1:
            return 0.0
        # min() before the power would overflow a float for a long streak.
        exponent = min(failed_in_a_row - 1, 64)
        return jittered(min(self.backoff * 2.0**exponent, self.backoff_max), jitter)

    def gives_up(
        self, failed_in_a_row: int, *, answered: bool, failing_for: float, end_game: bool = False
    ) -> bool:
        """Whether a host with this many failed sessions in a row is given up.

        ``answered``: it has answered a request before; ``failing_for``: seconds since its
        current streak of failures began; ``end_game``: nothing else is left to crawl, so
        a host that never answered is given up at its ``END_GAME_SESSIONS``-th failed
        session already (waiting for more probes would only hold the crawl open).
        """
        if not 0 < self.failed_sessions:
            return False
        if not answered:
            needed = (
                min(self.failed_sessions, END_GAME_SESSIONS) if end_game else self.failed_sessions
            )
            return failed_in_a_row >= needed
        return self.failed_sessions <= failed_in_a_row and 0 < self.give_up_after <= failing_for


#: Failed sessions after which a host that never answered is given up once nothing else
#: is left to crawl (see :meth:`FailurePolicy.gives_up`).
END_GAME_SESSIONS = 2

#: Waits are lengthened by a random share of up to this much (see :func:`jittered`).
JITTER = 0.1


def jittered(wait: float, jitter: float) -> float:
    """``wait * (1 + JITTER * jitter)`` for ``jitter`` drawn from [0, 1)."""
    return wait * (1.0 + JITTER * jitter)


class SilentHosts:
    """The timeout of a request to a host that has never answered.

    A host that accepts connections and never answers, or an address that drops them,
    holds one of the crawl's ``CONCURRENT_REQUESTS`` places for the whole download timeout
    at each attempt: three such hosts among eight places cost a crawl a third of its
    speed until they are backed off. Nutch and StormCrawler time every request out after
    10 s; here only a host that has never answered gets ``first`` seconds, doubled after
    each of its timeouts up to the download timeout, so a slow host that does answer
    costs one shorter attempt at worst, and once it has answered it gets the full time.

    ``heard_from(host)``: whether the host ever answered (the middleware's connection
    tracker, which keeps a record per host anyway); only timeouts are kept here.
    """

    def __init__(self, first: float, heard_from: Callable[[str], bool]) -> None:
        self.first = first
        self._heard_from = heard_from
        self._timeouts: dict[str, int] = {}

    def timeout(self, host: str, ceiling: float) -> float | None:
        """Seconds the host's next request may take, if less than ``ceiling``."""
        if not self.first or self._heard_from(host):
            self._timeouts.pop(host, None)
            return None
        # min() before the power: a float would overflow after a long streak.
        seconds = self.first * 2.0 ** min(self._timeouts.get(host, 0), 32)
        return seconds if seconds < ceiling else None

    def timed_out(self, host: str) -> None:
        """A request to the host timed out: the next one may take twice as long."""
        if self.first and not self._heard_from(host):
            self._timeouts[host] = self._timeouts.get(host, 0) + 1

    def __len__(self) -> int:
        return len(self._timeouts)


class RefusedUrls:
    """URLs answered with a refusal status but no ``Retry-After`` (a bare 503), counted.

    nginx's ``limit_req`` refuses with a bare 503, and so does a broken page: one answer
    cannot tell them apart. A rate limit lets the URL through once its host is paced, a
    broken page never does; so a URL's bare refusals are taken for its host's until it
    has had ``limit`` of them (across requests: a seed refetched keeps its count), and it
    is an error page from then on. A response of the URL forgets it; at most ``size`` URLs
    are kept, the least recently refused go first.
    """

    def __init__(self, limit: int, size: int = 4096) -> None:
        self.limit = limit
        self.size = size
        self._counts: dict[str, int] = {}

    def record(self, url: str) -> int:
        """One more bare refusal of ``url``; returns how many it had before this one."""
        count = self._counts.pop(url, 0)  # re-inserted last: least recently refused first
        self._counts[url] = count + 1
        if len(self._counts) > self.size:
            del self._counts[next(iter(self._counts))]
        return count

    def answered(self, url: str) -> None:
        """``url`` got an answer that is not a refusal: a rate limit's, if any; forgotten."""
        if self._counts:
            self._counts.pop(url, None)

    def __len__(self) -> int:
        return len(self._counts)
