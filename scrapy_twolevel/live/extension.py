"""The live view in a crawl: the dashboard's server and the periodic status line.

A Scrapy extension (the add-on enables it; by hand:
``EXTENSIONS = {"scrapy_twolevel.live.extension.LiveView": 0}``). With
``TWOLEVEL_WEB_PORT`` set it serves the dashboard, ``/status.json`` and ``/metrics`` on
``TWOLEVEL_WEB_HOST`` (127.0.0.1) from the crawl's reactor, behind a random token, and
logs the URL to open. Every ``TWOLEVEL_STATUS_INTERVAL`` seconds (60; 0: never) it logs
one line: hosts by state and why they wait, pending requests, quality gathered. Both read
:func:`~.snapshot.snapshot` of the scheduler's frontier; nothing here changes the crawl.

With the dashboard on, it also keeps what a snapshot cannot say (:mod:`.timeline`): the
crawl's course every :data:`SAMPLE_INTERVAL` seconds, for its rates now and its time to
drain, and each host's recent failures and refusals, for the host pages (its pages show
in its sessions, which the frontier reports).
"""

from __future__ import annotations

import logging
import secrets
import time
from collections import Counter
from typing import TYPE_CHECKING, Any, Self

from scrapy import signals
from scrapy.exceptions import NotConfigured

from .._engine import requests_in_downloader
from ..config import PORT, PROMETHEUS_MAX_HOSTS, STATUS_INTERVAL, WEB_HOST, WEB_TOP_HOSTS
from ..signals import host_failed, host_refused
from ..view import view_of
from .snapshot import SCHEMA_VERSION, STATES, snapshot
from .timeline import History, HostEvents, Point, host_timeline

if TYPE_CHECKING:
    from scrapy import Request, Spider
    from scrapy.crawler import Crawler
    from scrapy.http import Response

    from ..frontier import Frontier
    from ..view import CrawlView

logger = logging.getLogger(__name__)

#: Seconds a snapshot without named hosts is served again (see :meth:`LiveView.status`).
REUSE = 1.0
#: Seconds between two points of the crawl's course (with the dashboard on).
SAMPLE_INTERVAL = 2.0
#: URLs of a host's queue its page shows.
QUEUED_SHOWN = 10


