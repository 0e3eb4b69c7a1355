"""Downloader middleware measuring every host's connection and response times.

It sits near the downloader (order 950) so ``download_latency`` is fresh, infers from the
reply headers whether the request opened a new connection
(:class:`~scrapy_twolevel.frontier.connections.ConnectionTracker`), and sends the
:data:`~scrapy_twolevel.signals.host_measured` signal, which the scheduler folds into its
estimates. It keeps no estimates itself: one owner, one place to persist them.

A request that fails to download is evidence too: the middleware times it from
``process_request`` (so the time includes any download delay of the slot) and sends
:data:`~scrapy_twolevel.signals.host_failed`, telling timeouts from connection failures.
``IgnoreRequest`` says nothing about the host: it is reported as a response with nothing
measured, so the scheduler still learns that the request is finished.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, ClassVar

from scrapy import exceptions as scrapy_exceptions
from scrapy.exceptions import IgnoreRequest
from twisted.internet import defer
from twisted.internet import error as net_error

from . import meta as meta_keys
from .components import MIDDLEWARE_ROLE
from .config import TwoLevelConfig
from .frontier import PLAIN_LANE
from .frontier.connections import ConnectionTracker, ReplyFacts
from .frontier.estimates import ProcessingCost
from .glue.intake import make_request_host
from .glue.preflight import check_job_state, resolve_settings, uses_this_scheduler
from .signals import host_failed, host_measured

#: Exceptions that mean "the host took too long" rather than "could not connect"
#: (Scrapy 2.19 wraps download timeouts in its own ``DownloadTimeoutError``).
TIMEOUTS: tuple[type[BaseException], ...] = (
    TimeoutError,
    net_error.TimeoutError,
    net_error.TCPTimedOutError,
    defer.TimeoutError,
    *(
        (scrapy_exceptions.DownloadTimeoutError,)
        if hasattr(scrapy_exceptions, "DownloadTimeoutError")
        else ()
    ),
)

if TYPE_CHECKING:
    from typing import Self

    from scrapy import Request
    from scrapy.crawler import Crawler
    from scrapy.http import Response
    from scrapy.signalmanager import SignalManager
    from scrapy.statscollectors import StatsCollector


class HostMetricsMiddleware:
    """Measure connection time, response time and requests per connection per host."""

    #: What the start-up checks (:mod:`scrapy_twolevel.glue.preflight`) look for.
    twolevel_role: ClassVar[str] = MIDDLEWARE_ROLE

    def __init__(
        self,
        signals: SignalManager,
        stats: StatsCollector,
        host_of: Callable[[Request], str],
        idle_timeout: float,
        clock: Callable[[], float] = time.monotonic,
        cpu_clock: Callable[[], float] = time.process_time,
    ) -> None:
        self._signals = signals
        self._stats = stats
        self._host_of = host_of
        self._clock = clock
        self.tracker = ConnectionTracker(idle_timeout)
        self.processing = ProcessingCost(cpu_clock)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        from scrapy.resolver import dnscache

        if uses_this_scheduler(crawler):
            # Built before the spider opens: the one place a settings or JOBDIR error stops
            # the crawl with a single message (see resolve_settings).
            config, policy, _ = resolve_settings(crawler)
            check_job_state(crawler, config, policy)
        else:
            config = TwoLevelConfig.from_settings(crawler.settings)
        assert crawler.stats is not None
        return cls(
            crawler.signals,
            crawler.stats,
            make_request_host(config.host_key, dnscache),
            config.idle_timeout,
        )

    def _host(self, request: Request) -> str | None:
        host = request.meta.get(meta_keys.HOST)
        if host is None:
            try:
                host = self._host_of(request)
            except ValueError:
                return None
        return None if host == PLAIN_LANE else host

    def process_request(self, request: Request) -> None:
        request.meta[meta_keys.SENT_AT] = self._clock()

    def process_response(self, request: Request, response: Response) -> Response:
        sent_at = request.meta.pop(meta_keys.SENT_AT, None)  # copies must not inherit it
        host = self._host(request)
        if host is None:
            return response
        latency = request.meta.get("download_latency")
        if latency is None or "cached" in response.flags:
            # Nothing measured, but the request is finished: say so, so its host is freed.
            self._signals.send_catch_log(
                host_measured, host=host, observation=None, request=request
            )
            return response
        facts = ReplyFacts.parse(
            getattr(response, "protocol", None),
            response.headers.get(b"Connection", b"").decode("latin-1"),
            response.headers.get(b"Keep-Alive", b"").decode("latin-1"),
        )
        now = self._clock()
        obs = self.tracker.observe(host, facts, sent_at=now - latency, replied_at=now)
        # The whole response's time, its body's transfer included (download_latency stops
        # at the headers): what a page costs the host's connection.
        elapsed = now - sent_at if isinstance(sent_at, float) else float(latency)
        self._stats.inc_value("twolevel/metrics/responses")
        if obs.new_connection:
            self._stats.inc_value("twolevel/metrics/new_connections")
        self._signals.send_catch_log(
            host_measured,
            host=host,
            observation={
                "latency": float(latency),
                "new_connection": obs.new_connection,
                "served_on_connection": obs.served_on_connection,
                "closed_by_server": obs.closed_by_server,
                "remaining_on_connection": obs.remaining_on_connection,
                "elapsed": max(float(latency), elapsed),
                "processing": self.processing.response(len(response.body)),
            },
            request=request,
        )
        return response

    def process_exception(self, request: Request, exception: Exception) -> None:
        """A failed request leaves no usable connection behind, and costs the host."""
        host = self._host(request)
        if host is None:
            return
        if isinstance(exception, IgnoreRequest):
            # Says nothing about the host; the request is finished all the same.
            self._stats.inc_value("twolevel/metrics/ignored")
            self._signals.send_catch_log(
                host_measured, host=host, observation=None, request=request
            )
            return
        self.tracker.connection_lost(host)
        self._stats.inc_value("twolevel/metrics/failures")
        sent_at = request.meta.pop(meta_keys.SENT_AT, None)
        elapsed = self._clock() - sent_at if isinstance(sent_at, float) else 0.0
        self._signals.send_catch_log(
            host_failed,
            host=host,
            elapsed=max(0.0, elapsed),
            timeout=isinstance(exception, TIMEOUTS),
            request=request,
        )
