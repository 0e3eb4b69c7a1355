"""Request -> host key, against the standard library's parser."""

from __future__ import annotations

from urllib.parse import urlsplit

import pytest
from scrapy import Request

from scrapy_twolevel.frontier import PLAIN_LANE
from scrapy_twolevel.frontier.host_keys import make_host_key
from scrapy_twolevel.glue.intake import make_quality, make_request_host, split_host

pytestmark = pytest.mark.unit

URLS = [
    "http://A.Example.com:80/x?y#z",
    "https://user:pw@h.example.org/",
    "http://[::1]:8080/a",
    "http://[2001:db8::7]/",
    "http://h.com?q=1",
    "http://h.com#frag",
    "http://h.com",
    "ftp://files.example.net/pub",
    "http:///no-host",
    "http://:80/no-host",
    "data:text/plain,x",
    "file:///etc/hostname",
    "http://xn--n3h.com/",
    "http://user:p@ss@Host.com:81/a@b",
    "HTTPS://UPPER.example/",
    "http://h.com:8080",
    "s3://bucket.example/key",
    "mailto:someone@example.com",
]


@pytest.mark.parametrize("url", URLS)
def test_split_host_agrees_with_urlsplit(url):
    parsed = urlsplit(url)
    assert split_host(url) == (parsed.scheme, parsed.hostname or "")


@pytest.mark.parametrize(
    "url",
    [
        "http://example.com./a",
        "http://EXAMPLE.com/b",
        "https://example.com:443/c",
        "http://Example.COM.:8080/",
    ],
)
def test_one_server_name_is_one_lane_whatever_its_spelling(url):
    """Trailing dot, case and port: one server, so never two requests in flight at it."""
    assert split_host(url)[1] == "example.com"
    assert make_request_host("hostname")(Request(url)) == "example.com"


def test_split_host_rejects_unbalanced_bracket():
    with pytest.raises(ValueError, match="unbalanced"):
        split_host("http://[::1/x")


def test_request_host_modes():
    by_hostname = make_request_host("hostname")
    assert by_hostname(Request("http://a.b.example.co.uk/x")) == "a.b.example.co.uk"
    assert by_hostname(Request("data:text/plain,hi")) == PLAIN_LANE
    assert by_hostname(Request("http://x.com/", meta={"download_slot": "mine"})) == "mine"
    by_domain = make_request_host("domain")
    assert by_domain(Request("http://a.b.example.co.uk/x")) == "example.co.uk"
    assert by_domain(Request("http://127.0.1.5:8080/")) == "127.0.1.5"
    for removed in ("ip", "port"):
        with pytest.raises(ValueError, match="unknown host key mode"):
            make_host_key(removed)


def test_quality_sources():
    request = Request("http://a.com/", priority=7, meta={"score": "2.5"})
    assert make_quality("priority")(request) == 7.0
    assert make_quality("meta:score")(request) == 2.5
    assert make_quality("meta:missing")(request) == 0.0
    assert make_quality(f"{__name__}.double_priority")(request) == 14.0


def double_priority(request):
    return request.priority * 2


def test_peek_meta_does_not_create_meta():
    """Checks the Scrapy internal that _engine.peek_meta relies on (Request._meta)."""
    from scrapy_twolevel._engine import peek_meta

    bare = Request("http://a.com/")
    assert bare._meta is None  # fails loudly if Scrapy renames or drops the attribute
    assert dict(peek_meta(bare)) == {}
    assert bare._meta is None  # peeking created nothing
    with_meta = Request("http://a.com/", meta={"k": 1})
    assert peek_meta(with_meta) is with_meta.meta
