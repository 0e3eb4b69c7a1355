"""Topics in a crawl (``TWOLEVEL_TOPICS``): the scheduler's side, and ``TopicMiddleware``.

A request's topic is ``request.meta["twolevel_topic"]``; requests without one belong to
the ``default`` topic, and an undeclared name is counted (``twolevel/topic_unknown``),
warned about once, and treated as ``default``. The choice of topic is
:mod:`scrapy_twolevel.frontier.topics`; this module gives each request its topic's lane,
tells the selector which pages were relevant, reports stats, and saves the selector's
state in ``JOBDIR/twolevel/topics.json``.

A page is relevant to its topic when its callback yields an item that Scrapy scrapes
(``item_scraped``, traced back through the response's request), or when the callback
sets ``response.meta["twolevel_relevant"] = True`` (seen by :class:`TopicMiddleware`
once the callback's output is consumed). Each page counts once.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import AsyncIterator, Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from scrapy.exceptions import NotConfigured

from ._engine import peek_meta
from .config import topic_specs
from .frontier.topics import DEFAULT_TOPIC, TopicSelector, split_lane, topic_lane
from .request_keys import HOST_META_KEY
from .signals import page_relevant
from .storage.sqlite import StateError

if TYPE_CHECKING:
    from typing import Self

    from scrapy import Request
    from scrapy.crawler import Crawler
    from scrapy.http import Response
    from scrapy.signalmanager import SignalManager
    from scrapy.statscollectors import StatsCollector

logger = logging.getLogger(__name__)

TOPIC_META = "twolevel_topic"
RELEVANT_META = "twolevel_relevant"
_COUNTED_META = "twolevel_relevant_counted"
STATE_FORMAT = "scrapy_twolevel.topics/1"


class TopicTracker:
    """The scheduler's helper: lanes by topic, relevance, stats and the saved state."""

    def __init__(self, selector: TopicSelector, stats: StatsCollector) -> None:
        self.selector = selector
        self.stats = stats
        self._warned = False

    def lane(self, request: Request, host: str) -> str:
        """``host``'s lane in the request's topic."""
        topic = peek_meta(request).get(TOPIC_META)
        if topic is None:
            topic = DEFAULT_TOPIC
        elif topic not in self.selector.state:
            self.stats.inc_value("twolevel/topic_unknown")
            if not self._warned:
                self._warned = True
                logger.warning(
                    "Request %(request)s names topic %(topic)r, which TWOLEVEL_TOPICS does not "
                    "declare; it goes to the %(default)r topic. Further cases are only "
                    "counted (twolevel/topic_unknown).",
                    {"request": request, "topic": topic, "default": DEFAULT_TOPIC},
                )
            topic = DEFAULT_TOPIC
        return topic_lane(str(topic), host)

    def topic_of(self, request: Request) -> str:
        lane = peek_meta(request).get(HOST_META_KEY)
        if isinstance(lane, str):
            try:
                return split_lane(lane)[0]
            except ValueError:
                pass
        topic = peek_meta(request).get(TOPIC_META)
        return topic if topic in self.selector.state else DEFAULT_TOPIC

    def page_relevant(self, request: Request) -> None:
        """Count ``request``'s page as relevant to its topic, once."""
        meta = request.meta
        if meta.get(_COUNTED_META):
            return
        meta[_COUNTED_META] = True
        self.selector.relevant(self.topic_of(request))

    def item_scraped(self, item: Any, response: Response, spider: Any = None) -> None:
        request = getattr(response, "request", None)
        if request is not None:
            self.page_relevant(request)

    def report(self) -> None:
        for name, st in self.selector.state.items():
            prefix = f"twolevel/topic/{name}/"
            self.stats.set_value(prefix + "pages", st.pages)
            self.stats.set_value(prefix + "slices", st.turns)
            self.stats.set_value(prefix + "preemptions", st.preemptions)
            self.stats.set_value(prefix + "relevant", st.relevant)
            self.stats.set_value(prefix + "quota_met", st.quota_met)
            self.stats.set_value(prefix + "slice", st.slice_len)

    # -- JOBDIR -------------------------------------------------------------------------

    def load(self, path: Path) -> None:
        """Restore the state saved in ``path`` (none yet: a fresh state)."""
        if not path.exists():
            return
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            if not isinstance(data, dict) or data.get("format") != STATE_FORMAT:
                raise ValueError(
                    f"format {data.get('format') if isinstance(data, dict) else data!r}"
                )
            self.selector.restore(data["state"])
        except (ValueError, KeyError) as exc:
            raise StateError(
                f"{path} is not a topic state this version can read ({exc}). It was left "
                "untouched; fix or delete it, or use a fresh JOBDIR."
            ) from exc

    def save(self, path: Path) -> None:
        data = {"format": STATE_FORMAT, "state": self.selector.to_dict()}
        tmp = path.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(data), encoding="utf-8")
        os.replace(tmp, path)


class TopicMiddleware:
    """Spider middleware: a page whose callback set ``response.meta["twolevel_relevant"]``
    is relevant to its topic. Inert (``NotConfigured``) without ``TWOLEVEL_TOPICS``."""

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
        if response.meta.get(RELEVANT_META):
            self._signals.send_catch_log(page_relevant, request=response.request)
