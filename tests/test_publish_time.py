"""Publish-time extraction on varied HTML: every source, time zones, and what is refused."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from scrapy_twolevel.recrawl.publish_time import extract_publish_time, parse_time

pytestmark = pytest.mark.unit

T = datetime(2026, 11, 23, 13, 5, tzinfo=UTC).timestamp()  # 13:05 UTC


@pytest.mark.parametrize(
    "html",
    [
        # Open Graph, with an offset: 14:05 at +01:00 is 13:05 UTC
        '<meta property="article:published_time" content="2026-11-23T14:05:00+01:00">',
        # Z suffix
        '<meta property="og:published_time" content="2026-11-23T13:05:00Z">',
        # itemprop, space instead of T, negative offset: 08:05 at -05:00
        '<meta itemprop="datePublished" content="2026-11-23 08:05:00-05:00">',
        # Dublin Core, RFC 2822
        '<meta name="DC.date.issued" content="Mon, 23 Nov 2026 13:05:00 GMT">',
        # JSON-LD article
        '<script type="application/ld+json">{"@type": "NewsArticle",'
        ' "datePublished": "2026-11-23T13:05:00+00:00"}</script>',
        # JSON-LD graph, the article after a WebPage with another date
        '<script type="application/ld+json">{"@graph": [{"@type": "WebPage",'
        ' "datePublished": "2020-01-01T00:00:00Z"}, {"@type": ["Article"],'
        ' "datePublished": "2026-11-23T15:05:00+02:00"}]}</script>',
        # <time pubdate> wins over an earlier plain <time>
        '<time datetime="2026-11-20T10:00:00Z">Friday</time>'
        '<time pubdate datetime="2026-11-23T13:05Z">today</time>',
        # only a plain <time>
        '<p>Posted <time datetime="2026-11-23T13:05:00+00:00">at 13:05</time></p>',
    ],
    ids=[
        "og-offset",
        "og-z",
        "itemprop",
        "dc-rfc2822",
        "json-ld",
        "json-ld-graph",
        "time-pubdate",
        "time-plain",
    ],
)
def test_each_source_gives_the_same_utc_instant(html):
    assert extract_publish_time(f"<html><head>{html}</head><body></body></html>") == T


def test_json_ld_is_trusted_over_meta_and_meta_over_time():
    html = (
        '<meta property="article:published_time" content="2026-11-23T12:00:00Z">'
        '<script type="application/ld+json">{"@type": "Article",'
        ' "datePublished": "2026-11-23T13:05:00Z"}</script>'
        '<time datetime="2026-11-23T11:00:00Z"></time>'
    )
    assert extract_publish_time(html) == T
    assert extract_publish_time(html.split("<script")[0] + "<time datetime='x'></time>") == (
        T - 65 * 60
    )


def test_a_time_without_zone_takes_the_default_zone():
    html = '<meta name="pubdate" content="2026-11-23T14:05:00">'
    assert extract_publish_time(html) == T + 3600  # read as UTC
    assert extract_publish_time(html, default_tz=timezone(timedelta(hours=1))) == T


@pytest.mark.parametrize(
    "html",
    [
        "<p>no metadata at all</p>",
        '<meta property="article:published_time" content="2026-11-23">',  # a bare date
        '<meta property="article:published_time" content="yesterday at noon">',
        '<script type="application/ld+json">{not json</script>',
        '<time datetime="">',
    ],
)
def test_pages_that_do_not_say_give_none(html):
    assert extract_publish_time(html) is None


def test_a_time_far_in_the_future_is_refused():
    html = '<meta property="article:published_time" content="2026-11-25T13:05:00Z">'
    assert extract_publish_time(html, now=T) is None
    assert extract_publish_time(html, now=T + 2 * 86400) == T + 2 * 86400


def test_bytes_and_parse_time():
    assert extract_publish_time(b'<meta name="date" content="2026-11-23T13:05:00Z">') == T
    assert parse_time("2026-11-23T13:05") == T
    assert parse_time("23 Nov 2026") is None
