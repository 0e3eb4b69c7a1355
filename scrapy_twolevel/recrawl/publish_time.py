"""When was an article published? Read from the article page's own metadata.

The recrawl predictor learns when a seed page gets new links from the publish times of
the articles it links to. Publishers state the time in several places; in order of trust:

1. JSON-LD (``<script type="application/ld+json">``): ``datePublished`` of the page's
   article object (also inside ``@graph`` and lists);
2. ``<meta>`` tags: ``article:published_time`` (Open Graph), ``og:published_time``,
   ``itemprop="datePublished"``, Dublin Core ``dc.date.issued`` / ``dcterms.created``,
   ``pubdate``, ``publish-date`` and similar names news CMSs use;
3. ``<time datetime=...>``: one marked ``pubdate`` or ``itemprop="datePublished"`` first,
   else the first with a ``datetime`` attribute.

Values are ISO 8601 (``2026-11-23T14:05:00+01:00``, ``...Z``) or RFC 2822
(``Mon, 23 Nov 2026 13:05:00 GMT``). A value with a time zone is converted to UTC; one
without is taken in ``default_tz`` (UTC unless the caller knows the site's zone). A bare
date (no time of day) is refused: the model counts articles per hour, and midnight would
put every such article in the wrong hour. So is a time more than a day after ``now``
(a wrong clock or a scheduled post). The caller then falls back to the midpoint rule
(:mod:`scrapy_twolevel.recrawl.samples`).

Pure module: no Scrapy (``parsel``, which Scrapy also uses, parses the HTML).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from datetime import UTC, datetime, tzinfo
from email.utils import parsedate_to_datetime
from typing import Any

from parsel import Selector

#: ``<meta>`` names/properties that carry a publish time, lower case.
META_NAMES = (
    "article:published_time",
    "og:published_time",
    "og:article:published_time",
    "datepublished",
    "publishdate",
    "publish-date",
    "publish_date",
    "pubdate",
    "dc.date.issued",
    "dcterms.issued",
    "dcterms.created",
    "dc.date.created",
    "dc.date",
    "sailthru.date",
    "parsely-pub-date",
    "article.published",
    "date",
)

_TIME_OF_DAY = re.compile(r"\d{1,2}:\d{2}")


def parse_time(value: str, default_tz: tzinfo = UTC) -> float | None:
    """Epoch seconds (UTC) of an ISO 8601 or RFC 2822 date-time; ``None`` if it is not one
    or carries no time of day."""
    text = value.strip()
    if not text or not _TIME_OF_DAY.search(text):
        return None
    parsed: datetime | None = None
    iso = text.replace("Z", "+00:00").replace("z", "+00:00")
    if len(iso) > 10 and iso[10] == " ":
        iso = iso[:10] + "T" + iso[11:]
    try:
        parsed = datetime.fromisoformat(iso)
    except ValueError:
        try:
            parsed = parsedate_to_datetime(text)
        except (TypeError, ValueError, IndexError):
            return None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=default_tz)
    return parsed.timestamp()


def _json_ld_dates(data: Any) -> Iterator[str]:
    """``datePublished`` values of the JSON-LD objects, articles first."""
    stack = [data]
    found: list[tuple[int, str]] = []
    while stack:
        item = stack.pop()
        if isinstance(item, list):
            stack.extend(reversed(item))
        elif isinstance(item, dict):
            if "@graph" in item:
                stack.append(item["@graph"])
            value = item.get("datePublished")
            if isinstance(value, str):
                kind = item.get("@type", "")
                kinds = kind if isinstance(kind, list) else [kind]
                is_article = any(isinstance(k, str) and "Article" in k for k in kinds)
                found.append((0 if is_article else 1, value))
    yield from (value for _, value in sorted(found, key=lambda pair: pair[0]))


def extract_publish_time(
    html: str | bytes,
    *,
    now: float | None = None,
    default_tz: tzinfo = UTC,
) -> float | None:
    """The article's publish time in epoch seconds (UTC), or ``None`` if the page does not
    say (see the module docstring for where it looks and what it refuses)."""
    if isinstance(html, bytes):
        html = html.decode("utf-8", "replace")
    page = Selector(text=html)
    for candidate in _candidates(page):
        stamp = parse_time(candidate, default_tz)
        if stamp is None:
            continue
        if now is not None and stamp > now + 86400:
            continue
        return stamp
    return None


def _candidates(page: Selector) -> Iterator[str]:
    for script in page.xpath('//script[@type="application/ld+json"]/text()').getall():
        try:
            data = json.loads(script)
        except ValueError:
            continue
        yield from _json_ld_dates(data)
    metas = {}
    for meta in page.xpath("//meta"):
        name = (
            meta.attrib.get("property")
            or meta.attrib.get("name")
            or meta.attrib.get("itemprop")
            or ""
        ).lower()
        content = meta.attrib.get("content")
        if name in META_NAMES and content and name not in metas:
            metas[name] = content
    for name in META_NAMES:
        if name in metas:
            yield metas[name]
    yield from page.xpath('//time[@pubdate or @itemprop="datePublished"]/@datetime').getall()
    yield from page.xpath("//time/@datetime").getall()
