"""One-line activation: ``ADDONS = {"scrapy_twolevel.Addon": 0}``."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .components import (
    DUPEFILTER_PATH,
    DUPLICATE_LINKS_ORDER,
    LIVE_VIEW_ORDER,
    MIDDLEWARE_ORDER,
    SCHEDULER_PATH,
    SEED_MIDDLEWARE_ORDER,
    START_PACING_ORDER,
    TOPIC_MIDDLEWARE_ORDER,
)

if TYPE_CHECKING:
    from scrapy.settings import BaseSettings


class Addon:
    """Sets ``SCHEDULER`` and ``DUPEFILTER_CLASS`` and adds the host metrics middleware,
    the seed middleware (inert unless ``TWOLEVEL_RECRAWL`` is on), the topic middleware
    (inert unless ``TWOLEVEL_TOPICS`` is set), the duplicate-links middleware, the start
    pacing middleware and the live view's extension (the periodic status line; the
    dashboard with ``TWOLEVEL_WEB_PORT``).

    The same as the seven manual lines in ``settings.py`` (see the quick start). Scrapy
    calls add-ons after the project's, the spider's and the command line's settings are
    in, and both yield to them:

    * ``SCHEDULER`` and ``DUPEFILTER_CLASS`` are set at ``"addon"`` priority: a value set
      anywhere else (the project, the spider, the command line) wins.
    * The middlewares are added (at orders 950, 950, 960, 940 and 10) with Scrapy's
      ``setdefault_in_component_priority_dict``, unless the dict in effect already lists
      one, by import path or by class (so a project's own order for it, or ``None`` to
      disable it, is kept). The priority of the ``*_MIDDLEWARES`` settings themselves is
      left as it was.
    """

    def update_settings(self, settings: BaseSettings) -> None:
        # Imported here: ``import scrapy_twolevel`` stays light (no Scrapy machinery).
        from .duplicate_links import DuplicateLinksMiddleware
        from .live.extension import LiveView
        from .middleware import HostMetricsMiddleware
        from .seeds import SeedMiddleware
        from .start_pacing import StartPacingMiddleware
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
        settings.setdefault_in_component_priority_dict(
            "SPIDER_MIDDLEWARES", DuplicateLinksMiddleware, DUPLICATE_LINKS_ORDER
        )
        settings.setdefault_in_component_priority_dict(
            "SPIDER_MIDDLEWARES", StartPacingMiddleware, START_PACING_ORDER
        )
        settings.setdefault_in_component_priority_dict("EXTENSIONS", LiveView, LIVE_VIEW_ORDER)
