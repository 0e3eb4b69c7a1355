"""One contract for every request store (glue/store.py): memory, the JOBDIR file and the
distributed mode's, each built as the scheduler's assembly builds it, under the frontier
the assembly builds over it. No Redis: the distributed store stages what it would send.

What each store keeps for a crash is read through a small adapter (``kept``): the rows of
the JOBDIR file, the copies the distributed store would have in Redis; memory keeps none.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from scrapy import Request, Spider
from scrapy.utils.test import get_crawler

from scrapy_twolevel.codec import SpiderCodec
from scrapy_twolevel.distributed.buckets import bucket_of
from scrapy_twolevel.distributed.ownership import Ownership
from scrapy_twolevel.distributed.store import ClusterStore
from scrapy_twolevel.dupefilter import SeenCacheDupeFilter
from scrapy_twolevel.frontier import Measurement
from scrapy_twolevel.glue.assembly import build_frontier
from scrapy_twolevel.glue.inflight import InFlight
from scrapy_twolevel.glue.jobdir import JobdirStore
from scrapy_twolevel.glue.preflight import resolve_settings, store_shape
from scrapy_twolevel.glue.reporting import Reporter
from scrapy_twolevel.glue.store import MemoryStore

pytestmark = pytest.mark.glue

BUCKETS = 4
PAGE = Measurement(
    latency=0.01, new_connection=False, served_on_connection=2, closed_by_server=False
)


class StoreSpider(Spider):
    name = "stores"

    def parse(self, response):  # a callback the codec can name
        return None


class Harness:
    """A store, the frontier over it, and how to queue into it and count what it keeps."""

    def __init__(self, kind: str, tmp_path: Path, budget: int | None = None) -> None:
        settings = {"TWOLEVEL_POLICY": "breadth-first"}
        if budget is not None:
            settings["TWOLEVEL_HOST_BUDGET"] = budget
        crawler = get_crawler(StoreSpider, settings)
        self.spider = StoreSpider.from_crawler(crawler)
        self.stats = crawler.stats
        config, policy, _ = resolve_settings(crawler)
        self.reporter = reporter = Reporter(self.stats, self.spider)
        codec = SpiderCodec(self.spider, self.stats, logunser=False)
        self.inflight = InFlight(in_progress=set, in_downloader=set)  # the engine is done
        self.kind = kind
        if kind in ("memory", "memory-objects"):
            self.store = MemoryStore(reporter, self.spider, encoded=kind == "memory")
        elif kind == "jobdir":
            self.store = JobdirStore(
                statedir=tmp_path / "twolevel",
                policy=policy,
                shape=store_shape(config, policy, None),
                cache_mb=1,
                commit_interval=60,
                codec=codec,
                inflight=self.inflight,
                topics=None,
                reporter=reporter,
            )
        else:
            self.ownership = Ownership()
            self.seen = SeenCacheDupeFilter.from_crawler(crawler)
            self.store = ClusterStore(
                ownership=self.ownership,
                heartbeat_fresh=lambda: True,
                buckets=BUCKETS,
                codec=codec,
                seen=self.seen,
                inflight=self.inflight,
                reporter=reporter,
                counts=Counter(),
            )
        self.frontier = build_frontier(config, policy, None, self.store, reporter)
        self.store.restore(self.frontier)

    def stat(self, name: str) -> object:
        """A stat as the crawl's stats have it once the reporter's counts are added."""
        self.reporter.flush()
        return self.stats.get_value(name)

    def put(self, url: str) -> bool:
        request = Request(url, callback=self.spider.parse, meta={"mine": 1})
        host = url.split("/")[2]
        if self.kind == "cluster":
            bucket = bucket_of(host, BUCKETS)
            if not self.ownership.holds(bucket):
                self.ownership.take(bucket)
            key = self.seen.request_key(request)
            data = self.store.wrap(request)
            return self.store.queue(self.frontier, request, host, 0.0, bucket, key, data)
        return self.store.queue(self.frontier, host, 0.0, self.store.wrap(request), request)

    def hand_out(self) -> Request:
        popped = self.frontier.pop()
        assert popped is not None
        lane, item = popped
        request = self.store.unwrap(lane, item)
        assert request is not None
        return request

    def kept(self) -> int | None:
        """Requests kept for a crash: rows in the file, copies Redis would hold."""
        if self.kind == "jobdir":
            self.store.file.commit()  # queued and leased rows alike
            return self.store.file.db.execute("SELECT COUNT(*) FROM requests").fetchone()[0]
        if self.kind == "cluster":
            staged = self.store.staged
            return len([s for s in staged.stores if s[1]]) - len(staged.dones)
        return None

    def close(self) -> None:
        self.store.save(self.frontier)
        self.frontier.close()
        self.store.close()


@pytest.fixture(params=["memory", "memory-objects", "jobdir", "cluster"])
def kind(request):
    return request.param


def test_a_queued_request_comes_back_whole_and_is_kept_until_the_engine_is_done(kind, tmp_path):
    h = Harness(kind, tmp_path)
    assert h.put("http://a.example/1")
    assert len(h.frontier) == 1
    assert h.kept() in (None, 1)
    request = h.hand_out()
    assert (request.url, request.callback, request.meta["mine"]) == (
        "http://a.example/1",
        h.spider.parse,
        1,
    )
    assert h.kept() in (None, 1)  # leased: kept while the engine has it
    h.inflight.collect()  # the engine is done with it
    assert h.kept() in (None, 0)
    h.close()


def test_a_host_given_up_drops_what_it_had_queued_and_refuses_more(kind, tmp_path):
    h = Harness(kind, tmp_path, budget=1)
    for i in range(3):
        assert h.put(f"http://a.example/{i}")
    request = h.hand_out()
    h.frontier.observe("a.example", PAGE)  # its one page: the host had its budget
    h.frontier.done("a.example")
    h.inflight.collect()
    assert len(h.frontier) == 0
    assert h.kept() in (None, 0)  # the two queued were dropped from the store too
    assert not h.put("http://a.example/late")
    assert h.stat("twolevel/dropped/budget") == 3  # two queued, one late
    assert request.url == "http://a.example/0"
    h.close()


def test_only_the_jobdir_store_gives_a_resumed_crawl_its_requests(kind, tmp_path):
    h = Harness(kind, tmp_path)
    for i in range(3):
        assert h.put(f"http://h{i}.example/")
    h.close()
    again = Harness(kind, tmp_path)
    assert len(again.frontier) == (3 if kind == "jobdir" else 0)
    again.close()


class Unencodable:
    """Something in ``meta`` the codec refuses: the request stays itself."""


class KeywordRequest(Request):
    """A subclass whose ``__init__`` does not take back its own fields."""

    def __init__(self, url: str, *, needed: str, **kwargs) -> None:
        super().__init__(url, **kwargs)
        self.needed = needed


def test_the_memory_store_keeps_requests_encoded_and_each_unencodable_one_as_itself(tmp_path):
    h = Harness("memory", tmp_path)
    shared = {"items": []}
    plain = Request("http://a.example/1", callback=h.spider.parse, meta={"shared": shared})
    assert type(h.store.wrap(plain)) is bytes
    odd = [
        Request("http://a.example/2", callback=lambda r: None),  # not a spider method
        Request("http://a.example/3", meta={"x": Unencodable()}),
        Request("http://a.example/4", meta={"x": __import__("collections").OrderedDict(a=1)}),
        KeywordRequest("http://a.example/5", needed="yes"),
    ]
    for request in odd:
        assert h.store.wrap(request) is request
    assert h.stat("twolevel/memory_queue/objects") == 4
    # The encoded one comes back equal (a copy: its meta is no longer the shared dict).
    h.store.queue(h.frontier, "a.example", 0.0, h.store.wrap(plain), plain)
    back = h.hand_out()
    assert back is not plain and back.meta["shared"] == shared
    assert (back.url, back.callback) == (plain.url, h.spider.parse)
    # A second KeywordRequest is not tried again: its class was checked once.
    assert h.store.wrap(KeywordRequest("http://a.example/6", needed="no")).url.endswith("/6")
    h.close()


def test_objects_mode_hands_out_the_very_request_queued(tmp_path):
    h = Harness("memory-objects", tmp_path)
    request = Request("http://a.example/1", callback=h.spider.parse)
    assert h.store.wrap(request) is request
    h.store.queue(h.frontier, "a.example", 0.0, request, request)
    assert h.hand_out() is request
    h.close()
