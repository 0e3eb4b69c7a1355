"""Serve the test web inside a normal ``scrapy crawl`` and print a summary at the end.

Used by ``example_project`` (the README's demo): enable it in ``EXTENSIONS`` and the crawl
serves a generated web on loopback, seeds :class:`~.spider.TestWebSpider` with it, and ends
with pages fetched, quality gathered, time, and what the server saw (connections, the most
concurrent requests one host received).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from scrapy import signals
from scrapy.exceptions import NotConfigured
from scrapy.utils.defer import maybe_deferred_to_future

from .web import generate_web

if TYPE_CHECKING:
    from typing import Self

    from scrapy import Spider
    from scrapy.crawler import Crawler

    from .server import TestWebServer


class EmbeddedTestWeb:
    """Settings: ``TWOLEVEL_TESTWEB_HOSTS`` (20), ``TWOLEVEL_TESTWEB_PAGES_PER_HOST`` (30),
    ``TWOLEVEL_TESTWEB_SEED`` (0), ``TWOLEVEL_TESTWEB_DELAY_SCALE`` (1.0),
    ``TWOLEVEL_TESTWEB_PORT`` (0: any free port; fix it to resume a JOBDIR crawl)."""

    def __init__(self, crawler: Crawler, server: TestWebServer, port: int) -> None:
        self.crawler = crawler
        self.server = server
        self.port = port
        self.quality = 0.0
        self.pages = 0
        self.time_to_80: float | None = None
        self.summary = ""
        self.started = time.monotonic()
        self.total_quality = sum(
            p.quality for p in server.web.pages if p.id in server.web.reachable()
        )

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        settings = crawler.settings
        hosts = settings.getint("TWOLEVEL_TESTWEB_HOSTS", 20)
        pages = settings.getint("TWOLEVEL_TESTWEB_PAGES_PER_HOST", 30)
        if hosts < 1 or pages < 1:
            raise NotConfigured(
                f"TWOLEVEL_TESTWEB_HOSTS={hosts} and TWOLEVEL_TESTWEB_PAGES_PER_HOST={pages} "
                "must both be >= 1"
            )
        from twisted.internet import reactor

        from .server import TestWebServer

        web = generate_web(hosts, pages, seed=settings.getint("TWOLEVEL_TESTWEB_SEED", 0))
        server = TestWebServer(
            web, delay_scale=settings.getfloat("TWOLEVEL_TESTWEB_DELAY_SCALE", 1.0), reactor=reactor
        )
        port = server.start(settings.getint("TWOLEVEL_TESTWEB_PORT", 0))
        ext = cls(crawler, server, port)
        crawler.signals.connect(ext.spider_opened, signals.spider_opened)
        crawler.signals.connect(ext.item_scraped, signals.item_scraped)
        crawler.signals.connect(ext.spider_closed, signals.spider_closed)
        crawler.signals.connect(ext.engine_stopped, signals.engine_stopped)
        return ext

    def spider_opened(self, spider: Spider) -> None:
        if not getattr(spider, "start_urls", None):
            spider.start_urls = self.server.seeds_urls
        self.started = time.monotonic()

    def item_scraped(self, item: Any) -> None:
        self.pages += 1
        self.quality += float(item.get("quality") or 0.0)
        if self.time_to_80 is None and self.quality >= 0.8 * self.total_quality:
            self.time_to_80 = time.monotonic() - self.started

    async def spider_closed(self, spider: Spider, reason: str) -> None:
        elapsed = time.monotonic() - self.started
        stats = self.server.stats
        per_host = stats.max_concurrent_requests_per_host()
        reachable = len(self.server.web.reachable())
        self.summary = (
            f"\n=== scrapy_twolevel demo ({reason}) ===\n"
            f"policy:           {self.crawler.stats.get_value('twolevel/policy', 'stock Scrapy')}\n"
            f"pages fetched:    {self.pages} of {reachable} reachable, "
            f"on {len(self.server.web.hosts)} hosts (test web on port {self.port})\n"
            f"quality gathered: {self.quality:.2f} of {self.total_quality:.2f} "
            f"({100 * self.quality / max(self.total_quality, 1e-9):.0f}%)\n"
            f"time:             {elapsed:.1f} s"
            + (f"; 80% of the quality after {self.time_to_80:.1f} s\n" if self.time_to_80 else "\n")
            + f"connections:      {stats.total.connections_total}; most concurrent requests "
            f"to one host: {max(per_host.values(), default=0)}\n"
        )
        await maybe_deferred_to_future(self.server.stop())

    def engine_stopped(self) -> None:
        """Print last, after Scrapy's stats dump."""
        print(self.summary, flush=True)
