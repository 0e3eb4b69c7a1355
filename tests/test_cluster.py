"""The distributed mode's parts on their own: built by the package's assembly
(``assemble_cluster``) from the small parts the scheduler hands it (intake, codec,
reporter, seen keys, in-flight registry), with no scheduler and no crawl, against a real
Redis. The crawl tests (test_distributed_crawl.py) cover the whole; these pin the
distributed mode's own contract.

Ticks are driven by the test (``yield cluster.tick()``); the sync interval is long enough
that no timer ticks on its own meanwhile.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
import pytest_twisted
from scrapy import Request, Spider
from scrapy.statscollectors import StatsCollector
from scrapy.utils.test import get_crawler
from twisted.internet import defer

from scrapy_twolevel.codec import SpiderCodec
from scrapy_twolevel.config import ClusterConfig
from scrapy_twolevel.distributed.assembly import assemble_cluster
from scrapy_twolevel.distributed.batch import Batch
from scrapy_twolevel.distributed.buckets import bucket_of
from scrapy_twolevel.distributed.node import Node, clear_crawl
from scrapy_twolevel.dupefilter import SeenCacheDupeFilter
from scrapy_twolevel.frontier import BreadthFirst, CostParams, Measurement, TwoLevelFrontier
from scrapy_twolevel.glue.inflight import InFlight
from scrapy_twolevel.glue.intake import Intake, make_quality, make_request_host
from scrapy_twolevel.glue.reporting import Reporter

pytestmark = pytest.mark.redis

BUCKETS = 4


class UnitSpider(Spider):
    name = "unit"


def host_in(bucket: int) -> str:
    return next(f"h{i}.test" for i in range(1000) if bucket_of(f"h{i}.test", BUCKETS) == bucket)


class Parts:
    """A node's parts as the scheduler has them built (``assemble_cluster``), with no
    scheduler and no crawl: it has joined the crawl when built."""

    def __init__(
        self,
        redis_url: str,
        crawl_id: str,
        node_id: str,
        budget: int | None = None,
        wake: Callable[[], object] | None = None,
    ) -> None:
        """``budget``: every host's page budget (``TWOLEVEL_HOST_BUDGET``); ``wake``: what
        waking the engine does (default: count it)."""
        crawler = get_crawler(UnitSpider)
        self.spider = UnitSpider()
        self._stats = crawler.stats
        self.reporter = Reporter(self._stats, self.spider)
        self.intake = Intake(
            host_of=make_request_host("hostname"),
            quality_of=make_quality("priority"),
            reporter=self.reporter,
        )
        self.seen = SeenCacheDupeFilter.from_crawler(crawler)
        self.inflight = InFlight(in_progress=lambda: None, in_downloader=lambda: None)
        self.codec = SpiderCodec(self.spider, self._stats, logunser=False)
        self.wakes = 0
        self.stopped: list[str] = []
        config = ClusterConfig.from_settings(
            {
                "TWOLEVEL_REDIS_URL": redis_url,
                "TWOLEVEL_CRAWL_ID": crawl_id,
                "TWOLEVEL_NODE_ID": node_id,
                "TWOLEVEL_BUCKETS": BUCKETS,
                "TWOLEVEL_NODE_TTL": 600,
                "TWOLEVEL_SYNC_INTERVAL": 60,
            }
        )
        self.parts = assemble_cluster(
            crawler=crawler,
            spider=self.spider,
            config=config,
            make_frontier=lambda store: TwoLevelFrontier(
                BreadthFirst(),
                CostParams(),
                None,
                queue_factory=store.make_queue,
                on_give_up=self.reporter.host_given_up,
                on_dropped=store.discard,  # as the scheduler's assembly wires it
                budget=None if budget is None else lambda host: budget,
                on_page=store.on_page,
            ),
            dupefilter=self.seen,
            intake=self.intake,
            inflight=self.inflight,
            reporter=self.reporter,
            codec=self.codec,
            enqueue=lambda request: False,
            wake=self.wake if wake is None else wake,
            stop=self.stopped.append,
        )
        self.frontier = self.parts.frontier
        self.store = self.parts.store
        self.admission = self.parts.admission
        assert self.parts.cluster is not None
        self.cluster = self.parts.cluster

    @property
    def stats(self) -> StatsCollector:
        """The crawl's stats, with the counts the reporter keeps added (as the scheduler
        does after each next_request)."""
        self.reporter.flush()
        return self._stats

    @defer.inlineCallbacks
    def leave_and_close(self):
        """Leave the crawl, then close (as the scheduler does)."""
        yield self.parts.leave()
        yield self.parts.close("finished")

    def wake(self) -> None:
        self.wakes += 1

    def enqueue(self, url: str, **kwargs) -> bool:
        return self.admission.admit(Request(url, **kwargs))

    def hand_out(self) -> Request:
        lane, item = self.frontier.pop()
        request = self.store.unwrap(lane, item)
        assert request is not None
        self.inflight.handed_out(request, lane)
        return request

    def finish(self, request: Request) -> None:
        """Its outcome is known (no engine here: then it is done too)."""
        self.frontier.done(self.inflight.outcome(request))

    def fetch(self, request: Request) -> None:
        """Its response came (a page of its host, as the metrics middleware reports it),
        and the engine is done with it."""
        lane = self.inflight.outcome(request)
        self.frontier.observe(
            lane,
            Measurement(
                latency=0.01, new_connection=False, served_on_connection=2, closed_by_server=False
            ),
        )
        self.frontier.done(lane)

    def crawl(self, most: int = 100) -> list[str]:
        """Hand out and fetch what the frontier gives, up to ``most``; the URLs."""
        urls = []
        while len(urls) < most and len(self.frontier):
            popped = self.frontier.pop()
            if popped is None:
                break
            request = self.store.unwrap(*popped)
            if request is None:
                continue
            self.inflight.handed_out(request, popped[0])
            self.fetch(request)
            urls.append(request.url)
        return urls


def pending(client, crawl_id: str) -> dict[int, int]:
    return {b: client.hlen(f"twolevel:{crawl_id}:q:{b}") for b in range(BUCKETS)}


@pytest_twisted.inlineCallbacks
def test_a_cluster_built_from_its_parts_queues_leases_and_commits(redis_crawl, redis_url):
    client, crawl_id = redis_crawl
    parts = Parts(redis_url, crawl_id, "n1")
    cluster = parts.cluster
    try:
        b0, b1 = host_in(0), host_in(1)
        assert parts.enqueue(f"http://{b0}/a")
        assert parts.enqueue(f"http://{b0}/b")
        assert parts.enqueue(f"http://{b1}/c")
        assert not parts.enqueue(f"http://{b0}/a")  # seen: the dupefilter's keys
        assert parts.stats.get_value("dupefilter/filtered") == 1
        assert len(parts.frontier) == 3 and cluster.busy()
        yield cluster.tick()
        # Each queued request has its copy in Redis, in its bucket.
        assert pending(client, crawl_id) == {0: 2, 1: 1, 2: 0, 3: 0}
        request = parts.hand_out()
        assert parts.stats.get_value("scheduler/dequeued/memory") == 1
        assert cluster.leases_outstanding() == 1
        yield cluster.tick()
        assert sum(pending(client, crawl_id).values()) == 3  # leased: still kept
        parts.finish(request)
        yield cluster.tick()
        # The engine is done with it: its copy went with the next commit.
        assert sum(pending(client, crawl_id).values()) == 2
        assert cluster.leases_outstanding() == 0
    finally:
        yield parts.leave_and_close()
    assert parts.stats.get_value("twolevel/redis/stored") == 3
    assert parts.stats.get_value("twolevel/redis/buckets_taken") == BUCKETS
    assert not client.sismember(f"twolevel:{crawl_id}:members", "n1")


@pytest_twisted.inlineCallbacks
def test_a_request_for_another_nodes_bucket_goes_to_its_inbox(redis_crawl, redis_url):
    client, crawl_id = redis_crawl
    parts = Parts(redis_url, crawl_id, "n1")
    cluster = parts.cluster
    other = Node(client, crawl_id, "n2", buckets=BUCKETS, ttl=600)
    try:
        other.join()  # the table gives n2 half the buckets; n1 still holds them
        yield cluster.tick()  # n1 sees the new table: it drains, then releases them
        yield cluster.tick()
        taken = other.sync(Batch()).acquired
        assert len(taken) == BUCKETS // 2
        theirs = host_in(next(iter(taken)))
        assert parts.enqueue(f"http://{theirs}/x")
        assert len(parts.frontier) == 0  # not queued here...
        yield cluster.tick()
        received = other.sync(Batch()).received  # ...but in n2's inbox
        assert [entry.host for entry in received] == [theirs]
    finally:
        yield parts.leave_and_close()
        other.leave()
    assert parts.stats.get_value("twolevel/redis/routed_out") == 1
    assert parts.stats.get_value("twolevel/redis/buckets_given") == BUCKETS // 2


@defer.inlineCallbacks
def joined_node(redis_url, crawl_id, body, **kwargs):
    """Run ``body(parts)`` (a generator of Deferreds) on a node that joined the crawl
    first (taking every bucket; ``kwargs`` for :class:`Parts`), then leave and close it
    whatever happened."""
    parts = Parts(redis_url, crawl_id, "n1", **kwargs)
    try:
        yield defer.inlineCallbacks(body)(parts)
    finally:
        yield parts.leave_and_close()


@pytest_twisted.inlineCallbacks
def test_a_tick_failing_after_its_commit_sends_nothing_twice(redis_crawl, redis_url):
    """The inbox read fails after the commit (its stream is the wrong type, a real Redis
    error): the next tick must not commit the stores again (their seen keys were appended
    once per send, for ever while the fault lasted)."""
    client, crawl_id = redis_crawl
    stream = f"twolevel:{crawl_id}:inbox:n1"

    def body(parts):
        cluster = parts.cluster
        yield cluster.tick()
        assert parts.enqueue(f"http://{host_in(0)}/a")
        client.delete(stream)
        client.set(stream, "not a stream")
        yield cluster.tick()
        assert cluster.counts["sync_errors"] == 1
        client.delete(stream)
        cluster.node.inbox._ensure_group("n1")
        yield cluster.tick()
        yield cluster.tick()
        assert client.strlen(f"twolevel:{crawl_id}:seen:0") == 16  # one key, sent once
        assert cluster.counts["stored"] == 1

    yield joined_node(redis_url, crawl_id, body)


@pytest_twisted.inlineCallbacks
def test_a_fault_while_applying_a_tick_does_not_stop_the_ticks(redis_crawl, redis_url):
    """An exception in the reactor-side half of a tick used to leave no timer armed: the
    node stopped heartbeating, was reaped, and never came back or exited."""

    def broken_wake() -> None:
        raise RuntimeError("the engine's wake failed")

    def body(parts):
        cluster = parts.cluster
        assert parts.enqueue(f"http://{host_in(0)}/a")  # queued: the tick wakes the engine
        yield cluster.tick()
        assert cluster.counts["apply_errors"] == 1
        assert cluster.next_tick_due  # the next tick is due
        yield cluster.tick()  # and it runs
        assert cluster.counts["apply_errors"] == 2

    yield joined_node(redis_url, redis_crawl[1], body, wake=broken_wake)


@pytest_twisted.inlineCallbacks
def test_start_requests_are_fetched_once_crawl_wide(redis_crawl, redis_url):
    """Scrapy makes start_urls dont_filter, and every node (and a restarted one) yields
    them: each node used to fetch every start URL. A start request now passes the
    crawl's seen keys like any other; other dont_filter requests still bypass them."""
    start = {"dont_filter": True, "meta": {"is_start_request": True}}

    def body(parts):
        url = f"http://{host_in(0)}/"
        assert parts.enqueue(url, **start)
        assert not parts.enqueue(url, **start)  # a second node's copy, or a restart's
        assert parts.enqueue(url, dont_filter=True)  # a callback's: Scrapy's meaning kept
        assert len(parts.frontier) == 2
        yield None

    yield joined_node(redis_url, redis_crawl[1], body)


