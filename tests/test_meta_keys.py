"""Per-request meta keys are the request's own: ``meta=response.meta`` does not pass them on."""

from __future__ import annotations

import pytest
from scrapy import Request

from scrapy_twolevel import meta as meta_keys
from scrapy_twolevel.glue.intake import REQUEUED_PENALTY

pytestmark = pytest.mark.glue


def requeued_page():
    """A page sent back twice from a backed-off host, refused 5 times, a seed's fetch whose
    host's timeout was shortened: every per-request key set, as the package sets them."""
    page = Request("http://a.test/list", meta={meta_keys.SEED: True, "download_timeout": 5.0})
    meta = page.meta
    meta_keys.set_own(meta, page.url, meta_keys.REQUEUED, 2)
    meta_keys.set_own(meta, page.url, meta_keys.REFUSALS, 5)
    meta_keys.set_own(meta, page.url, meta_keys.FAILED_BEFORE, True)
    meta_keys.set_own(meta, page.url, meta_keys.SEED_FETCH, ["a.test/list", 7])
    meta_keys.set_own(meta, page.url, meta_keys.FULL_TIMEOUT, 180.0)
    return page


def test_a_child_built_with_the_pages_meta_drops_what_was_the_pages_own():
    page = requeued_page()
    child = Request("http://a.test/article", meta=page.meta)
    assert meta_keys.drop_inherited(child.meta, child.url) is True
    assert not set(meta_keys.PER_REQUEST) & child.meta.keys()
    assert meta_keys.OWNER not in child.meta
    assert meta_keys.SEED not in child.meta  # came with the seed's fetch: the page's
    assert child.meta["download_timeout"] == 180.0  # not the shortened 5 s
    assert meta_keys.drop_inherited(page.meta, page.url) is False  # the page keeps its own
    assert page.meta[meta_keys.REQUEUED] == 2


def test_retries_and_redirects_keep_them_a_redirects_child_does_not():
    page = requeued_page()
    retry = page.copy()
    assert meta_keys.drop_inherited(retry.meta, retry.url) is False
    assert retry.meta[meta_keys.REFUSALS] == 5
    # RedirectMiddleware: same meta, the new URL, the old one in redirect_urls.
    moved = page.replace(url="http://a.test/list2")
    moved.meta["redirect_urls"] = [page.url]
    assert meta_keys.drop_inherited(moved.meta, moved.url) is False
    assert moved.meta[meta_keys.SEED_FETCH] == ["a.test/list", 7]
    assert moved.meta[meta_keys.OWNER] == moved.url  # taken over
    child = Request("http://a.test/article", meta=moved.meta)  # redirect_urls inherited too
    assert meta_keys.drop_inherited(child.meta, child.url) is True
    assert meta_keys.SEED_FETCH not in child.meta


def test_setting_a_key_on_a_child_does_not_adopt_what_it_inherited():
    page = requeued_page()
    child = Request("http://a.test/article", meta=page.meta)
    meta_keys.set_own(child.meta, child.url, meta_keys.FOUND_ON_SEED, ["a.test/list", 7])
    assert child.meta[meta_keys.FOUND_ON_SEED] == ["a.test/list", 7]
    assert meta_keys.REQUEUED not in child.meta and meta_keys.REFUSALS not in child.meta


def test_the_scheduler_ranks_a_child_of_a_requeued_page_by_its_own_quality():
    """It got quality -2e15 (below everything) through the parent's ``twolevel_requeued``."""
    from scrapy.utils.test import get_crawler

    from scrapy_twolevel.scheduler import TwoLevelScheduler
    from scrapy_twolevel.testweb.spider import TestWebSpider

    crawler = get_crawler(TestWebSpider, {"ADDONS": {"scrapy_twolevel.Addon": 0}})
    spider = TestWebSpider.from_crawler(crawler)
    crawler.spider = spider
    scheduler = TwoLevelScheduler.from_crawler(crawler)
    scheduler.open(spider)
    page = requeued_page()
    assert scheduler.intake.quality(page) == -2 * REQUEUED_PENALTY
    child = Request("http://a.test/article", meta=page.meta, priority=3)
    assert scheduler.enqueue_request(child)
    assert scheduler.intake.quality(child) == 3.0
    handed = scheduler.next_request()
    assert (handed.url, handed.priority) == (child.url, 3)
    scheduler.close("finished")
