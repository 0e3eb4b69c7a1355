"""The local test web's Scrapy side: the spider (priorities, meta, items) and the resolver
that maps the web's host names, built with ``get_crawler``."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from scrapy.http import HtmlResponse
from scrapy.utils.misc import build_from_crawler
from scrapy.utils.test import get_crawler
from twisted.internet.error import DNSLookupError

from scrapy_twolevel.testweb import server as server_mod
from scrapy_twolevel.testweb import spider as spider_mod
from scrapy_twolevel.testweb.resolver import HOSTS_MAP_SETTING, TestWebResolver
from scrapy_twolevel.testweb.web import generate_web

pytestmark = pytest.mark.glue


# -- spider ----------------------------------------------------------------------------------


def test_quality_to_priority() -> None:
    assert spider_mod.quality_to_priority(1.0) == 1_000_000
    assert spider_mod.quality_to_priority(0.123456) == 123_456
    assert spider_mod.quality_to_priority(0.5) > spider_mod.quality_to_priority(0.499999)


def test_spider_start_urls_from_argument_or_setting() -> None:
    cls = spider_mod.TestWebSpider
    seeds = ["http://127.0.1.1:1/", "http://127.0.1.2:1/"]
    crawler = get_crawler(cls, {spider_mod.SEEDS_SETTING: seeds})
    assert cls.from_crawler(crawler).start_urls == seeds
    spider = cls.from_crawler(crawler, start_urls="http://a.test/, http://b.test/")
    assert spider.start_urls == ["http://a.test/", "http://b.test/"]
    assert cls.from_crawler(get_crawler(cls), start_urls=["http://c.test/"]).start_urls == [
        "http://c.test/"
    ]


def test_spider_parse_gives_priorities_meta_and_item() -> None:
    web = generate_web(3, 4, seed=2)
    page = web.pages[5]
    url = web.url(page.id, 8080)
    body = server_mod.render_page(web, page.id, 8080)
    response = HtmlResponse(url, body=body, encoding="utf-8")
    out = list(spider_mod.TestWebSpider().parse(response))
    items = [o for o in out if isinstance(o, dict)]
    assert items == [{"url": url, "quality": page.quality, "host": web.hosts[page.host].address}]
    requests = [o for o in out if not isinstance(o, dict)]
    assert [r.url for r in requests] == [web.url(t, 8080) for t in page.links]
    for r, t in zip(requests, page.links, strict=True):
        assert r.priority == spider_mod.quality_to_priority(web.pages[t].quality)
        assert r.meta["twolevel_quality"] == web.pages[t].quality


# -- resolver ----------------------------------------------------------------------------------


@pytest.fixture
def dnscache() -> Iterator[Any]:
    """Scrapy's process-wide DNS cache, restored afterwards."""
    from scrapy.resolver import dnscache

    saved, limit = dict(dnscache), dnscache.limit
    yield dnscache
    dnscache.clear()
    dnscache.update(saved)
    dnscache.limit = limit


def _resolve(resolver: TestWebResolver, name: str) -> Any:
    """The resolver answers synchronously (no DNS, no thread): the result or the failure."""
    outcome: list[Any] = []
    resolver.getHostByName(name).addBoth(outcome.append)
    assert len(outcome) == 1, "the answer should be immediate"
    return outcome[0]


def test_resolver_maps_names_and_fills_scrapy_dnscache(dnscache: Any) -> None:
    web = generate_web(3, 2, seed=0, hostnames=True, aliases={1: 1})
    crawler = get_crawler(settings_dict={HOSTS_MAP_SETTING: web.hosts_map()})
    resolver = build_from_crawler(TestWebResolver, crawler, reactor=None)
    names = ["h0.testweb.test", "h1.testweb.test", "h1-a1.testweb.test", "h2.testweb.test"]
    assert list(web.hosts_map()) == names
    assert {n: _resolve(resolver, n) for n in names} == web.hosts_map()
    assert _resolve(resolver, "h1-a1.testweb.test") == _resolve(resolver, "h1.testweb.test")
    # stored like CachingThreadedResolver does: name -> address string
    assert {n: dnscache[n] for n in names} == web.hosts_map()
    assert all(isinstance(dnscache[n], str) for n in names)
    assert _resolve(resolver, "127.0.3.3") == "127.0.3.3"  # an IP literal is its own answer
    # a name outside the map fails at once, never reaching real DNS, and is not cached
    failure = _resolve(resolver, "h9.testweb.test")
    assert failure.check(DNSLookupError) and HOSTS_MAP_SETTING in str(failure.value)
    assert "h9.testweb.test" not in dnscache


def test_resolver_honours_dnscache_enabled_and_rejects_bad_maps(dnscache: Any) -> None:
    settings = {HOSTS_MAP_SETTING: {"a.testweb.test": "127.0.1.1"}, "DNSCACHE_ENABLED": False}
    crawler = get_crawler(settings_dict=settings)
    resolver = build_from_crawler(TestWebResolver, crawler, reactor=None)
    assert _resolve(resolver, "a.testweb.test") == "127.0.1.1"
    assert "a.testweb.test" not in dnscache
    for bad in ({"a.testweb.test": "nowhere"}, {"a.testweb.test": "::1"}):
        crawler = get_crawler(settings_dict={HOSTS_MAP_SETTING: bad})
        with pytest.raises(ValueError, match=f"{HOSTS_MAP_SETTING}: 'a.testweb.test' -> "):
            build_from_crawler(TestWebResolver, crawler, reactor=None)