@pytest_twisted.inlineCallbacks
def test_a_request_that_cannot_be_encoded_is_fetched_before_its_bucket_moves(
    redis_crawl, redis_url
):
    """It has no copy in Redis, so the bucket's next holder could not load it: it was
    lost when the bucket moved. Now the drain waits for it (fetched here, while this node
    still holds the host), and one for a bucket held elsewhere is dropped and counted."""
    client, crawl_id = redis_crawl
    other = Node(client, crawl_id, "n2", buckets=BUCKETS, ttl=600)

    def body(parts):
        cluster = parts.cluster
        yield cluster.tick()
        other.join()
        moving = sorted(other.registry.owned())[0]
        url = f"http://{host_in(moving)}/local"
        assert parts.enqueue(url, callback=lambda response: None)  # not encodable
        yield cluster.tick()  # n1 sees the new table: the bucket drains
        yield cluster.tick()
        assert moving not in other.sync(Batch()).acquired  # not released yet
        request = parts.hand_out()
        assert request.url == url
        yield cluster.tick()
        assert moving not in other.sync(Batch()).acquired  # in flight: still not
        parts.finish(request)
        yield cluster.tick()
        assert moving in other.sync(Batch()).acquired
        assert not parts.enqueue(f"{url}/2", callback=lambda response: None)
        assert parts.stats.get_value("twolevel/redis/unroutable") == 1

    try:
        yield joined_node(redis_url, crawl_id, body)
    finally:
        other.leave()


