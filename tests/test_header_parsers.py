"""What the server says, in seconds: Retry-After (RFC 9110 section 10.2.3) and Crawl-delay."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from scrapy_twolevel.glue.politeness import retry_after_seconds, robots_crawl_delay

pytestmark = pytest.mark.unit

#: 1994-11-06 08:49:37 GMT, the example date of RFC 9110 section 5.6.7.
NOW = datetime(1994, 11, 6, 8, 49, 7, tzinfo=UTC).timestamp()


@pytest.mark.parametrize(
    "value",
    [
        b"Sun, 06 Nov 1994 08:49:37 GMT",  # IMF-fixdate
        b"Sunday, 06-Nov-94 08:49:37 GMT",  # obsolete RFC 850 format
        b"Sun Nov  6 08:49:37 1994",  # ANSI C's asctime() format: no zone, GMT all the same
        "Sun, 06 Nov 1994 08:49:37 GMT",
    ],
)
def test_every_http_date_form_is_read_as_gmt(value):
    assert retry_after_seconds(value, NOW) == pytest.approx(30.0)


def test_seconds_and_dates_in_the_past():
    assert retry_after_seconds(b"120", NOW) == 120.0
    assert retry_after_seconds(b" 7 ", NOW) == 7.0
    assert retry_after_seconds(b"Sun, 06 Nov 1994 08:00:00 GMT", NOW) == 0.0


@pytest.mark.parametrize(
    "value", [None, b"", b"   ", b"\xb2", "\u0663", b"-5", b"1.5", b"soon", b"Sun, 99 Nov 1994"]
)
def test_what_cannot_be_read_asks_no_wait_and_raises_nothing(value):
    """``\\xb2`` (superscript two) is a digit to ``str.isdigit`` and made ``float()`` raise
    inside ``process_response``: the request went to its errback instead of being retried."""
    assert retry_after_seconds(value, NOW) is None


def test_crawl_delay_for_the_agent_or_none():
    body = b"User-agent: slowbot\nCrawl-delay: 4\n\nUser-agent: *\nCrawl-delay: 0.5\n"
    assert robots_crawl_delay(body, "slowbot") == 4.0
    assert robots_crawl_delay(body, "Scrapy/2.19") == 0.5
    assert robots_crawl_delay(b"User-agent: *\nDisallow: /x\n", "any") is None
    assert robots_crawl_delay(b"User-agent: *\nCrawl-delay: -3\n", "any") is None
    assert robots_crawl_delay(b"\xff\xfe garbage", "any") is None
