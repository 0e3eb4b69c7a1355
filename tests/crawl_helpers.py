"""Components loaded by the subprocess crawls of test_crawl.py (found through PYTHONPATH)."""

from __future__ import annotations

from scrapy.exceptions import IgnoreRequest

from scrapy_twolevel._engine import requests_in_downloader, wake_engine


class InternalsProbe:
    """Checks, inside a real crawl, the two Scrapy internals scrapy_twolevel relies on."""

    def __init__(self, crawler):
        self.crawler = crawler

    @classmethod
    def from_crawler(cls, crawler):
        return cls(crawler)

    def process_request(self, request):
        stats = self.crawler.stats
        stats.inc_value("probe/requests")
        active = requests_in_downloader(self.crawler)
        if active is not None and request in active:
            stats.inc_value("probe/in_downloader")
        if wake_engine(self.crawler):
            stats.inc_value("probe/woke_engine")


class DropSomePaths:
    """Raises IgnoreRequest before download for paths in DROP_PATHS (like OffsiteMiddleware)."""

    def __init__(self, paths):
        self.paths = set(paths)

    @classmethod
    def from_crawler(cls, crawler):
        return cls(crawler.settings.getlist("DROP_PATHS"))

    def process_request(self, request):
        if request.url.split("/", 3)[-1] in self.paths:
            raise IgnoreRequest(f"dropped {request.url}")


class KillAfterResponses:
    """Extension: SIGKILL this crawl process after KILL_AFTER_RESPONSES responses.

    A kill -9 at a known point of the crawl, decided inside the crawl (no sleeping in the
    test): nothing is flushed or closed, as after a crash.
    """

    def __init__(self, count):
        self.count = count
        self.seen = 0

    @classmethod
    def from_crawler(cls, crawler):
        import scrapy.signals

        ext = cls(crawler.settings.getint("KILL_AFTER_RESPONSES"))
        crawler.signals.connect(ext.response_received, signal=scrapy.signals.response_received)
        return ext

    def response_received(self, **kwargs):
        import os
        import signal

        self.seen += 1
        if self.seen == self.count:
            os.kill(os.getpid(), signal.SIGKILL)