@pytest_twisted.inlineCallbacks
def test_a_crawl_gone_from_redis_stops_the_spider_with_a_reason(redis_crawl, redis_url):
    client, crawl_id = redis_crawl

    def body(parts):
        cluster = parts.cluster
        yield cluster.tick()
        clear_crawl(client, crawl_id)
        cluster.node._beat_at = float("-inf")  # the next tick heartbeats
        yield cluster.tick()
        assert parts.stopped == ["twolevel_redis_state_lost"]
        assert cluster.tick() is None  # no more ticks

    yield joined_node(redis_url, crawl_id, body)
    assert not list(client.scan_iter(f"twolevel:{crawl_id}:*"))  # leaving wrote nothing


@pytest_twisted.inlineCallbacks
def test_a_large_bucket_is_loaded_a_slice_per_reactor_turn(redis_crawl, redis_url):
    """Loading a bucket of 500k requests in the callback that applies a tick held the
    reactor for seconds. Now SLICE items per turn (its seen keys first); meanwhile a new
    request for it waits in the inbox, and is judged once the seen keys are all in."""
    from twisted.internet import reactor, task

    from scrapy_twolevel.distributed.loader import SLICE

    client, crawl_id = redis_crawl
    requests = [Request(f"http://{host_in(0)}/{i}") for i in range(3 * SLICE)]
    first = Node(client, crawl_id, "n0", buckets=BUCKETS, ttl=600)
    first.join()
    first.sync(Batch())
    codec = SpiderCodec(UnitSpider(), get_crawler(UnitSpider).stats, logunser=False)
    seen = SeenCacheDupeFilter.from_crawler(get_crawler(UnitSpider))
    stores = [(0, f"e{i}", codec.encode(r), seen.request_key(r)) for i, r in enumerate(requests)]
    first.sync(Batch(stores=stores))
    first.leave()  # n1 will take bucket 0 with its 6,000 requests and seen keys
    parts = Parts(redis_url, crawl_id, "n1")  # joins: the first slice is loaded at once
    cluster = parts.cluster
    try:
        # The first slice went to bucket 0's seen keys: every bucket is still loading.
        assert cluster.handing_over() == {"draining": 0, "loading": BUCKETS}
        assert len(parts.frontier) == 0  # the first turn added seen keys only
        assert parts.enqueue(requests[0].url)  # seen already: but it cannot tell yet
        assert len(parts.frontier) == 0  # not admitted: sent to the inbox
        turns = 0
        while cluster.handing_over()["loading"] and turns < 100:
            yield task.deferLater(reactor, 0, lambda: None)
            turns += 1
        assert turns >= 5  # 6,000 keys then 6,000 requests, 2,000 a turn
        assert len(parts.frontier) == len(requests)
        yield cluster.tick()  # the inbox entry comes back: judged now, a duplicate
        yield cluster.tick()
        assert len(parts.frontier) == len(requests)
        assert parts.stats.get_value("dupefilter/filtered") == 1
    finally:
        yield parts.leave_and_close()


