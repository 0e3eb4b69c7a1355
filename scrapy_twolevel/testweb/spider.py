"""A spider for the test web, and a helper that runs one crawl against an in-process server.

The spider turns each link's ``data-quality`` into the request priority (see
:func:`quality_to_priority`) and the ``twolevel_quality`` meta key, so a scheduler that ranks
by priority sees the web's true page quality without knowing about the test web.
"""

from __future__ import annotations

import json
import os
import signal
from collections.abc import AsyncIterator, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import scrapy
from scrapy import signals
from scrapy.crawler import Crawler
from scrapy.http import Response

from .server import ServerStats, TestWebServer
from .web import WebSpec, quality_to_priority

if TYPE_CHECKING:
    from scrapy.crawler import CrawlerProcessBase  # Scrapy >= 2.14

__all__ = [
    "SEEDS_SETTING",
    "CrawlResult",
    "TestWebSpider",
    "quality_to_priority",
    "run_crawl",
]

#: Setting read by :class:`TestWebSpider` when no ``start_urls`` argument is given.
SEEDS_SETTING = "TWOLEVEL_TESTWEB_SEEDS"
#: Setting :func:`run_crawl` sets to every host's sitemap URL (for a ``SitemapSpider``).
SITEMAPS_SETTING = "TWOLEVEL_TESTWEB_SITEMAPS"
#: Quality given to seed requests (pages have qualities in (0, 1]).
SEED_QUALITY = 1.0


def _split_urls(value: str | Iterable[str] | None) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [u.strip() for u in value.split(",") if u.strip()]
    return list(value)


class TestWebSpider(scrapy.Spider):
    """Follows every link of the test web and yields one item per page.

    Start URLs come from the ``start_urls`` spider argument (a list, or a comma-separated
    string as ``-a start_urls=...`` gives), else from the ``TWOLEVEL_TESTWEB_SEEDS`` setting.
    Items: ``{"url", "quality", "host"}`` with the quality the page itself declares.

    Seeds get the top quality (:data:`SEED_QUALITY`): their own quality is unknown until
    fetched, and they are the entry points to every host, so every policy that orders by
    quality fetches them first.
    """

    __test__ = False  # not a pytest test class, despite the name
    name = "testweb"

    def __init__(
        self, *args: Any, start_urls: str | Iterable[str] | None = None, **kwargs: Any
    ) -> None:
        super().__init__(*args, **kwargs)
        self.start_urls = _split_urls(start_urls)

    @classmethod
    def from_crawler(cls, crawler: Crawler, *args: Any, **kwargs: Any) -> TestWebSpider:
        spider = super().from_crawler(crawler, *args, **kwargs)
        if not spider.start_urls:
            spider.start_urls = crawler.settings.getlist(SEEDS_SETTING)
        return spider

    async def start(self) -> AsyncIterator[scrapy.Request]:
        # dont_filter stays False: a seed linked from another page is fetched only once.
        for url in self.start_urls:
            yield scrapy.Request(
                url,
                callback=self.parse,
                priority=quality_to_priority(SEED_QUALITY),
                meta={"twolevel_quality": SEED_QUALITY},
            )

    def parse(self, response: Response, **kwargs: Any) -> Iterator[Any]:
        quality = response.css('meta[name="twolevel-quality"]::attr(content)').get()
        yield {
            "url": response.url,
            "quality": float(quality) if quality is not None else None,
            "host": urlsplit(response.url).hostname,
        }
        for anchor in response.css("a[href]"):
            href = anchor.attrib["href"]
            raw = anchor.attrib.get("data-quality")
            if raw is None:
                yield response.follow(href, callback=self.parse)
                continue
            q = float(raw)
            yield response.follow(
                href,
                callback=self.parse,
                priority=quality_to_priority(q),
                meta={"twolevel_quality": q},
            )


