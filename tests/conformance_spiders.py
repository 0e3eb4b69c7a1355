"""Spiders of the kinds real projects write, for the conformance crawls of the test web.

Loaded by ``python -m scrapy_twolevel.testweb crawl --spider conformance_spiders.NAME``
(``crawl_helpers.crawl_process`` puts this folder on ``PYTHONPATH``).
"""

from __future__ import annotations

from scrapy import Request, Spider
from scrapy.linkextractors import LinkExtractor
from scrapy.spiders import CrawlSpider, Rule, SitemapSpider

from scrapy_twolevel.testweb.spider import SEEDS_SETTING, SITEMAPS_SETTING, TestWebSpider


def page_item(response):
    return {"url": response.url}


class RulesSpider(CrawlSpider):
    """``CrawlSpider`` with one rule: follow every link, an item per page."""

    name = "rules"
    rules = (Rule(LinkExtractor(), callback="parse_page", follow=True),)

    @classmethod
    def from_crawler(cls, crawler, *args, **kwargs):
        spider = super().from_crawler(crawler, *args, **kwargs)
        spider.start_urls = crawler.settings.getlist(SEEDS_SETTING)
        return spider

    def parse_page(self, response):
        yield page_item(response)


class SitemapsSpider(SitemapSpider):
    """``SitemapSpider`` over every host's ``/sitemap.xml``: no link is followed."""

    name = "sitemaps"

    @classmethod
    def from_crawler(cls, crawler, *args, **kwargs):
        spider = super().from_crawler(crawler, *args, **kwargs)
        spider.sitemap_urls = crawler.settings.getlist(SITEMAPS_SETTING)
        return spider

    def parse(self, response):
        yield page_item(response)


class MetaCopySpider(TestWebSpider):
    """Builds every child with ``meta=response.meta``, as many projects do to pass data on."""

    name = "metacopy"

    def parse(self, response, **kwargs):
        response.meta["trail"] = response.meta.get("trail", 0) + 1
        for out in super().parse(response, **kwargs):
            if isinstance(out, Request):
                out = out.replace(meta={**response.meta, **out.meta})
            yield out


class ErrbackSpider(Spider):
    """Seeds plus, per seed host, one URL that never answers well (``/_broken`` resets the
    connection): its errback yields an item, so every failure reaches the spider."""

    name = "errbacks"

    @classmethod
    def from_crawler(cls, crawler, *args, **kwargs):
        spider = super().from_crawler(crawler, *args, **kwargs)
        spider.seeds = crawler.settings.getlist(SEEDS_SETTING)
        return spider

    async def start(self):
        for url in self.seeds:
            yield Request(url, callback=self.parse)
            yield Request(url.rstrip("/") + "/_broken", errback=self.failed)

    def parse(self, response):
        yield page_item(response)
        for href in response.css("a[href]::attr(href)").getall():
            yield response.follow(href, callback=self.parse)

    def failed(self, failure):
        yield {"failed": failure.request.url}
