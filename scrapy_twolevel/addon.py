"""One-line activation: ``ADDONS = {"scrapy_twolevel.Addon": 0}``."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from scrapy.settings import BaseSettings

SCHEDULER_PATH = "scrapy_twolevel.scheduler.TwoLevelScheduler"
MIDDLEWARE_PATH = "scrapy_twolevel.middleware.HostMetricsMiddleware"
MIDDLEWARE_ORDER = 950


class Addon:
    """Sets ``SCHEDULER`` and adds the host metrics middleware, at ``"addon"`` priority.

    The same as the two manual lines in ``settings.py``; a value a project sets at a
    higher priority still wins.
    """

    def update_settings(self, settings: BaseSettings) -> None:
        settings.set("SCHEDULER", SCHEDULER_PATH, priority="addon")
        settings["DOWNLOADER_MIDDLEWARES"].setdefault(MIDDLEWARE_PATH, MIDDLEWARE_ORDER)
