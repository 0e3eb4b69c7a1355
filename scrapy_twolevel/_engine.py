"""The only two places that touch Scrapy internals, isolated so a Scrapy change breaks here.

Scrapy has no public hook to (a) wake the engine when a scheduler that held requests back
has one ready again, or (b) ask which requests are still inside the downloader. Both are
checked inside a real crawl by ``test_scrapy_internals_we_rely_on_still_exist`` in
``tests/test_crawl.py``, which fails loudly if Scrapy changes them.
"""

from __future__ import annotations

from collections.abc import Container
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from scrapy.crawler import Crawler


def _engine(crawler: Crawler) -> Any:
    try:
        return crawler.engine
    except (AttributeError, RuntimeError):  # Scrapy 2.14+: RuntimeError before the crawl
        return None


def wake_engine(crawler: Crawler) -> bool:
    """Ask the engine to call ``next_request`` soon, instead of on its 5-second heartbeat.

    Returns whether the engine could be reached (``False`` before open / after close).
    """
    slot = getattr(_engine(crawler), "_slot", None)
    nextcall = getattr(slot, "nextcall", None)
    if nextcall is None:
        return False
    nextcall.schedule()
    return True


def requests_in_downloader(crawler: Crawler) -> Container[Any] | None:
    """Requests the downloader holds (its middlewares included), from fetch to response.

    A request the scheduler handed out that is no longer here was dropped before download
    (e.g. ``IgnoreRequest`` from a downloader middleware), so its host can be freed.
    ``None`` when the downloader cannot be inspected (no engine yet).
    """
    downloader = getattr(_engine(crawler), "downloader", None)
    return getattr(downloader, "active", None)
