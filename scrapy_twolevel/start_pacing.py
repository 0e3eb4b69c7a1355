"""``StartPacingMiddleware``: the crawl goes on while a long ``start()`` is read.

Scrapy's engine reads the spider's start requests in a loop that lets the reactor run only
when the downloader has room; once it is full, the loop reads ``start()`` to its end
without handing the reactor a turn. With a pre-loaded frontier of a million URLs no
response is handled meanwhile: on the broad-crawl benchmark, two minutes without a page at
100,000 hosts (:doc:`broad`). This middleware reads ``start()`` in slices: after
``SLICE`` seconds of it, while the scheduler has requests to hand out, it pauses long
enough that reading takes ``TWOLEVEL_START_SHARE`` of the time (a third by default) and the
crawl the rest; a pause that ran late (the reactor was busy) makes the next slice as
much longer, up to ``MAX_SLICE``. ``1`` never pauses (Scrapy's behaviour); with another
scheduler it never pauses either.

``ADDONS = {"scrapy_twolevel.Addon": 0}`` adds it; by hand it is ``SPIDER_MIDDLEWARES =
{"scrapy_twolevel.start_pacing.StartPacingMiddleware": 10}``.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from scrapy.utils.defer import maybe_deferred_to_future
from twisted.internet.task import deferLater

from .config import START_SHARE
from .view import view_of

if TYPE_CHECKING:
    from typing import Self

    from scrapy.crawler import Crawler

#: Seconds of reading ``start()`` between two pauses: long enough that a pause's reactor
#: turn is not most of the work, short enough that responses wait at most this long.
SLICE = 0.05
#: The longest slice, after a pause that ran late (responses wait at most this long).
MAX_SLICE = 1.0


class StartPacingMiddleware:
    """Spider middleware: reads ``start()`` in slices, see the module docstring."""

    def __init__(self, crawler: Crawler, share: float, clock: Any = time.monotonic) -> None:
        self._crawler = crawler
        self._clock = clock
        #: Seconds of pause after each slice.
        self.pause = SLICE * (1.0 - share) / share

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        return cls(crawler, START_SHARE.read(crawler.settings))

    async def process_start(self, start: AsyncIterator[Any]) -> AsyncIterator[Any]:
        if not self.pause:
            async for item in start:
                yield item
            return
        clock = self._clock
        slice_end = clock() + SLICE
        async for item in start:
            yield item
            now = clock()
            if now < slice_end:
                continue
            length = SLICE
            if self._work_waits():
                await self._sleep(self.pause)
                # A busy reactor runs the pause's timer late (a turn handles every response
                # ready by then): the next slice is as much longer, so reading keeps its
                # share of the time instead of a fraction of it.
                length = min(SLICE * (clock() - now) / self.pause, MAX_SLICE)
            slice_end = clock() + max(length, SLICE)

    def _work_waits(self) -> bool:
        """Whether the scheduler has requests to hand out (else a pause gains nothing)."""
        view = view_of(self._crawler)
        frontier = None if view is None else view.frontier
        return frontier is not None and len(frontier) > 0

    async def _sleep(self, seconds: float) -> None:
        from twisted.internet import reactor

        stats = self._crawler.stats
        if stats is not None:
            stats.inc_value("twolevel/start_pauses")
        await maybe_deferred_to_future(deferLater(reactor, seconds, lambda: None))  # type: ignore[arg-type]
