"""One crawl of the generated web in a process of its own: ``python -m broadweb.crawl CONFIG``.

``CONFIG`` is a JSON file: ``settings`` (the Scrapy settings of the run, the scheduler's
included), ``web`` (``hosts``, ``pending``, ``seed``: the :class:`~broadweb.web.BroadWeb`),
``port`` (the server's) and ``marks`` (a file the crawl appends JSON lines to: events from
the spider, and the crawl's counters once a second from :class:`Ticker`). The process runs
until it is killed: the driver stops it with ``SIGKILL`` at the end of its window.

The same :class:`BroadSpider` runs for every scheduler: its ``start()`` yields the web's
pre-loaded frontier (:meth:`BroadWeb.start_pages`), as a plain spider yields its seed
list (no pacing: how the engine interleaves the pre-load with the crawl is part of what is
measured), and ``parse`` finds the page's links with one regular expression over the body
and yields a request for each. Names resolve through :class:`WildcardResolver`.
"""

from __future__ import annotations

import collections
import gc
import json
import re
import sys
import time
from collections.abc import AsyncIterator, Iterator, Sequence
from pathlib import Path
from typing import Any, TextIO

import scrapy
from scrapy import signals
from scrapy.crawler import AsyncCrawlerProcess
from twisted.internet import defer, task
from twisted.internet.error import DNSLookupError
from twisted.internet.interfaces import IResolverSimple
from zope.interface import implementer

from broadweb.web import DOMAIN, BroadWeb

_LINK = re.compile(rb'href="(http://[^"]+)"')
#: Counters the ticker writes once a second (those a scheduler does not set stay out).
TICK_STATS = (
    "scheduler/enqueued",
    "scheduler/dequeued",
    "response_received_count",
    "downloader/request_count",
    "dupefilter/filtered",
    "log_count/ERROR",
)


#: Start requests between two ``start_progress`` marks (what a kill during the pre-load
#: may have read: see ``check_resume`` in broad_crawl.py).
PROGRESS_EVERY = 10_000


class Marks:
    """The marks file: one JSON object per line, each stamped with the wall time (the
    spider and the ticker each append through their own, a line per write)."""

    def __init__(self, path: str) -> None:
        self.out: TextIO = open(path, "a", buffering=1, encoding="utf-8")

    def write(self, event: str, **data: Any) -> None:
        self.out.write(json.dumps({"event": event, "t": time.time(), **data}) + "\n")


@implementer(IResolverSimple)
class WildcardResolver:
    """Every ``*.broad.test`` name (and ``127.0.0.1``) is 127.0.0.1; anything else fails.

    One suffix test instead of a map of 100,000 names. Answers are constant, so nothing is
    put in :data:`scrapy.resolver.dnscache` (which only per-IP slots read).
    """

    def __init__(self, reactor: Any) -> None:
        self.reactor = reactor

    @classmethod
    def from_crawler(cls, crawler: Any, reactor: Any) -> WildcardResolver:
        return cls(reactor)

    def install_on_reactor(self) -> None:
        self.reactor.installResolver(self)

    def getHostByName(self, name: str, timeout: Sequence[int] = ()) -> defer.Deferred[str]:
        if name.endswith("." + DOMAIN) or name == "127.0.0.1":
            return defer.succeed("127.0.0.1")
        return defer.fail(DNSLookupError(f"{name!r} is not in *.{DOMAIN}"))


class BroadSpider(scrapy.Spider):
    name = "broad"

    def __init__(self, web: dict[str, int], port: int, marks: Marks, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.web = BroadWeb(web["hosts"], web["pending"], web["seed"])
        self.port = port
        self.marks = marks

    def start_requests(self) -> Iterator[scrapy.Request]:
        """The pre-loaded frontier, host-interleaved; marks its beginning, its progress
        (every ``PROGRESS_EVERY`` requests) and its end."""
        self.marks.write("start_begun")
        count = 0
        url = self.web.url
        for host, page in self.web.start_pages():
            yield scrapy.Request(url(host, page, self.port))
            count += 1
            if not count % PROGRESS_EVERY:
                self.marks.write("start_progress", yielded=count)
        self.marks.write("start_done", yielded=count)

    async def start(self) -> AsyncIterator[Any]:
        for request in self.start_requests():
            yield request

    def parse(self, response: Any) -> Iterator[scrapy.Request]:
        for found in _LINK.finditer(response.body):
            yield scrapy.Request(found.group(1).decode())


class Ticker:
    """Writes :data:`TICK_STATS` to the marks file once a second (an extension)."""

    def __init__(self, crawler: Any, marks: Marks) -> None:
        self.stats = crawler.stats
        self.marks = marks
        self.loop = task.LoopingCall(self.tick)
        self.census_every = crawler.settings.getfloat("BROADWEB_CENSUS", 0.0)
        self.census_loop = task.LoopingCall(self.census)
        self.gc_seconds = [0.0, 0.0, 0.0]
        self._gc_began = 0.0
        crawler.signals.connect(self.opened, signals.spider_opened)

    @classmethod
    def from_crawler(cls, crawler: Any) -> Ticker:
        return cls(crawler, Marks(crawler.settings["BROADWEB_MARKS"]))

    def opened(self, spider: Any) -> None:
        import scrapy_twolevel

        self.marks.write("opened", scrapy_twolevel_from=str(Path(scrapy_twolevel.__file__).parent))
        self.loop.start(1.0, now=True)
        if self.census_every > 0:
            gc.callbacks.append(self._time_collection)
            self.census_loop.start(self.census_every, now=False)

    def _time_collection(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._gc_began = time.perf_counter()
        else:
            self.gc_seconds[info["generation"]] += time.perf_counter() - self._gc_began

    def tick(self) -> None:
        get = self.stats.get_value
        self.marks.write("tick", **{k: get(k) for k in TICK_STATS if get(k) is not None})

    def census(self) -> None:
        """The collector's view of the heap (``--set BROADWEB_CENSUS=SECONDS``): objects it
        tracks by type, its generation counts and collections so far."""
        kinds = collections.Counter(type(o).__name__ for o in gc.get_objects())
        self.marks.write(
            "census",
            tracked=sum(kinds.values()),
            top=kinds.most_common(25),
            counts=gc.get_count(),
            stats=gc.get_stats(),
            frozen=gc.get_freeze_count(),
            gc_seconds=self.gc_seconds,
            cpu_seconds=time.process_time(),
        )


def main(argv: list[str]) -> int:
    config = json.loads(Path(argv[0]).read_text())
    marks = Marks(config["marks"])
    settings = {
        **config["settings"],
        "TWISTED_DNS_RESOLVER": "broadweb.crawl.WildcardResolver",
        "EXTENSIONS": {"broadweb.crawl.Ticker": 0},
        "BROADWEB_MARKS": config["marks"],
    }
    process = AsyncCrawlerProcess(settings)
    process.crawl(BroadSpider, web=config["web"], port=config["port"], marks=marks)
    process.start()
    marks.write("finished")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
