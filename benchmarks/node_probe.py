"""Extensions loaded into the node processes of ``benchmarks/distributed.py``.

``FetchLog``: appends ``<time> <url>`` per response to ``PROBE_FETCH_LOG`` (unbuffered, so
the log of a killed node survives). ``KillAfter``: SIGKILLs the node after
``PROBE_KILL_AFTER`` responses (0: never), a crash at a known point of the crawl.
"""

from __future__ import annotations

import os
import signal
import time

from scrapy import signals


class FetchLog:
    def __init__(self, crawler, path: str, kill_after: int) -> None:
        self.crawler = crawler
        self.path = path
        self.fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        self.kill_after = kill_after
        self.count = 0

    @classmethod
    def from_crawler(cls, crawler):
        ext = cls(
            crawler,
            crawler.settings["PROBE_FETCH_LOG"],
            crawler.settings.getint("PROBE_KILL_AFTER"),
        )
        crawler.signals.connect(ext.response_received, signal=signals.response_received)
        return ext

    def response_received(self, response, **kwargs) -> None:
        os.write(self.fd, f"{time.time():.6f} {response.url}\n".encode())
        self.count += 1
        if self.count == self.kill_after:
            record_leases(self.crawler, self.path + ".leases")
            os.kill(os.getpid(), signal.SIGKILL)


def record_leases(crawler, path: str) -> None:
    """Write how many requests the node would have fetched again by others if killed now
    (twolevel: its outstanding leases; another scheduler: the engine's requests in
    progress), for the re-fetch bound."""
    slot = getattr(crawler.engine, "_slot", None)
    cluster = getattr(getattr(slot, "scheduler", None), "cluster", None)
    if cluster is not None:
        count = cluster.leases_outstanding()
    else:
        count = len(getattr(slot, "inprogress", ()))
    with open(path, "w") as out:
        out.write(str(count))


class StatsFile:
    """Writes the node's stats as JSON to ``STATS_FILE`` when the spider closes."""

    def __init__(self, crawler) -> None:
        self.crawler = crawler

    @classmethod
    def from_crawler(cls, crawler):
        ext = cls(crawler)
        crawler.signals.connect(ext.spider_closed, signal=signals.spider_closed)
        return ext

    def spider_closed(self, spider, reason) -> None:
        import json

        stats = {**self.crawler.stats.get_stats(), "finish_reason": reason}
        with open(self.crawler.settings["STATS_FILE"], "w") as out:
            json.dump(stats, out, default=str)
