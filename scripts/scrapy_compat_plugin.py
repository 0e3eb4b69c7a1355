"""pytest plugin: Scrapy's own tests with scrapy_twolevel's components as the defaults.

Loaded by ``scripts/scrapy_compat.py`` (``-p scrapy_compat_plugin``) into a run of the
tests of Scrapy's sdist: every crawler those tests build gets the two-level scheduler, the
seen-cache dupefilter, the host metrics middleware and the duplicate-links middleware
unless the test sets its own, as if a user had added them to ``settings.py``.
"""

from __future__ import annotations

from scrapy.settings import default_settings

from scrapy_twolevel.components import (
    DUPEFILTER_PATH,
    DUPLICATE_LINKS_ORDER,
    DUPLICATE_LINKS_PATH,
    MIDDLEWARE_ORDER,
    MIDDLEWARE_PATH,
    SCHEDULER_PATH,
)


def pytest_configure(config: object) -> None:
    default_settings.SCHEDULER = SCHEDULER_PATH
    default_settings.DUPEFILTER_CLASS = DUPEFILTER_PATH
    default_settings.DOWNLOADER_MIDDLEWARES_BASE = {
        **default_settings.DOWNLOADER_MIDDLEWARES_BASE,
        MIDDLEWARE_PATH: MIDDLEWARE_ORDER,
    }
    default_settings.SPIDER_MIDDLEWARES_BASE = {
        **default_settings.SPIDER_MIDDLEWARES_BASE,
        DUPLICATE_LINKS_PATH: DUPLICATE_LINKS_ORDER,
    }