@dataclass
class CrawlResult:
    """What one :func:`run_crawl` produced: server-side counts, items and Scrapy's stats."""

    server: ServerStats
    items: list[dict[str, Any]]
    crawl_stats: dict[str, Any]
    port: int

    def to_dict(self) -> dict[str, Any]:
        """JSON-able form (for passing a result out of a subprocess)."""
        return {
            "server": self.server.to_dict(),
            "items": self.items,
            "crawl_stats": self.crawl_stats,
            "port": self.port,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> CrawlResult:
        """Inverse of :meth:`to_dict`."""
        return cls(
            server=ServerStats.from_dict(data["server"]),
            items=list(data["items"]),
            crawl_stats=dict(data["crawl_stats"]),
            port=data["port"],
        )


_DEFAULT_SETTINGS = {
    "ROBOTSTXT_OBEY": False,
    "TELNETCONSOLE_ENABLED": False,
    "LOG_LEVEL": "WARNING",
}


def _web_settings(web: WebSpec) -> dict[str, Any]:
    """What crawling ``web`` needs: a resolver for its host names, if it uses any.

    ``TWISTED_DNS_RESOLVER``, not the deprecated ``DNS_RESOLVER`` (Scrapy 2.19 warns on it).
    """
    if not web.uses_hostnames:
        return {}
    from scrapy.settings import default_settings

    from .resolver import HOSTS_MAP_SETTING, TestWebResolver

    # TWISTED_DNS_RESOLVER is Scrapy 2.15+; before, DNS_RESOLVER (deprecated since).
    name = "TWISTED_DNS_RESOLVER"
    if not hasattr(default_settings, name):
        name = "DNS_RESOLVER"
    return {
        name: f"{TestWebResolver.__module__}.{TestWebResolver.__qualname__}",
        HOSTS_MAP_SETTING: web.hosts_map(),
    }


def run_crawl(
    web: WebSpec,
    settings: Mapping[str, Any] | None = None,
    *,
    delay_scale: float = 1.0,
    spider_cls: type[scrapy.Spider] = TestWebSpider,
    spider_kwargs: Mapping[str, Any] | None = None,
    port: int = 0,
    interrupt_after: int | None = None,
    extra_seeds: Iterable[str] = (),
) -> CrawlResult:
    """Serve ``web`` and crawl it in this process, on one reactor; blocks until done.

    Starts a reactor, so call it once per process (tests run it in a subprocess, e.g. via
    ``python -m scrapy_twolevel.testweb crawl``). ``settings`` override the quiet defaults
    (no robots.txt, no telnet, WARNING logs); the seeds go in ``TWOLEVEL_TESTWEB_SEEDS``.
    When the web names its hosts, the test resolver is installed with the web's names
    (``TWISTED_DNS_RESOLVER``, ``TWOLEVEL_TESTWEB_HOSTS_MAP``; ``settings`` may override).

    ``port`` fixes the server's port (a resumed JOBDIR crawl needs its URLs to stay valid).
    ``interrupt_after=N`` sends this process a real SIGINT once N responses have arrived:
    Scrapy's own Ctrl-C path, a graceful stop. ``extra_seeds`` are crawled after the web's.
    """
    AsyncCrawlerProcess: type[CrawlerProcessBase]
    try:
        from scrapy.crawler import AsyncCrawlerProcess
    except ImportError:  # Scrapy < 2.14
        from scrapy.crawler import CrawlerProcess as AsyncCrawlerProcess

    # AsyncCrawlerProcess installs the asyncio reactor; importing the reactor any earlier
    # would install Twisted's default one instead.
    # The resolver is built from the process's settings, not the crawler's: set it here.
    process = AsyncCrawlerProcess(
        {
            **_DEFAULT_SETTINGS,
            **_web_settings(web),
            **(settings or {}),
            "TWISTED_REACTOR_ENABLED": True,
        }
    )
    if AsyncCrawlerProcess.__name__ == "CrawlerProcess":
        # Scrapy < 2.14 installs TWISTED_REACTOR only once the crawl starts: install it now,
        # before the import below would install Twisted's default one.
        from scrapy.utils.reactor import install_reactor

        install_reactor(process.settings["TWISTED_REACTOR"], process.settings["ASYNCIO_EVENT_LOOP"])
    from twisted.internet import reactor

    server = TestWebServer(web, delay_scale=delay_scale, reactor=reactor)
    port = server.start(port)
    reactor.addSystemEventTrigger("before", "shutdown", server.stop)

    crawler = process.create_crawler(spider_cls)
    crawler.settings.set(SEEDS_SETTING, [*server.seeds_urls, *extra_seeds], priority="cmdline")
    crawler.settings.set(SITEMAPS_SETTING, server.sitemap_urls, priority="cmdline")
    items: list[dict[str, Any]] = []

    def on_item(item: Any) -> None:
        items.append(dict(item))

    crawler.signals.connect(on_item, signal=signals.item_scraped, weak=False)
    if interrupt_after is not None:
        received = 0

        def on_response(**kwargs: Any) -> None:
            nonlocal received
            received += 1
            if received == interrupt_after:
                os.kill(os.getpid(), signal.SIGINT)

        crawler.signals.connect(on_response, signal=signals.response_received, weak=False)
    process.crawl(crawler, **(spider_kwargs or {}))
    process.start()
    assert crawler.stats is not None
    crawl_stats = json.loads(json.dumps(crawler.stats.get_stats(), default=str))
    return CrawlResult(server=server.stats, items=items, crawl_stats=crawl_stats, port=port)
