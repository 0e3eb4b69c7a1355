"""``SeedMiddleware``: the spider middleware of seed recrawling (``TWOLEVEL_RECRAWL``).

Mark seed pages in the spider with ``meta={"twolevel_seed": True}`` (the key is the URL's
host and first path segment) or ``meta={"twolevel_seed": "site/sport"}``. This middleware
tags every request a seed page's callback yields with ``meta["twolevel_found_on_seed"]``
and reports seed pages and the articles found on them by signals; the scheduler's seed
planner (:mod:`scrapy_twolevel.glue.seed_planner`, where the whole story is told) plans
the refetches. ``ADDONS = {"scrapy_twolevel.Addon": 0}`` adds it; by hand it is
``SPIDER_MIDDLEWARES = {"scrapy_twolevel.seeds.SeedMiddleware": 950}``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable, Iterator
from typing import TYPE_CHECKING, Any, ClassVar

from scrapy import Request
from scrapy.exceptions import NotConfigured

from . import meta
from .components import SEED_MIDDLEWARE_ROLE
from .config import RecrawlConfig
from .signals import article_fetched, seed_page_failed, seed_page_received

if TYPE_CHECKING:
    from typing import Self

    from scrapy.crawler import Crawler
    from scrapy.http import Response
    from scrapy.signalmanager import SignalManager


class SeedMiddleware:
    """Spider middleware: reports seed pages and the articles found on them.

    Inert unless ``TWOLEVEL_RECRAWL`` is on (``NotConfigured``). It only tags requests and
    sends signals (:mod:`scrapy_twolevel.signals`); the scheduler's
    :class:`~scrapy_twolevel.glue.seed_planner.SeedPlanner`
    does the rest.
    """

    #: What the start-up checks (:mod:`scrapy_twolevel.glue.preflight`) look for.
    twolevel_role: ClassVar[str] = SEED_MIDDLEWARE_ROLE

    def __init__(self, signals: SignalManager) -> None:
        self._signals = signals

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        if not RecrawlConfig.from_settings(crawler.settings).enabled:
            raise NotConfigured("TWOLEVEL_RECRAWL is off")
        return cls(crawler.signals)

    def process_spider_input(self, response: Response, spider: Any = None) -> None:
        tags = response.meta
        if tags.get(meta.SEED_FETCH) is not None:
            self._signals.send_catch_log(seed_page_received, request=response.request)
        if tags.get(meta.FOUND_ON_SEED):
            self._signals.send_catch_log(
                article_fetched, request=response.request, response=response
            )

    def process_spider_output(
        self, response: Response, result: Iterable[Any], spider: Any = None
    ) -> Iterator[Any]:
        tag = self._tag(response)
        if tag is None:
            yield from result
            return
        for item in result:
            if isinstance(item, Request):
                meta.set_own(item.meta, item.url, meta.FOUND_ON_SEED, tag)
            yield item

    async def process_spider_output_async(
        self, response: Response, result: AsyncIterator[Any], spider: Any = None
    ) -> AsyncIterator[Any]:
        tag = self._tag(response)
        async for item in result:
            if tag is not None and isinstance(item, Request):
                meta.set_own(item.meta, item.url, meta.FOUND_ON_SEED, tag)
            yield item

    def process_spider_exception(
        self, response: Response, exception: BaseException, spider: Any = None
    ) -> None:
        if response.meta.get(meta.SEED_FETCH) is not None:
            self._signals.send_catch_log(
                seed_page_failed, request=response.request, exception=exception
            )

    @staticmethod
    def _tag(response: Response) -> list[str] | None:
        tag = response.meta.get(meta.SEED_FETCH)
        return list(tag) if tag else None