@pytest_twisted.inlineCallbacks
def test_a_second_process_under_this_node_id_stops_this_one(redis_crawl, redis_url):
    client, crawl_id = redis_crawl
    newer = Node(client, crawl_id, "n1", buckets=BUCKETS, ttl=600)

    def body(parts):
        cluster = parts.cluster
        yield cluster.tick()
        newer.join()  # a second process started with the same TWOLEVEL_NODE_ID
        assert parts.enqueue(f"http://{host_in(0)}/a")  # something to commit
        yield cluster.tick()
        assert parts.stopped == ["twolevel_node_id_taken"]

    yield joined_node(redis_url, crawl_id, body)
    assert client.sismember(f"twolevel:{crawl_id}:members", "n1")  # the newer one's still
    newer.leave()


@pytest_twisted.inlineCallbacks
def test_a_dont_filter_request_for_a_seen_url_adds_no_seen_key(redis_crawl, redis_url):
    """A recrawled seed or any dont_filter refetch is fetched and stored, but its key is
    in the bucket's seen log already: appending it again grew Redis by 16 bytes per
    refetch, for ever (issue 21, item 12)."""
    client, crawl_id = redis_crawl
    seen_key = f"twolevel:{crawl_id}:seen:0"

    def body(parts):
        url = f"http://{host_in(0)}/page"
        assert parts.enqueue(url)
        assert parts.enqueue(url, dont_filter=True)
        assert parts.enqueue(url, dont_filter=True)
        assert parts.enqueue(f"http://{host_in(0)}/new", dont_filter=True)  # unseen: kept
        yield parts.cluster.tick()
        assert client.hlen(f"twolevel:{crawl_id}:q:0") == 4  # all four are stored
        assert client.strlen(seen_key) == 2 * 16  # the two URLs' keys, once each

    yield joined_node(redis_url, crawl_id, body)