class LiveView:
    """See the module docstring."""

    def __init__(
        self,
        crawler: Crawler,
        *,
        port: int | None,
        host: str,
        top: int,
        interval: float,
        prometheus_hosts: int,
    ) -> None:
        self.crawler = crawler
        self.port = port
        self.host = host
        self.top = top
        #: Hosts with series of their own in ``/metrics`` (TWOLEVEL_PROMETHEUS_MAX_HOSTS).
        self.prometheus_hosts = prometheus_hosts
        self.interval = interval
        self.token = secrets.token_urlsafe(16)
        self.url: str | None = None
        self.pages = 0
        self.quality = 0.0
        self._started = time.monotonic()
        self._listening: Any = None
        self._loop: Any = None
        self._last: tuple[float, dict[str, Any]] | None = None
        #: Failed requests per host by kind (down, slow, broken), from the middleware.
        self.failures: dict[str, Counter[str]] = {}
        self.errors = 0  # failed requests (host_failed)
        self.refusals = 0  # refused ones (host_refused: 429/503, TWOLEVEL_REFUSAL_CODES)
        self.history = History()
        #: Each host's recent events; kept only with the dashboard on (who else reads it).
        self.events = HostEvents() if port is not None else None
        self._sampler: Any = None

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        settings = crawler.settings
        port, interval = PORT.read(settings), STATUS_INTERVAL.read(settings)
        if port is None and not interval:
            raise NotConfigured("no TWOLEVEL_WEB_PORT and TWOLEVEL_STATUS_INTERVAL = 0")
        view = cls(
            crawler,
            port=port,
            host=WEB_HOST.read(settings) or "127.0.0.1",
            top=WEB_TOP_HOSTS.read(settings),
            interval=interval,
            prometheus_hosts=PROMETHEUS_MAX_HOSTS.read(settings),
        )
        crawler.signals.connect(view.spider_opened, signal=signals.spider_opened)
        crawler.signals.connect(view.spider_closed, signal=signals.spider_closed)
        crawler.signals.connect(view.response_received, signal=signals.response_received)
        crawler.signals.connect(view.host_failed, signal=host_failed)
        crawler.signals.connect(view.host_refused, signal=host_refused)
        return view

    # -- what it shows -----------------------------------------------------------------

    def status(self, named: list[str] | None = None) -> dict[str, Any]:
        """The snapshot, with the crawl-wide figures only the crawl knows. One without
        named hosts is reused for :data:`REUSE` seconds: every open dashboard and every
        scraper asks, and a snapshot scores every host (0.1 s at 100,000 hosts)."""
        now = time.monotonic()
        if not named and self._last is not None and now - self._last[0] < REUSE:
            return self._last[1]
        snap = self._status(named)
        if not named:
            self._last = (now, snap)
        return snap

    def _open(self) -> tuple[CrawlView, Frontier] | None:
        """The scheduler's view and its frontier; ``None`` under another scheduler, or
        before it opened or after it closed."""
        view = view_of(self.crawler)
        frontier = None if view is None else view.frontier
        return None if view is None or frontier is None else (view, frontier)

    def _point(self) -> Point:
        opened = self._open()
        return Point(
            elapsed=round(time.monotonic() - self._started, 3),
            pages=self.pages,
            quality=self.quality,
            pending=0 if opened is None else len(opened[1]),
            errors=self.errors,
            refusals=self.refusals,
        )

    def sample(self) -> None:
        """One point of the crawl's course (every :data:`SAMPLE_INTERVAL` seconds)."""
        self.history.add(self._point())

    def _status(self, named: list[str] | None) -> dict[str, Any]:
        elapsed = time.monotonic() - self._started
        in_downloader = requests_in_downloader(self.crawler)
        point = self._point()
        crawl = {
            "pages": self.pages,
            "quality": round(self.quality, 6),
            "in_flight": len(in_downloader) if in_downloader is not None else 0,
            "elapsed_s": round(elapsed, 1),
            "pages_per_min": round(60 * self.pages / elapsed, 1) if elapsed > 0 else 0.0,
            "errors": self.errors,
            "refusals": self.refusals,
            **{
                key: None if value is None else round(value, 3)
                for key, value in self.history.rates(point).items()
            },
        }
        opened = self._open()
        if opened is None:  # not this package's scheduler, or not open
            states = dict.fromkeys(STATES, 0)
            return {
                "schema": SCHEMA_VERSION,
                "crawl": crawl,
                "states": states,
                "reasons": {},
                "hosts": [],
                "held_up": [],
                "history": self.history.to_rows(),
            }
        view, frontier = opened
        snap = snapshot(frontier, frontier.now(), top=self.top, named=named or (), crawl=crawl)
        for row in snap["hosts"]:
            row["failures"] = dict(self.failures.get(row["host"], {}))
        seeds = view.seed_rows(self.top)  # TWOLEVEL_RECRAWL
        if seeds is not None:
            snap["seeds"] = seeds
        cluster = view.cluster_status()  # TWOLEVEL_REDIS_URL
        if cluster is not None:
            snap["cluster"] = cluster
        snap["history"] = self.history.to_rows()
        return snap

    def host_detail(self, host: str) -> dict[str, Any] | None:
        """One host's page: its row (state, estimates), its story (sessions, waits,
        failures, refusals; times in seconds before now) and its queue's first URLs;
        ``None`` for a host the frontier does not know."""
        opened = self._open()
        if opened is None:
            return None
        view, frontier = opened
        now = frontier.now()
        snap = snapshot(frontier, now, top=0, named=[host])
        row = next((r for r in snap["hosts"] if r["host"] == host), None)
        if row is None:
            return None
        row["failures"] = dict(self.failures.get(host, {}))
        events = self.events.of(host) if self.events is not None else []
        return {
            "schema": SCHEMA_VERSION,
            "host": host,
            "row": row,
            "timeline": host_timeline(now, view.recent_sessions(host), events),
            "queued_pages": view.queued_pages(host, QUEUED_SHOWN),
        }

    def response_received(self, response: Response, request: Request, spider: Spider) -> None:
        self.pages += 1
        view = view_of(self.crawler)
        if view is not None:
            self.quality += max(0.0, view.quality(request))

    def _clock(self) -> float:
        """The frontier's clock, which the sessions' times are on."""
        opened = self._open()
        return time.monotonic() if opened is None else opened[1].now()

    def host_failed(self, host: str, kind: str, **_: Any) -> None:
        self.failures.setdefault(host, Counter())[kind] += 1
        self.errors += 1
        if self.events is not None:
            self.events.add(host, self._clock(), "failed", kind)

    def host_refused(self, host: str, retry_after: float | None = None, **_: Any) -> None:
        self.refusals += 1
        if self.events is not None:
            wait = "no Retry-After" if retry_after is None else f"Retry-After {retry_after:g} s"
            self.events.add(host, self._clock(), "refused", wait)

    def log_status(self) -> None:
        snap = self.status()
        states, crawl = snap["states"], snap["crawl"]
        reasons = ", ".join(f"{why} {n}" for why, n in snap["reasons"].items()) or "none"
        logger.info(
            "Frontier: %(session)d hosts in session, %(ready)d ready, %(waiting)d waiting, "
            "%(given_up)d given up (%(reasons)s); %(pending)s requests pending; "
            "%(pages)d pages, quality %(quality).2f",
            {
                "session": states["in session"],
                "ready": states["ready"],
                "waiting": states["waiting"],
                "given_up": states["given up"],
                "reasons": reasons,
                "pending": crawl.get("pending", "?"),
                "pages": crawl["pages"],
                "quality": crawl["quality"],
            },
            extra={"spider": getattr(self.crawler, "spider", None)},
        )

    # -- life cycle --------------------------------------------------------------------

    def spider_opened(self, spider: Spider) -> None:
        from twisted.internet import reactor, task

        self._started = time.monotonic()
        if self.interval:
            self._loop = task.LoopingCall(self.log_status)
            self._loop.start(self.interval, now=False)
        if self.port is None:
            return
        from twisted.internet.error import CannotListenError
        from twisted.web.server import Site

        from .web import LiveResource

        self._sampler = task.LoopingCall(self.sample)
        self._sampler.start(SAMPLE_INTERVAL, now=True)
        resource = LiveResource(
            self.token, self.status, self.host_detail, max_hosts=self.prometheus_hosts
        )
        try:
            # Stub gap: listenTCP wants a ServerFactory[_ProtoWithFactory], invariant, which
            # no concrete factory (Site included) matches.
            self._listening = reactor.listenTCP(
                self.port,
                Site(resource),  # type: ignore[arg-type]
                interface=self.host,
            )
        except CannotListenError as exc:
            logger.error(
                "The live view cannot listen on %(host)s:%(port)s (TWOLEVEL_WEB_HOST, "
                "TWOLEVEL_WEB_PORT): %(error)s. The crawl goes on without it.",
                {"host": self.host, "port": self.port, "error": exc.socketError},
                extra={"spider": spider},
            )
            return
        port = self._listening.getHost().port
        shown = f"[{self.host}]" if ":" in self.host else self.host
        self.url = f"http://{shown}:{port}/?token={self.token}"
        logger.info("Live view of this crawl: %(url)s", {"url": self.url}, extra={"spider": spider})

    def spider_closed(self, spider: Spider) -> Any:
        for loop in (self._loop, self._sampler):
            if loop is not None and loop.running:
                loop.stop()
        if self._listening is not None:
            listening, self._listening = self._listening, None
            return listening.stopListening()
        return None
