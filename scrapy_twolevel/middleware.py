"""Downloader middleware measuring every host's connection and response times.

It sits near the downloader (order 950) so ``download_latency`` is fresh, infers from the
reply headers whether the request opened a new connection
(:class:`~scrapy_twolevel.frontier.connections.ConnectionTracker`), and sends the
:data:`~scrapy_twolevel.signals.host_measured` signal, which the scheduler folds into its
estimates. It keeps no estimates itself: one owner, one place to persist them.

A request that fails to download is evidence too: the middleware times it from
``process_request`` (so the time includes any download delay of the slot) and sends
:data:`~scrapy_twolevel.signals.host_failed` with the failure's kind (the host is down,
slow, or the connection broke) and whether the URL had failed before (a retry), so that
one broken URL counts once against its host. ``IgnoreRequest`` says nothing about the
host: it is reported as a response with nothing measured, so the scheduler still learns
that the request is finished.

A refusal (a 429, or another of ``TWOLEVEL_REFUSAL_CODES`` such as 503; without a
``Retry-After`` only until its URL has had 5, see
:class:`~scrapy_twolevel.frontier.failures.RefusedUrls`) is the server asking for time: the
middleware sends :data:`~scrapy_twolevel.signals.host_refused` with the ``Retry-After``
in seconds, and hands the request back to the scheduler (up to ``TWOLEVEL_REFUSAL_RETRIES``
times), which keeps it in its host's queue while the host waits. RetryMiddleware never sees
those refusals, so they do not use up its attempts. A robots.txt with a ``Crawl-delay``
(fetched by Scrapy's RobotsTxtMiddleware when ``ROBOTSTXT_OBEY`` is on) sends
:data:`~scrapy_twolevel.signals.host_crawl_delay`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, Any, ClassVar

from scrapy import exceptions as scrapy_exceptions
from scrapy import signals as scrapy_signals
from scrapy.exceptions import IgnoreRequest
from twisted.internet import defer
from twisted.internet import error as net_error
from twisted.internet.defer import Deferred

from . import meta as meta_keys
from ._engine import (
    handlers_hiding_connections,
    pooled_connections,
    wait_for,
)
from .components import MIDDLEWARE_ROLE
from .config import TwoLevelConfig
from .frontier import PLAIN_LANE
from .frontier.connections import GRACE, ConnectionTracker, ReplyFacts
from .frontier.estimates import REFUSAL_STREAK, Measurement, ProcessingCost
from .frontier.failures import RefusedUrls, SilentHosts
from .frontier.gate import HostGate
from .frontier.lag import LoopStalls
from .glue.intake import drop_inherited_keys, make_request_host
from .glue.politeness import BROKEN, DOWN, SLOW, retry_after_seconds, robots_crawl_delay
from .glue.preflight import check_job_state, resolve_settings, uses_this_scheduler
from .glue.timers import Alarm, Timer
from .signals import host_crawl_delay, host_failed, host_measured, host_refused
from .view import CrawlView, view_of

logger = logging.getLogger(__name__)

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
#: Exceptions that mean "could not reach the host": refused, DNS, TCP connect timeout
#: (Scrapy 2.19 wraps the first two in its own exceptions).
UNREACHABLE: tuple[type[BaseException], ...] = (
    net_error.ConnectError,
    net_error.DNSLookupError,
    *(
        getattr(scrapy_exceptions, name)
        for name in ("DownloadConnectionRefusedError", "CannotResolveHostError")
        if hasattr(scrapy_exceptions, name)
    ),
)


def failure_kind(exception: BaseException) -> str:
    """:data:`DOWN` (could not connect: refused, DNS, connect timeout), :data:`SLOW` (a
    timeout once connected) or :data:`BROKEN` (anything else: a reset or aborted
    connection, a response cut short)."""
    # Twisted's TimeoutError is a ConnectError: Scrapy < 2.15 raises it for a download
    # timeout (2.15+ wraps it in DownloadTimeoutError), which is SLOW there too.
    if isinstance(exception, UNREACHABLE) and not isinstance(exception, net_error.TimeoutError):
        return DOWN
    if isinstance(exception, TIMEOUTS):
        return SLOW
    return BROKEN


if TYPE_CHECKING:
    from typing import Self

    from scrapy import Request, Spider
    from scrapy.crawler import Crawler
    from scrapy.http import Response
    from scrapy.signalmanager import SignalManager
    from scrapy.statscollectors import StatsCollector

    from .glue.outcomes import Outcomes


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
        *,
        scheduler_keeps: bool = False,
        refusal_codes: tuple[int, ...] = (),
        refusal_retries: int = 0,
        retry_after_max: float = 600.0,
        robots_user_agent: str | None = None,
        wall_clock: Callable[[], float] = time.time,
        handles_status: Callable[[Request, int], bool] = lambda request, status: False,
        first_answer_timeout: float = 0.0,
        download_timeout: float = 0.0,
        pooled: Callable[[Request], int | None] = lambda request: None,
        gate: HostGate | None = None,
        view: Callable[[], CrawlView | None] = lambda: None,
    ) -> None:
        """``scheduler_keeps``: this package's scheduler runs the crawl, so requests sent
        again wait in their host's queue while it waits (see the module docstring); without
        it nothing is sent again. ``robots_user_agent``: read robots.txt ``Crawl-delay``
        for this agent (``None``: do not); ``handles_status(request, status)``: the spider
        asked to see this status itself (``handle_httpstatus_list``);
        ``first_answer_timeout``: the timeout of a host that never answered (0: none, see
        :class:`~scrapy_twolevel.frontier.failures.SilentHosts`), for requests that have
        the crawl's ``download_timeout`` (a request's own is left alone); ``pooled(request)``:
        idle connections to the request's server once its response came (0: the server
        closed it; ``None``: not known; :func:`~scrapy_twolevel._engine.pooled_connections`);
        ``gate``: every request waits at it for its host's turn (see
        :mod:`~scrapy_twolevel.frontier.gate`; ``None``: none waits), on ``clock``;
        ``view()``: the two-level scheduler, which each request's outcome is reported to
        (:mod:`scrapy_twolevel.view`; ``None``: another scheduler, or not open)."""
        self._signals = signals
        self._stats = stats
        self._host_of = host_of
        self._clock = clock
        self._wall_clock = wall_clock
        self._refusal_codes = frozenset(refusal_codes)
        self._keeps = scheduler_keeps
        self._refusal_retries = refusal_retries
        self._retry_after_max = retry_after_max
        self._robots_agent = robots_user_agent
        self._handles_status = handles_status
        # A connection's record is shared once no reply can still come over it.
        self.tracker = ConnectionTracker(idle_timeout, grace=max(GRACE, download_timeout))
        self.processing = ProcessingCost(cpu_clock)
        self.silent = SilentHosts(first_answer_timeout, self.tracker.heard_from)
        self.refused_urls = RefusedUrls(REFUSAL_STREAK)
        self._download_timeout = download_timeout
        self._pooled = pooled
        self._gate = gate
        self._view = view
        #: Requests inside the gate -> their host (until their answer or failure).
        self._inside: dict[Request, str] = {}
        #: Admits waiting requests when the earliest hold they wait for ends.
        self._wake = Alarm(self._holds_ended, clock)
        #: The crawler's own stalls, which a reply read late is no server's hold for.
        self.stalls = LoopStalls(clock)
        self._ticker = Timer(self._tick)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        ours = uses_this_scheduler(crawler)
        if ours:
            # Built before the spider opens: the one place a settings or JOBDIR error stops
            # the crawl with a single message (see resolve_settings).
            config, policy, _ = resolve_settings(crawler)
            check_job_state(crawler, config, policy)
        else:
            config = TwoLevelConfig.from_settings(crawler.settings)
        assert crawler.stats is not None
        settings = crawler.settings
        robots_agent = None
        if config.crawl_delay and settings.getbool("ROBOTSTXT_OBEY"):
            robots_agent = settings.get("ROBOTSTXT_USER_AGENT") or settings.get("USER_AGENT")
        middleware = cls(
            crawler.signals,
            crawler.stats,
            make_request_host(config.host_key),
            config.idle_timeout,
            refusal_codes=config.refusal_codes,
            scheduler_keeps=ours,
            refusal_retries=config.refusal_retries,
            retry_after_max=config.retry_after_max,
            robots_user_agent=robots_agent,
            handles_status=_spider_handles(crawler),
            first_answer_timeout=config.failures.first_answer_timeout if ours else 0.0,
            download_timeout=settings.getfloat("DOWNLOAD_TIMEOUT"),
            pooled=partial(pooled_connections, crawler),
            # One request at a host's server at a time, out-of-band downloads included;
            # only under this scheduler, which hands out one request per host anyway.
            gate=HostGate() if ours else None,
            view=partial(view_of, crawler),
        )
        crawler.signals.connect(middleware._headers_received, scrapy_signals.headers_received)
        crawler.signals.connect(middleware.start_ticking, scrapy_signals.engine_started)
        crawler.signals.connect(middleware.stop_ticking, scrapy_signals.engine_stopped)
        hidden = handlers_hiding_connections(crawler)
        crawler.stats.set_value("twolevel/metrics/connections_seen", int(not hidden))
        if hidden:
            logger.info(
                "Download handlers %(handlers)s do not show their connections: host "
                "estimates use response and connection times and the Connection and "
                "Keep-Alive headers only; a server that closes connections without saying "
                "so is taken for one that keeps them (see 'Other download handlers' in "
                "docs/politeness.rst).",
                {"handlers": hidden},
            )
        return middleware

    def _outcomes(self) -> Outcomes | None:
        """Where the two-level scheduler takes each outcome (``None``: another scheduler,
        or not open)."""
        view = self._view()
        return None if view is None else view.outcomes

    def _host(self, request: Request) -> str | None:
        host = request.meta.get(meta_keys.HOST)
        if host is None:
            try:
                host = self._host_of(request)
            except ValueError:
                return None
        return None if host == PLAIN_LANE else host

    def process_request(self, request: Request, spider: Spider | None = None) -> Any:
        """Let ``request`` go when its host's gate lets it in: at once (``None``), or a
        coroutine that waits for its turn. Requests the scheduler hands out rarely wait (it
        gives one per host); robots.txt, media and other downloads that bypass it do."""
        drop_inherited_keys(request)  # it may have bypassed the scheduler
        gate = self._gate
        host = None if gate is None else self._host(request)
        if gate is None or host is None:
            self._start(request)
            return None
        turn = Deferred[None]()
        if gate.enter(host, lambda: turn.callback(None)):
            self._inside[request] = host
            self._start(request)
            return None
        self._stats.inc_value("twolevel/gate/waits")
        self._wake.at(gate.next_wake())
        return self._wait_turn(turn, request, host)

    async def _wait_turn(self, turn: Deferred[None], request: Request, host: str) -> None:
        await wait_for(turn)
        self._inside[request] = host
        self._start(request)

    def _start(self, request: Request) -> None:
        """``request`` goes to the downloader now: its time at the host starts."""
        request.meta[meta_keys.SENT_AT] = self._clock()
        if self.silent.first:
            self._limit_timeout(request)

    def _leave_gate(self, request: Request, retry_after: float | None = None) -> None:
        """``request`` has its answer: its host's next request may go, after the server's
        ``Retry-After`` (seconds) if it gave one."""
        host = self._inside.pop(request, None)
        if host is None:
            return  # never went in: no gate, or answered before it (a cached response)
        assert self._gate is not None
        if retry_after:
            self._gate.hold(host, self._clock() + retry_after)
        self._gate.leave(host)
        self._wake.at(self._gate.next_wake())

    def _holds_ended(self) -> None:
        assert self._gate is not None
        self._gate.wake()
        self._wake.at(self._gate.next_wake())

    def start_ticking(self) -> None:
        """Watch the crawler's event loop for stalls (:mod:`~.frontier.lag`), while there
        is one to run the ticks."""
        self._ticker.arm(self.stalls.start())
        if not self._ticker.armed:
            self.stalls.stop()

    def stop_ticking(self) -> None:
        self._ticker.cancel()
        self.stalls.stop()

    def _tick(self) -> None:
        self._ticker.arm(self.stalls.tick())

    def _lag(self, sent_at: object) -> float:
        """Seconds the crawler's loop stalled since ``sent_at`` (0: not known)."""
        return self.stalls.stalled(sent_at) if isinstance(sent_at, float) else 0.0

    def _headers_received(self, request: Request, **kwargs: Any) -> None:
        """A response's headers came: note how long the crawler's loop stalled since the
        request went (``Measurement.lag``), and its host has answered, whatever its body
        does (a large page on a slow host may still take the shortened time of this
        request)."""
        meta = request.meta
        if meta_keys.SENT_AT in meta:
            meta[meta_keys.HEADERS_LAG] = self._lag(meta[meta_keys.SENT_AT])
        if not self.silent.first:
            return
        host = self._host(request)
        if host is not None:
            self.tracker.answered(host)

    def _limit_timeout(self, request: Request) -> None:
        """Shorten the crawl's download timeout for a host that never answered."""
        meta = request.meta
        full = meta.get(meta_keys.FULL_TIMEOUT)
        if full is None:
            full = meta.get("download_timeout")
            if full != self._download_timeout or not full:
                return  # the request's own timeout, or none at all
        host = self._host(request)
        timeout = None if host is None else self.silent.timeout(host, full)
        if timeout is None:
            if meta.pop(meta_keys.FULL_TIMEOUT, None) is not None:
                meta["download_timeout"] = full  # it answered since: the full time again
            return
        meta_keys.set_own(meta, request.url, meta_keys.FULL_TIMEOUT, full)
        meta["download_timeout"] = timeout
        self._stats.inc_value("twolevel/metrics/first_answer_timeouts")

    def process_response(
        self, request: Request, response: Response, spider: Spider | None = None
    ) -> Response | Request:
        refusal = response.status in self._refusal_codes
        wait = self._retry_after(response) if refusal else None
        self._leave_gate(request, wait)
        sent_at = request.meta.pop(meta_keys.SENT_AT, None)  # copies must not inherit it
        lag = request.meta.pop(meta_keys.HEADERS_LAG, None)
        host = self._host(request)
        if host is None:
            return response
        self.tracker.answered(host)  # any reply: a refusal, a cached or unmeasured one too
        forgiven: int | None = 0
        if not refusal:
            self.refused_urls.answered(request.url)
        elif response.status == 429 or b"Retry-After" in response.headers:
            return self._refused(host, request, response, wait)
        elif (forgiven := self._bare_refusals_forgiven(request)) is None:
            return self._refused(host, request, response, wait)
        if self._robots_agent is not None and request.url.endswith("/robots.txt"):
            self._read_crawl_delay(host, response)
        latency = request.meta.get("download_latency")
        if latency is None or "cached" in response.flags:
            # Nothing measured, but the request is finished: say so, so its host is freed.
            self._measured(host, request, None)
            return response
        pooled = self._pooled(request)
        facts = ReplyFacts.parse(
            getattr(response, "protocol", None),
            (response.headers.get(b"Connection") or b"").decode("latin-1"),
            (response.headers.get(b"Keep-Alive") or b"").decode("latin-1"),
            kept_open=None if pooled is None else pooled > 0,
        )
        now = self._clock()
        obs = self.tracker.observe(host, facts, sent_at=now - latency, replied_at=now)
        # The whole response's time, its body's transfer included (download_latency stops
        # at the headers): what a page costs the host's connection.
        elapsed = now - sent_at if isinstance(sent_at, float) else float(latency)
        self._stats.inc_value("twolevel/metrics/responses")
        if obs.new_connection:
            self._stats.inc_value("twolevel/metrics/new_connections")
        measurement = Measurement(
            latency=float(latency),
            new_connection=obs.new_connection,
            served_on_connection=obs.served_on_connection,
            closed_by_server=obs.closed_by_server,
            remaining_on_connection=obs.remaining_on_connection,
            elapsed=max(float(latency), elapsed),
            processing=self.processing.response(len(response.body)),
            forgiven_refusals=forgiven or 0,
            size=len(response.body),
            # A handler that sends no headers_received: the stalls until the whole reply.
            lag=self._lag(sent_at) if lag is None else lag,
        )
        self._measured(host, request, measurement)
        return response

    def _measured(self, host: str, request: Request, measurement: Measurement | None) -> None:
        """Tell the scheduler, then whoever listens (:data:`~.signals.host_measured`)."""
        outcomes = self._outcomes()
        if outcomes is not None:
            outcomes.measured(request, measurement)
        self._signals.send_catch_log(
            host_measured, host=host, measurement=measurement, request=request
        )

    def _bare_refusals_forgiven(self, request: Request) -> int | None:
        """A refusal status without ``Retry-After`` (a bare 503): ``None`` while it is taken
        for the host's refusal (see :class:`RefusedUrls`), else an error page's answer, with
        the number of its URL's refusals whose growth of the host's gap is undone (once)."""
        before = self.refused_urls.record(request.url)
        if before < self.refused_urls.limit:
            return None
        self._stats.inc_value("twolevel/refusals/taken_for_errors")
        return before if before == self.refused_urls.limit else 0

    def _retry_after(self, response: Response) -> float | None:
        """The response's ``Retry-After`` in seconds, at most ``TWOLEVEL_RETRY_AFTER_MAX``."""
        wait = retry_after_seconds(response.headers.get(b"Retry-After"), self._wall_clock())
        return None if wait is None else min(wait, self._retry_after_max)

    def _refused(
        self, host: str, request: Request, response: Response, wait: float | None
    ) -> Response | Request:
        """The server refused the request for now: its host waits, the request goes back."""
        self._stats.inc_value("twolevel/refusals")
        self._stats.inc_value(f"twolevel/refusals/{response.status}")
        outcomes = self._outcomes()
        again = outcomes is not None and outcomes.refused(request, host, wait)
        self._signals.send_catch_log(host_refused, host=host, retry_after=wait, request=request)
        if (
            not self._may_send_again(request, again)  # e.g. the host refuses everything
            or request.meta.get(meta_keys.REFUSALS, 0) >= self._refusal_retries
            or request.meta.get("dont_retry")
            or self._handles_status(request, response.status)
        ):
            return response  # RetryMiddleware, then the spider, decide as usual
        return self._send_again(request, meta_keys.REFUSALS, "twolevel/refusals/sent_again")

    def _may_send_again(self, request: Request, scheduler_says: bool) -> bool:
        """Whether the scheduler said yes, and the request is this middleware's to send
        again: not a seed planner's fetch, which the planner refetches itself, and only
        with this package's scheduler."""
        return self._keeps and meta_keys.SEED_FETCH not in request.meta and scheduler_says

    def _send_again(self, request: Request, counter: str, stat: str) -> Request:
        """A copy of ``request`` for the scheduler, its ``counter`` meta key one higher."""
        again = request.replace(dont_filter=True)
        meta_keys.set_own(again.meta, again.url, counter, request.meta.get(counter, 0) + 1)
        self._stats.inc_value(stat)
        return again

    def _read_crawl_delay(self, host: str, response: Response) -> None:
        assert self._robots_agent is not None
        if response.status != 200:
            return
        delay = robots_crawl_delay(response.body, self._robots_agent)
        if delay is not None:
            self._stats.inc_value("twolevel/crawl_delay_hosts")
            outcomes = self._outcomes()
            if outcomes is not None:
                outcomes.crawl_delay(host, delay)
            self._signals.send_catch_log(host_crawl_delay, host=host, delay=delay)

    def process_exception(
        self, request: Request, exception: Exception, spider: Spider | None = None
    ) -> Request | None:
        """A failed request leaves no usable connection behind, and costs the host.

        If the scheduler says the host is backed off (it fails as a whole), or the request
        timed out within the shortened time of a host that never answered, the request goes
        back to it without using up an attempt: RetryMiddleware's attempts are for URLs that
        fail on a host that works, and a host that is down for a while must not cost its
        URLs.
        """
        self._leave_gate(request)
        host = self._host(request)
        if host is None:
            return None
        if isinstance(exception, IgnoreRequest):
            # Says nothing about the host; the request is finished all the same.
            self._stats.inc_value("twolevel/metrics/ignored")
            self._measured(host, request, None)
            return None
        self.tracker.connection_lost(host)
        self._stats.inc_value("twolevel/metrics/failures")
        if isinstance(exception, TIMEOUTS):
            self.silent.timed_out(host)
        sent_at = request.meta.pop(meta_keys.SENT_AT, None)
        request.meta.pop(meta_keys.HEADERS_LAG, None)
        elapsed = self._clock() - sent_at if isinstance(sent_at, float) else 0.0
        repeat = bool(request.meta.get(meta_keys.FAILED_BEFORE))
        # RetryMiddleware's copies carry it (same URL: see meta_keys.OWNER).
        meta_keys.set_own(request.meta, request.url, meta_keys.FAILED_BEFORE, True)
        timeout = isinstance(exception, TIMEOUTS)
        elapsed, kind = max(0.0, elapsed), failure_kind(exception)
        silent = timeout and meta_keys.FULL_TIMEOUT in request.meta
        outcomes = self._outcomes()
        backed_off = outcomes is not None and outcomes.failed(
            request, elapsed=elapsed, timeout=timeout, kind=kind, repeat=repeat, silent=silent
        )
        self._signals.send_catch_log(
            host_failed,
            host=host,
            elapsed=elapsed,
            timeout=timeout,
            kind=kind,
            repeat=repeat,
            silent=silent,
            request=request,
        )
        # A timeout cut short for a host that never answered is this package's choice,
        # not the URL's failure: its copy uses up no RetryMiddleware attempt either (with
        # RETRY_TIMES = 2 and a 0.1-s first-answer timeout, a host whose answers took over
        # 0.4 s on a loaded machine lost its seed URL). The doubling bounds it: from
        # DOWNLOAD_TIMEOUT on, a timeout is not silent, and the host's failure streak backs
        # it off and gives it up.
        if self._may_send_again(request, backed_off or silent):
            # Queued behind the host's other requests (see Intake.quality): its next probe
            # tries another of its URLs, so one broken URL cannot be probed for ever.
            return self._send_again(request, meta_keys.REQUEUED, "twolevel/failures/sent_again")
        return None


def _spider_handles(crawler: Crawler) -> Callable[[Request, int], bool]:
    """``(request, status) -> bool``: the spider wants this status in its callback, as
    HttpErrorMiddleware reads it (``handle_httpstatus_all``/``_list`` in meta, the spider's
    ``handle_httpstatus_list``, ``HTTPERROR_ALLOW_ALL``/``HTTPERROR_ALLOWED_CODES``)."""
    settings = crawler.settings
    allow_all = settings.getbool("HTTPERROR_ALLOW_ALL")
    allowed = {int(code) for code in settings.getlist("HTTPERROR_ALLOWED_CODES")}

    def handles(request: Request, status: int) -> bool:
        meta = request.meta
        if meta.get("handle_httpstatus_all") or status in meta.get("handle_httpstatus_list", ()):
            return True
        spider = getattr(crawler, "spider", None)
        listed = getattr(spider, "handle_httpstatus_list", None) or ()
        return allow_all or status in allowed or status in listed

    return handles
