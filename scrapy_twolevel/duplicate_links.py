"""``DuplicateLinksMiddleware``: drops a callback's links to pages already seen, at once.

Most links a page carries lead to pages the crawl has seen: on the real-server benchmark's
documentation sites, in a crawl's first 45 s, pages carried about 600 links each and 93%
of the requests the spider yielded were duplicates. Stock Scrapy hands each one to every
spider middleware below and to the engine (its ``request_scheduled`` signal) before the
dupefilter drops it, and that is most of a link-heavy crawl's CPU: while it is busy,
responses wait and no new request starts.
Measured on that benchmark (politeness-bound, 60 s, two runs each): with this middleware
the crawl fetched 997-1,180 pages in the first minute instead of 557-642, and gathered
0.47-0.50 of the web's quality instead of 0.39.

It asks the scheduler whether the seen cache already holds the request, a test that
records nothing: a new request still reaches the scheduler, which records it. A dropped
request is logged and counted as the dupefilter does (``dupefilter/filtered``), counted in
``twolevel/seen/filtered_early`` and announced with ``request_dropped``, as a request the
scheduler filtered is; the counts are added once per response, when its output ends.
What differs from a duplicate filtered in the scheduler:

- spider middlewares with a lower order (Scrapy's depth, URL-length and referer ones, and
  a project's own at the usual 543) do not see it, and no ``request_scheduled`` signal is
  sent for it; a middleware there that changes a request's URL, method or body, or sets
  ``dont_filter``, does so after this test: give it an order above 940, or disable this
  middleware;
- only with the two-level scheduler and the seen cache on one machine; in the distributed
  mode (a node's seen set holds its own buckets' keys only) or with another scheduler or
  dupefilter it passes everything on.

``ADDONS = {"scrapy_twolevel.Addon": 0}`` adds it; by hand it is ``SPIDER_MIDDLEWARES =
{"scrapy_twolevel.duplicate_links.DuplicateLinksMiddleware": 940}``; ``None`` there
disables it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any

from scrapy import Request, signals

from ._engine import has_receivers
from .view import view_of

if TYPE_CHECKING:
    from typing import Self

    from scrapy.crawler import Crawler
    from scrapy.http import Response

#: The stat of the duplicates dropped here.
FILTERED_EARLY = "twolevel/seen/filtered_early"


class DuplicateLinksMiddleware:
    """Spider middleware: requests the seen cache already holds go no further."""

    def __init__(self, crawler: Crawler) -> None:
        self._crawler = crawler

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        return cls(crawler)

    def process_spider_output(
        self, response: Response, result: Iterable[Any], spider: Any = None
    ) -> Iterator[Any]:
        test = self._test()
        if test is None:
            yield from result
            return
        try:
            for item in result:
                if not (isinstance(item, Request) and test.drops(item)):
                    yield item
        finally:
            test.count()

    async def process_spider_output_async(
        self, response: Response, result: AsyncIterator[Any], spider: Any = None
    ) -> AsyncIterator[Any]:
        test = self._test()
        if test is None:
            async for item in result:
                yield item
            return
        try:
            async for item in result:
                if not (isinstance(item, Request) and test.drops(item)):
                    yield item
        finally:
            test.count()

    def _test(self) -> _ResponseTest | None:
        """The test for one response's output, or ``None`` (pass everything on): the
        scheduler's backend answers only on one machine with the seen cache."""
        view = view_of(self._crawler)
        drop_if_seen = None if view is None else view.seen_test()
        if drop_if_seen is None:
            return None
        return _ResponseTest(self._crawler, drop_if_seen)


class _ResponseTest:
    """The duplicates of one response's output: dropped one by one, counted once.

    Why per response: a link-heavy page yields thousands of duplicates, and Scrapy's stats
    and signals cost more per call than the test itself (on the real-server benchmark, 9%
    of the crawl's CPU went to counting and announcing them one at a time). The signal is
    sent only when something listens, as a receiver connected during one response's output
    is rare and the next response sees it.
    """

    def __init__(self, crawler: Crawler, drop_if_seen: Callable[[Request], bool]) -> None:
        self._drop_if_seen = drop_if_seen
        self._stats = crawler.stats
        self._send = crawler.signals.send_catch_log
        self._spider = crawler.spider
        self._announce = has_receivers(crawler, signals.request_dropped)
        self.dropped = 0

    def drops(self, request: Request) -> bool:
        if not self._drop_if_seen(request):
            return False
        self.dropped += 1
        if self._announce:
            self._send(signals.request_dropped, request=request, spider=self._spider)
        return True

    def count(self) -> None:
        """Add this response's duplicates to the stats (as the dupefilter's and this
        middleware's own)."""
        if self.dropped and self._stats is not None:
            self._stats.inc_value("dupefilter/filtered", self.dropped)
            self._stats.inc_value(FILTERED_EARLY, self.dropped)
        self.dropped = 0
