"""Topics in a crawl (``TWOLEVEL_TOPICS``): the scheduler's side.

A request's topic is ``request.meta["twolevel_topic"]``; requests without one belong to
the ``default`` topic, and an undeclared name is counted (``twolevel/topic_unknown``),
warned about once, and treated as ``default``. The choice of topic is
:mod:`scrapy_twolevel.frontier.topic_frontier`; this module gives each request its topic's lane,
tells the selector which pages were relevant, reports stats, and saves the selector's
state in ``JOBDIR/twolevel/topics.json``
(:mod:`~scrapy_twolevel.storage.state_files`).

A page is relevant to its topic when its callback yields an item that Scrapy scrapes
(``item_scraped``, traced back through the response's request), or when the callback
sets ``response.meta["twolevel_relevant"] = True`` (seen by
:class:`~scrapy_twolevel.topics.TopicMiddleware` once the callback's output is consumed).
Each page counts once.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .. import meta as meta_keys
from .._engine import peek_meta
from ..frontier.topic_frontier import DEFAULT_TOPIC, TopicSelector, topic_lane
from ..storage.state_files import load_topics, write_topics

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.http import Response
    from scrapy.statscollectors import StatsCollector

logger = logging.getLogger(__name__)


class TopicTracker:
    """The scheduler's helper: lanes by topic, relevance, stats and the saved state."""

    def __init__(self, selector: TopicSelector, stats: StatsCollector) -> None:
        self.selector = selector
        self.stats = stats
        self._warned = False

    def lane(self, request: Request, host: str) -> str:
        """``host``'s lane in the request's topic."""
        topic = peek_meta(request).get(meta_keys.TOPIC)
        if topic is None:
            topic = DEFAULT_TOPIC
        elif not self._declared(topic):
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
        """The topic whose lane ``request`` took (see :meth:`lane`)."""
        topic = peek_meta(request).get(meta_keys.TOPIC)
        return str(topic) if self._declared(topic) else DEFAULT_TOPIC

    def _declared(self, topic: Any) -> bool:
        try:
            return topic in self.selector.state
        except TypeError:  # unhashable: a list, a dict
            return False

    def page_relevant(self, request: Request) -> None:
        """Count ``request``'s page as relevant to its topic, once."""
        meta = request.meta
        if meta.get(meta_keys.RELEVANT_COUNTED):
            return
        meta[meta_keys.RELEVANT_COUNTED] = True
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
        load_topics(path, self.selector.restore)

    def save(self, path: Path) -> None:
        write_topics(path, self.selector.to_dict())
