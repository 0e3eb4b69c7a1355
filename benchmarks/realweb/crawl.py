"""One crawl of the real web in a process of its own: ``python -m realweb.crawl CONFIG``.

``CONFIG`` is a JSON file: ``settings`` (Scrapy settings of the variant), ``seeds`` (each
site's start page), ``priorities`` (host address -> {page path: priority}) and ``output``
(where the result goes: the crawl's stats, its CPU seconds from the spider's opening to
its closing, the crawl's own work without Python's start-up, and ``cpu_series``: the
process's CPU seconds sampled every :data:`SAMPLE_EVERY` s with the wall-clock time, from
which the benchmark fits the CPU a page and a byte cost, :func:`realweb.cpu_model.fit`).

:class:`RealWebSpider` follows what a documentation crawler follows: ``a`` and ``area``
links on the same site that lead to HTML pages (``dir/`` read as ``dir/index.html``, as
nginx serves it), each with ``priority`` = the page's quality (:mod:`realweb.corpus`) in
millionths of the best page's. It keeps no items: the crawl's output is what nginx served.
"""

from __future__ import annotations

import json
import resource
import sys
import threading
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import scrapy
from scrapy import signals

from realweb.corpus import canonical_path

#: Seconds between two samples of the process's CPU time.
SAMPLE_EVERY = 0.25


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


class CpuSampler(threading.Thread):
    """``(wall-clock time, CPU seconds)`` of this process every :data:`SAMPLE_EVERY` s."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.samples: list[tuple[float, float]] = []
        self.stopping = threading.Event()

    def run(self) -> None:
        while not self.stopping.wait(SAMPLE_EVERY):
            self.samples.append((time.time(), _cpu()))


class RealWebSpider(scrapy.Spider):
    name = "realweb"

    def __init__(
        self, seeds: list[str], priorities: dict[str, dict[str, int]], **kwargs: Any
    ) -> None:
        super().__init__(**kwargs)
        self.start_urls = seeds
        self.priorities = priorities
        self.marks: dict[str, float] = {}

    @classmethod
    def from_crawler(cls, crawler: Any, *args: Any, **kwargs: Any) -> RealWebSpider:
        spider = super().from_crawler(crawler, *args, **kwargs)
        crawler.signals.connect(spider.opened, signals.spider_opened)
        crawler.signals.connect(spider.closed_, signals.spider_closed)
        return spider

    async def start(self):  # type: ignore[override]
        for url in self.start_urls:
            host = urlsplit(url).hostname or ""
            path = urlsplit(url).path.lstrip("/")
            yield scrapy.Request(url, priority=self.priorities[host].get(path, 0))

    def opened(self, spider: Any = None) -> None:
        self.marks["cpu_open"], self.marks["wall_open"] = _cpu(), time.monotonic()

    def closed_(self, spider: Any = None, reason: str = "") -> None:
        self.marks["cpu_close"], self.marks["wall_close"] = _cpu(), time.monotonic()

    def parse(self, response: Any) -> Any:
        if not isinstance(response, scrapy.http.TextResponse):
            return
        parts = urlsplit(response.url)
        priorities = self.priorities.get(parts.hostname or "", {})
        for href in response.css("a::attr(href), area::attr(href)").getall():
            try:
                link = urlsplit(response.urljoin(href.strip()))
            except ValueError:
                continue
            if link.netloc != parts.netloc or link.scheme != parts.scheme:
                continue
            path = canonical_path(link.path)
            if path is not None:
                yield scrapy.Request(
                    f"{parts.scheme}://{link.netloc}/{path}", priority=priorities.get(path, 0)
                )


def main(config_path: str) -> int:
    from scrapy.crawler import CrawlerProcess

    config = json.loads(Path(config_path).read_text())
    process = CrawlerProcess(settings=config["settings"])
    crawler = process.create_crawler(RealWebSpider)
    process.crawl(crawler, seeds=config["seeds"], priorities=config["priorities"])
    sampler = CpuSampler()
    sampler.start()
    process.start()
    sampler.stopping.set()
    spider = crawler.spider
    assert crawler.stats is not None and spider is not None
    marks = spider.marks
    import scrapy_twolevel

    result = {
        "scrapy_twolevel_from": str(Path(scrapy_twolevel.__file__).parent),
        "stats": {k: v for k, v in crawler.stats.get_stats().items() if _plain(v)},
        "cpu_s": marks["cpu_close"] - marks["cpu_open"],
        "wall_s": marks["wall_close"] - marks["wall_open"],
        "cpu_series": [[round(t, 3), round(c, 3)] for t, c in sampler.samples],
    }
    Path(config["output"]).write_text(json.dumps(result, default=str))
    return 0


def _plain(value: Any) -> bool:
    return isinstance(value, int | float | str | bool)


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1]))
