"""``TopicMiddleware``: the spider middleware of topics (``TWOLEVEL_TOPICS``).

A page is relevant to its topic when its callback yields an item that Scrapy scrapes (the
scheduler hears ``item_scraped``), or when the callback sets
``response.meta["twolevel_relevant"] = True``: this middleware sees that once the
callback's output is consumed and sends :data:`~scrapy_twolevel.signals.page_relevant`.
The scheduler's side of topics is :mod:`scrapy_twolevel.glue.topic_tracker`.
``ADDONS = {"scrapy_twolevel.Addon": 0}`` adds it; by hand it is
``SPIDER_MIDDLEWARES = {"scrapy_twolevel.topics.TopicMiddleware": 960}``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable, Iterator
from typing import TYPE_CHECKING, Any, ClassVar

from scrapy.exceptions import NotConfigured

from . import meta
from .components import TOPIC_MIDDLEWARE_ROLE
from .config import topic_specs
from .signals import page_relevant

if TYPE_CHECKING:
    from typing import Self

    from scrapy.crawler import Crawler
    from scrapy.http import Response
    from scrapy.signalmanager import SignalManager


class TopicMiddleware:
    """Spider middleware: a page whose callback set ``response.meta["twolevel_relevant"]``
    is relevant to its topic. Inert (``NotConfigured``) without ``TWOLEVEL_TOPICS``."""

    #: What the start-up checks (:mod:`scrapy_twolevel.glue.preflight`) look for.
    twolevel_role: ClassVar[str] = TOPIC_MIDDLEWARE_ROLE

    def __init__(self, signals: SignalManager) -> None:
        self._signals = signals

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        if topic_specs(crawler.settings, getattr(crawler, "spidercls", None)) is None:
            raise NotConfigured("no TWOLEVEL_TOPICS")
        return cls(crawler.signals)

    def process_spider_output(
        self, response: Response, result: Iterable[Any], spider: Any = None
    ) -> Iterator[Any]:
        yield from result
        self._check(response)

    async def process_spider_output_async(
        self, response: Response, result: AsyncIterator[Any], spider: Any = None
    ) -> AsyncIterator[Any]:
        async for item in result:
            yield item
        self._check(response)

    def _check(self, response: Response) -> None:
        if response.meta.get(meta.RELEVANT):
            self._signals.send_catch_log(page_relevant, request=response.request)
