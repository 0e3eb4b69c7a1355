"""What a server says about how fast it wants to be crawled, read from its replies.

A polite crawler's first duty is to read what the server says: ``Retry-After`` on a
refusal (429, 503; seconds or an HTTP date, RFC 9110 section 10.2.3) and ``Crawl-delay`` in
robots.txt. These functions turn the server's words into seconds; the frontier decides
what to do with them (see :meth:`~scrapy_twolevel.frontier.TwoLevelFrontier.observe_refusal`
and :meth:`~scrapy_twolevel.frontier.TwoLevelFrontier.set_min_gap`). No Scrapy imports.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from datetime import UTC
from email.utils import parsedate_to_datetime
from typing import Any

from ..meta import REFUSALS

#: Failure kinds, as the host metrics middleware tells them apart: the host could not be
#: reached (refused, DNS, connect timeout), it took too long to answer, or the connection
#: broke while a request was under way (a reset, an abort: often one URL's problem).
DOWN = "down"
SLOW = "slow"
BROKEN = "broken"


def retry_after_seconds(value: bytes | str | None, now: float) -> float | None:
    """Seconds from ``now`` (epoch seconds) that a ``Retry-After`` value asks to wait.

    ``None`` when there is no value or it cannot be read (the frontier then waits its
    learnt refusal gap); a date in the past is 0.
    """
    if value is None:
        return None
    text = value.decode("latin-1") if isinstance(value, bytes) else value
    text = text.strip()
    if not text:
        return None
    if text.isascii() and text.isdigit():  # str.isdigit() is true for "\xb2" too
        return float(text)
    try:
        when = parsedate_to_datetime(text)
    except Exception:  # a server's header: whatever it holds, no wait is read from it
        return None
    if when.tzinfo is None:
        # The asctime form (and "-0000") parse without a zone; every HTTP date is GMT
        # (RFC 9110 section 5.6.7), and recipients must accept all three forms.
        when = when.replace(tzinfo=UTC)
    seconds = when.timestamp() - now
    return max(0.0, seconds) if math.isfinite(seconds) else None


def refused_before(meta: Mapping[str, Any]) -> int:
    """How many times a request (its ``meta``) was refused before and sent again."""
    return int(meta.get(REFUSALS) or 0)


def robots_crawl_delay(body: bytes, user_agent: str) -> float | None:
    """The ``Crawl-delay`` a robots.txt body asks of ``user_agent``, in seconds; ``None``
    when it asks none (or cannot be parsed). Protego is the robots.txt parser Scrapy uses
    by default (``ROBOTSTXT_PARSER``)."""
    from protego import Protego

    try:
        parser = Protego.parse(body.decode("utf-8", errors="replace"))
        delay = parser.crawl_delay(user_agent)
    except Exception:  # a parser error must not stop the crawl; no delay was read
        return None
    if delay is None:
        return None
    delay = float(delay)
    return delay if math.isfinite(delay) and delay > 0 else None
