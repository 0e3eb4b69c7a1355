"""What the scheduler tells the user: stats for everything, a log line once per kind, and
the hosts' recent sessions for the live view's host pages.

A problem that can repeat per request (a URL whose host cannot be worked out, a stored
request that cannot be rebuilt) is logged the first time and counted every time, as
Scrapy's own dupefilter does, so a million bad URLs do not bury the log.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from ..frontier.hosts import GIVEN_UP_BUDGET, GIVEN_UP_FAILING
from ..live.timeline import RecentSessions

if TYPE_CHECKING:
    from scrapy import Spider
    from scrapy.statscollectors import StatsCollector

    from ..frontier import Frontier

logger = logging.getLogger(__name__)


class Reporter:
    """The crawl's stats, and warnings logged once per kind."""

    def __init__(self, stats: StatsCollector, spider: Spider | None = None) -> None:
        """``spider``: named in the log lines' ``extra``."""
        self.stats = stats
        # Bound once: Scrapy 2.19's StatsCollector wraps every method looked up on it.
        self._inc_value = stats.inc_value
        self.set = stats.set_value
        self.spider = spider
        self._warned: set[str] = set()
        self._counts: dict[str, int] = {}
        self._buffered = True
        #: Every session the frontier ends (bounded), for a host's timeline.
        self.sessions = RecentSessions()

    def inc(self, key: str, count: int = 1) -> None:
        """Add ``count`` to the stat ``key``: kept here until :meth:`flush`.

        Why: on Scrapy 2.19 one ``inc_value`` costs 2-3 µs (every attribute read inside
        the collector goes through a wrapper that raises and catches an exception), and a
        page takes four of them here (enqueued and dequeued, each twice): a fifth of an
        enqueue. The scheduler flushes on each ``next_request`` and at close, so the
        crawl's stats lag by less than one turn of the engine's loop.
        """
        if self._buffered:
            counts = self._counts
            counts[key] = counts.get(key, 0) + count
        else:
            self._inc_value(key, count)

    def flush(self) -> None:
        """Add the counts kept since the last flush to the crawl's stats."""
        counts = self._counts
        if counts:
            self._counts = {}
            inc_value = self._inc_value
            for key, count in counts.items():
                inc_value(key, count)

    def unbuffer(self) -> None:
        """Flush, then add every later count at once (the crawl is closing: no later
        flush would come)."""
        self.flush()
        self._buffered = False

    def count_once(self, what: str, message: str, subject: object) -> None:
        """Count ``twolevel/<what>``; log the first case (``message`` may use %(request)s)."""
        self.inc(f"twolevel/{what}")
        if what not in self._warned:
            self._warned.add(what)
            self.warning(
                message + " Further cases are only counted in stats (twolevel/%(what)s).",
                {"request": subject, "what": what},
            )

    def warning(self, message: str, args: dict[str, Any] | None = None) -> None:
        # No args, no formatting: logging formats a lone empty dict as a tuple, and fails.
        logger.warning(message, *((args,) if args else ()), extra={"spider": self.spider})

    def info(self, message: str, args: dict[str, Any] | None = None) -> None:
        logger.info(message, *((args,) if args else ()), extra={"spider": self.spider})

    def host_given_up(self, host: str, dropped: int, why: str = GIVEN_UP_FAILING) -> None:
        if why == GIVEN_UP_BUDGET:
            self.inc("twolevel/hosts_at_budget")
            self.inc("twolevel/dropped/budget", dropped)
            self.info(
                "Host %(host)s has had its page budget: %(dropped)d queued requests dropped, "
                "later ones for it are dropped too (twolevel/dropped/budget; "
                "TWOLEVEL_HOST_BUDGET and TWOLEVEL_HOST_BUDGETS set it).",
                {"host": host, "dropped": dropped},
            )
            return
        self.inc("twolevel/hosts_given_up")
        self.inc("twolevel/dropped/host_failed", dropped)
        self.warning(
            "Host %(host)s is given up: %(dropped)d queued requests dropped, later ones for "
            "it are dropped too (twolevel/dropped/host_failed). A host that never answered "
            "is given up after TWOLEVEL_FAILED_SESSIONS failed sessions in a row, one that "
            "answered before after failing for TWOLEVEL_GIVE_UP_AFTER seconds; set either "
            "to 0 to keep failing hosts.",
            {"host": host, "dropped": dropped},
        )

    def crawl_delay(self, host: str, delay: float) -> None:
        """Log once per host that its robots.txt ``Crawl-delay`` is honoured."""
        if f"crawl_delay:{host}" not in self._warned:
            self._warned.add(f"crawl_delay:{host}")
            self.info(
                "robots.txt of %(host)s asks for Crawl-delay: %(delay)s; its requests start "
                "at least that far apart (TWOLEVEL_CRAWL_DELAY = False to ignore it).",
                {"host": host, "delay": delay},
            )

    def report_hosts(self, frontier: Frontier, top_hosts: int) -> None:
        """Frontier totals, and the estimates of the ``top_hosts`` most measured hosts."""
        self.set("twolevel/hosts", frontier.host_count)
        # Counted by the frontier, written once: two stats calls per session cost a third
        # of the dequeue time when sessions are short.
        self.set("twolevel/sessions", frontier.sessions_ended)
        self.set("twolevel/session_requests", frontier.session_requests)
        self.set("twolevel/session_extensions", frontier.session_extensions)
        refusing = sorted(
            (h for h in frontier.hosts() if h.estimate.refusals), key=lambda h: -h.estimate.refusals
        )
        self.set("twolevel/hosts_refusing", len(refusing))
        for host in refusing[:top_hosts]:  # where the refusals were, bounded like the rest
            self.set(f"twolevel/host/{host.key}/refusals", host.estimate.refusals)
        top = sorted(frontier.hosts(), key=lambda h: -h.estimate.samples)
        for host in top[:top_hosts]:
            if not host.estimate.samples:
                break
            for field, value in host.estimate.to_dict().items():
                if not field.endswith("samples"):
                    self.set(f"twolevel/host/{host.key}/{field}", value)
