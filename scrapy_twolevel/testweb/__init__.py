"""The local test web: a fake multi-host web served over real sockets on loopback.

* :mod:`.web` describes a web (pure; no Scrapy, no Twisted),
* :mod:`.server` serves it with Twisted and counts what crawlers do to each host,
* :mod:`.resolver` resolves its host names inside a crawl,
* :mod:`.spider` crawls it, and ``python -m scrapy_twolevel.testweb`` serves or crawls it.

Server and spider names are imported lazily, so ``import scrapy_twolevel.testweb.web`` costs
no Scrapy or Twisted import (and never installs a reactor).
"""

from __future__ import annotations

import importlib
from typing import Any

from . import web
from .web import *  # noqa: F403  (its __all__: the pure part, no Scrapy, no Twisted)

_LAZY = {
    "HostStats": "stats",
    "ResponseEvent": "stats",
    "ServerStats": "stats",
    "TestWebServer": "server",
    "fetch_remote_stats": "stats",
    "render_page": "server",
    "HOSTS_MAP_SETTING": "resolver",
    "TestWebResolver": "resolver",
    "SEEDS_SETTING": "spider",
    "CrawlResult": "spider",
    "TestWebSpider": "spider",
    "quality_to_priority": "spider",
    "run_crawl": "spider",
}

__all__ = [*web.__all__, *_LAZY]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f".{module}", __name__), name)
