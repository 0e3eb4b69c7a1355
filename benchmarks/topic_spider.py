"""The spider of ``benchmarks/topics.py``: the test web with a topic per host.

Each request gets ``meta["twolevel_topic"]`` from its host (``BENCH_TOPIC_OF_HOST``:
address -> topic); Scrapy's own scheduler ignores it, so it only labels what was fetched.
After each count of responses in ``BENCH_INJECT_AT`` the spider yields one urgent request
(topic ``urgent``, the highest priority for every scheduler) and records when it was
yielded and when it reached the downloader. At close it writes ``BENCH_OUTPUT`` (JSON):
each response's time and topic, and the urgent requests' latencies.
"""

from __future__ import annotations

import json
import time
from urllib.parse import urlsplit

import scrapy
from scrapy import signals

from scrapy_twolevel.testweb.spider import TestWebSpider


class TopicBenchSpider(TestWebSpider):
    name = "topicbench"

    @classmethod
    def from_crawler(cls, crawler, *args, **kwargs):
        spider = super().from_crawler(crawler, *args, **kwargs)
        settings = crawler.settings
        spider.topic_of_host = settings.getdict("BENCH_TOPIC_OF_HOST")
        spider.inject_at = [int(n) for n in settings.getlist("BENCH_INJECT_AT")]
        spider.urgent_url = settings["BENCH_URGENT_URL"]
        spider.output = settings["BENCH_OUTPUT"]
        spider.fetches = []
        spider.yielded = {}
        spider.reached = {}
        crawler.signals.connect(spider.on_response, signals.response_received)
        crawler.signals.connect(spider.on_downloader, signals.request_reached_downloader)
        crawler.signals.connect(spider.on_closed, signals.spider_closed)
        return spider

    def topic(self, url):
        return self.topic_of_host.get(urlsplit(url).hostname, "default")

    async def start(self):
        async for request in super().start():
            request.meta["twolevel_topic"] = self.topic(request.url)
            yield request

    def parse(self, response, **kwargs):
        for out in super().parse(response, **kwargs):
            if isinstance(out, scrapy.Request):
                out.meta["twolevel_topic"] = self.topic(out.url)
            yield out
        count = len(self.fetches)
        due = [n for n in self.inject_at if n <= count and n not in self.yielded]
        if due:  # one per threshold passed (several responses may arrive between parses)
            count = due[0]
            self.yielded[count] = time.monotonic()
            yield scrapy.Request(
                f"{self.urgent_url}?urgent={count}",
                callback=self.parse_urgent,
                priority=10**6,
                dont_filter=True,
                meta={"twolevel_topic": "urgent", "twolevel_quality": 1e6, "urgent": count},
            )

    def parse_urgent(self, response, **kwargs):
        return None

    def on_response(self, response, request, **kwargs):
        if "urgent" not in request.meta:
            self.fetches.append((time.monotonic(), self.topic(response.url)))

    def on_downloader(self, request, **kwargs):
        key = request.meta.get("urgent")
        if key is not None and key not in self.reached:
            self.reached[key] = time.monotonic()

    def on_closed(self, spider, reason):
        latencies = [self.reached[k] - t for k, t in self.yielded.items() if k in self.reached]
        with open(self.output, "w") as out:
            json.dump(
                {
                    "fetches": self.fetches,
                    "urgent_latencies": latencies,
                    "urgent_lost": len(self.yielded) - len(latencies),
                },
                out,
            )
