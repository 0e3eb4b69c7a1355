"""The topics demo: the test web split into three topics that share the crawl.

``scrapy crawl topics`` crawls the embedded test web like ``testweb``, but each host
belongs to one of three topics (by its address): ``news`` in the urgent class, ``daily``
and ``reference`` sharing the class below by time slices. The stats at the end show each
topic's pages, turns and preemptions (``twolevel/topic/<name>/*``); see docs/topics.rst.
"""

from urllib.parse import urlsplit

from scrapy import Request

from scrapy_twolevel.testweb.spider import TestWebSpider

TOPICS = ("news", "daily", "reference")


class TopicsSpider(TestWebSpider):
    name = "topics"
    twolevel_topics = {
        "news": {"priority": 0, "slice": 4},
        "daily": {"priority": 1, "slice": 8, "quota": 100, "period": 10},
        "reference": {"priority": 1, "slice": 8},
    }
    custom_settings = {
        "SPIDER_MIDDLEWARES": {"scrapy_twolevel.topics.TopicMiddleware": 960},
    }

    @staticmethod
    def topic(url: str) -> str:
        """A host's topic from its address 127.0.x.y: y modulo 3."""
        last = (urlsplit(url).hostname or "0").rsplit(".", 1)[-1]
        return TOPICS[int(last) % 3] if last.isdigit() else "daily"

    async def start(self):
        async for request in super().start():
            request.meta["twolevel_topic"] = self.topic(request.url)
            yield request

    def parse(self, response, **kwargs):
        for out in super().parse(response, **kwargs):
            if isinstance(out, Request):
                out.meta["twolevel_topic"] = self.topic(out.url)
            yield out