def pages_given(client, crawl_id: str, bucket: int) -> dict[str, int]:
    raw = client.hgetall(f"twolevel:{crawl_id}:pages:{bucket}")
    return {host.decode(): int(n) for host, n in raw.items()}


@pytest_twisted.inlineCallbacks
def test_a_hosts_budget_moves_with_its_bucket(redis_crawl, redis_url):
    """``Host.fetched`` lived in the node's memory only: a bucket's next holder (here after
    the only node left, and another joined) gave every host of it its whole budget again.
    Budget 3: a host that gave one page gives two more, one that had its budget none."""
    client, crawl_id = redis_crawl
    spent, fresh = host_in(0), host_in(1)
    first = Parts(redis_url, crawl_id, "n1", budget=3)
    try:
        for i in range(4):
            assert first.enqueue(f"http://{spent}/{i}")
        assert len(first.crawl()) == 3  # its budget: the fourth URL is dropped
        for i in range(5):
            assert first.enqueue(f"http://{fresh}/{i}")
        assert len(first.crawl(most=1)) == 1
        yield first.cluster.tick()
        assert pages_given(client, crawl_id, 0) == {spent: 3}
        assert pages_given(client, crawl_id, 1) == {fresh: 1}
        assert pending(client, crawl_id) == {0: 0, 1: 4, 2: 0, 3: 0}
    finally:
        yield first.leave_and_close()

    second = Parts(redis_url, crawl_id, "n2", budget=3)
    try:  # it took every bucket when it joined, with fresh's four requests
        assert second.cluster.counts["pages_restored"] == 2
        assert [url.rsplit("/", 1)[1] for url in second.crawl()] == ["1", "2"]  # B - k
        assert len(second.frontier) == 0
        assert not second.enqueue(f"http://{spent}/new")  # had its budget: not again
        assert not second.enqueue(f"http://{fresh}/new")  # has it now
        yield second.cluster.tick()
        assert pending(client, crawl_id) == {0: 0, 1: 0, 2: 0, 3: 0}  # dropped copies too
        assert pages_given(client, crawl_id, 1) == {fresh: 3}
        assert second.stats.get_value("twolevel/hosts_at_budget") == 2
    finally:
        yield second.leave_and_close()


@pytest_twisted.inlineCallbacks
def test_a_host_at_budget_while_its_bucket_drains_is_given_up_by_the_next_holder(
    redis_crawl, redis_url
):
    """The page that uses up the budget ends while the bucket is handed over: the old
    holder's queued copies are stale then and stay in Redis. The new holder gets the
    count with the bucket, gives the host up before queueing its requests, and removes
    their copies from Redis (as for any drop)."""
    client, crawl_id = redis_crawl
    first = Parts(redis_url, crawl_id, "n1", budget=3)
    second = Parts(redis_url, crawl_id, "n2", budget=3)  # n2 half the buckets; n1 holds them
    try:
        moving = sorted(second.cluster.owned)[0]
        host = host_in(moving)
        for i in range(5):
            assert first.enqueue(f"http://{host}/{i}")
        assert len(first.crawl(most=2)) == 2
        last = first.hand_out()  # its third page, in flight as the bucket moves
        yield first.cluster.tick()  # n1 sees the new table: the bucket drains
        yield second.cluster.tick()
        assert not second.cluster.holds(moving)  # not released yet
        first.fetch(last)  # the budget: the two queued here are stale, kept in Redis
        yield first.cluster.tick()  # the count and the lease go out, then the release
        assert pages_given(client, crawl_id, moving) == {host: 3}
        assert client.hlen(f"twolevel:{crawl_id}:q:{moving}") == 2
        yield second.cluster.tick()
        assert second.cluster.holds(moving)
        assert len(second.frontier) == 0 and second.frontier.pop() is None
        assert second.frontier.host(host).given_up
        assert not second.enqueue(f"http://{host}/new")
        yield second.cluster.tick()
        assert client.hlen(f"twolevel:{crawl_id}:q:{moving}") == 0
        assert second.stats.get_value("twolevel/dropped/budget") == 3  # two loaded, one new
    finally:
        for parts in (first, second):
            yield parts.leave_and_close()
