"""The scheduler's view (scrapy_twolevel.view): what middlewares and extensions reach."""

from __future__ import annotations

import pytest
from scrapy import Spider
from scrapy.core.scheduler import Scheduler
from scrapy.utils.test import get_crawler

from scrapy_twolevel.scheduler import TwoLevelScheduler
from scrapy_twolevel.view import view_of

pytestmark = pytest.mark.glue


class ViewSpider(Spider):
    name = "view"


def test_scrapys_own_scheduler_has_no_view(monkeypatch):
    """Scrapy's BaseScheduler metaclass makes isinstance(any scheduler, TwoLevelScheduler)
    true: the view must not take Scrapy's Scheduler for ours (it did, and every response's
    report failed under the stock scheduler)."""
    crawler = get_crawler(ViewSpider)
    stock = Scheduler.from_crawler(crawler)
    assert isinstance(stock, TwoLevelScheduler)  # the metaclass's duck typing
    monkeypatch.setattr("scrapy_twolevel.view.scheduler_of", lambda crawler: stock)
    assert view_of(crawler) is None


def test_the_open_two_level_scheduler_is_the_view_until_it_closes(monkeypatch):
    crawler = get_crawler(ViewSpider, {"TWOLEVEL_POLICY": "breadth-first"})
    spider = ViewSpider.from_crawler(crawler)
    crawler.spider = spider
    scheduler = TwoLevelScheduler.from_crawler(crawler)
    monkeypatch.setattr("scrapy_twolevel.view.scheduler_of", lambda crawler: scheduler)
    assert view_of(crawler) is None  # not open yet
    scheduler.open(spider)
    view = view_of(crawler)
    assert view is scheduler and view.frontier is scheduler.frontier is not None
    assert view.seen_test() is None  # Scrapy's RFPDupeFilter cannot be asked without recording
    scheduler.close("finished")
    assert view_of(crawler) is None
