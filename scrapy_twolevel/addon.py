"""One-line activation: ``ADDONS = {"scrapy_twolevel.Addon": 0}``."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from scrapy.settings import BaseSettings

SCHEDULER_PATH = "scrapy_twolevel.scheduler.TwoLevelScheduler"
MIDDLEWARE_PATH = "scrapy_twolevel.middleware.HostMetricsMiddleware"
DUPEFILTER_PATH = "scrapy_twolevel.dupefilter.SeenCacheDupeFilter"
MIDDLEWARE_ORDER = 950
SEED_MIDDLEWARE_PATH = "scrapy_twolevel.seeds.SeedMiddleware"
#: Near the spider: it tags what the callback yields before other middlewares filter it.
SEED_MIDDLEWARE_ORDER = 950
TOPIC_MIDDLEWARE_PATH = "scrapy_twolevel.topics.TopicMiddleware"
#: Near the spider too: it sees the callback's output as the callback yields it.
TOPIC_MIDDLEWARE_ORDER = 960


class Addon:
    """Sets ``SCHEDULER`` and ``DUPEFILTER_CLASS`` and adds the host metrics middleware,
    the seed middleware (inert unless ``TWOLEVEL_RECRAWL`` is on) and the topic middleware
    (inert unless ``TWOLEVEL_TOPICS`` is set).

    The same as the three manual lines in ``settings.py``. Scrapy calls add-ons after the
    project's, the spider's and the command line's settings are in, and both yield to them:

    * ``SCHEDULER`` and ``DUPEFILTER_CLASS`` are set at ``"addon"`` priority: a value set
      anywhere else (the project, the spider, the command line) wins.
    * The middlewares are added at order 950 with Scrapy's
      ``setdefault_in_component_priority_dict``, unless the dict in effect already lists it,
      by import path or by class (so a project's own order for it, or ``None`` to disable
      it, is kept). The priority of the ``DOWNLOADER_MIDDLEWARES`` setting itself is left
      as it was.
    """

    def update_settings(self, settings: BaseSettings) -> None:
        from .middleware import HostMetricsMiddleware
        from .seeds import SeedMiddleware
        from .topics import TopicMiddleware

        settings.set("SCHEDULER", SCHEDULER_PATH, priority="addon")
        settings.set("DUPEFILTER_CLASS", DUPEFILTER_PATH, priority="addon")
        settings.setdefault_in_component_priority_dict(
            "DOWNLOADER_MIDDLEWARES", HostMetricsMiddleware, MIDDLEWARE_ORDER
        )
        settings.setdefault_in_component_priority_dict(
            "SPIDER_MIDDLEWARES", SeedMiddleware, SEED_MIDDLEWARE_ORDER
        )
        settings.setdefault_in_component_priority_dict(
            "SPIDER_MIDDLEWARES", TopicMiddleware, TOPIC_MIDDLEWARE_ORDER
        )
