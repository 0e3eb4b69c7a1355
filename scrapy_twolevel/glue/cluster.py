"""The scheduler's side of the distributed mode (``TWOLEVEL_REDIS_URL``): its backend.

Every host belongs to one bucket and every bucket to one node (:mod:`.distributed`). A
node queues the requests of its buckets in its own two-level frontier and keeps a copy
of each in Redis until the page is done; requests for other nodes' buckets go to their
inboxes. All of that is collected in a :class:`~.distributed.node.Batch` on the reactor
and sent by one thread every ``TWOLEVEL_SYNC_INTERVAL`` (:meth:`Cluster.tick`), so
``enqueue_request`` and ``next_request`` never wait for Redis.

A request handed out is leased: its entry stays in Redis until the engine is done with
it, and goes in the same atomic commit as its children. A bucket that moves away is
drained first (the requests in flight finish and are committed), then released, and its
new holder loads it from Redis. A node that was reaped (paused or cut off for longer than
``TWOLEVEL_NODE_TTL``) drops everything it held and joins again.

:class:`Cluster` is one of the scheduler's backends (:class:`~.backend.Backend`). It is
handed what it needs, never the scheduler: the intake (lane, quality, queue), the request
codec, the reporter (stats, once-only warnings), the dupefilter's seen keys
(:class:`~.backend.SeenKeys`), the in-flight registry (its leases end there), the number
of queued requests and a way to wake the engine.
"""

from __future__ import annotations

import logging
import os
import time
from collections import Counter
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NamedTuple

from .._engine import call_later, peek_meta
from ..distributed.batch import AfterCommit, Batch, SyncResult
from ..distributed.buckets import bucket_of
from ..distributed.connect import default_node_id
from ..distributed.history import HistoryWrites, RedisHistoryStore, RedisModelStore
from ..distributed.inbox import Entry
from ..distributed.local_only import LocalOnlyRequests
from ..distributed.node import Node
from ..distributed.registry import IdTaken, StateLost
from ..frontier import memory_queue
from .bucket_loader import BucketLoader
from .intake import queue

if TYPE_CHECKING:
    from scrapy import Request

    from ..codec import SpiderCodec
    from ..config import ClusterConfig
    from ..frontier import Frontier
    from ..recrawl.planner import Plan
    from .backend import FrontierMaker, SeenKeys
    from .inflight import InFlight
    from .intake import Intake
    from .reporting import Reporter
    from .seed_planner import SeedPlanner

logger = logging.getLogger(__name__)

#: Longest wait between retries while Redis cannot be reached.
MAX_RETRY_DELAY = 5.0


class Owned(NamedTuple):
    """A queued request of a held bucket; stale if the bucket was held again since (``gen``).
    Encoded if it can be (decoded when handed out): a node holds all its buckets' pending
    requests, and bytes cost little memory and no garbage collector time."""

    request: Request | bytes
    bucket: int
    gen: int
    entry_id: str | None  # None: not stored in Redis (it could not be encoded)


def crawl_id_of(config: ClusterConfig, spider_name: str) -> str:
    """The crawl's id: ``TWOLEVEL_CRAWL_ID``, else the spider's name."""
    return config.crawl_id or spider_name


def recrawl_stores(
    redis: Any, crawl_id: str, buckets: int, intake: Intake, codec: SpiderCodec, reporter: Reporter
) -> tuple[RedisHistoryStore, RedisModelStore]:
    """The crawl's recrawl history and model in Redis (:mod:`.distributed.history`); a seed
    plan goes with its request's host's bucket (``None``: it cannot be decoded)."""

    def bucket_of_plan(plan: Plan) -> int | None:
        try:
            request = codec.decode(plan.request)
        except Exception as exc:  # damaged, or a callback this spider does not have
            reporter.undecodable(exc)
            return None
        return bucket_of(intake.lane(request), buckets)

    history = RedisHistoryStore(redis, crawl_id, bucket_of_plan=bucket_of_plan)
    return history, RedisModelStore(redis, crawl_id)


class Cluster:
    """Owns the node's Redis state: the scheduler's backend in the distributed mode."""

    def __init__(
        self,
        config: ClusterConfig,
        spider_name: str,
        *,
        redis: Any,
        intake: Intake,
        codec: SpiderCodec,
        reporter: Reporter,
        seen: SeenKeys,
        inflight: InFlight,
        queued: Callable[[], int],
        wake: Callable[[], object],
        stop: Callable[[str], object] = lambda reason: None,
        history: RedisHistoryStore | None = None,
        seeds: SeedPlanner | None = None,
    ) -> None:
        """``redis``: the client (:func:`~.distributed.connect.connect`); ``queued``:
        requests in the local frontier; ``wake``: ask the engine for requests; ``stop``:
        close the spider, with a reason; ``history`` and ``seeds``: the recrawl history in
        Redis (:func:`recrawl_stores`) and the seed planner over it (``TWOLEVEL_RECRAWL``)."""
        self.config = config
        self._intake = intake
        self._codec = codec
        self._reporter = reporter
        self._seen = seen
        self._inflight = inflight
        self._queued = queued
        self._wake = wake
        self._stop = stop
        self.frontier: Frontier | None = None
        self.seeds = seeds
        self.crawl_id = crawl_id_of(config, spider_name)
        self.node_id = config.node_id or default_node_id()
        self.redis = redis
        self.node = Node(
            self.redis,
            self.crawl_id,
            self.node_id,
            buckets=config.buckets,
            ttl=config.node_ttl,
            rebalance_every=config.rebalance_interval,
            rebalance_tolerance=config.rebalance_tolerance,
        )
        self._run = os.urandom(4).hex()  # entry ids stay unique over restarts
        self._next_id = 0
        self._staged = Batch()
        self._owned: frozenset[int] = frozenset()
        self._held: dict[int, int] = {}  # bucket -> generation
        self._gen = 0
        self._draining: set[int] = set()
        #: Requests that cannot be encoded (no copy in Redis), queued per bucket, and the
        #: generation of each draining bucket: it is released once they are fetched.
        self._local_only = LocalOnlyRequests()
        self._drain_gen: dict[int, int] = {}
        #: Requests handed out and leased in the in-flight registry, in all and per bucket.
        self._leased = 0
        self._leased_per_bucket: Counter[int] = Counter()
        self._parked: dict[int, list[Entry]] = {}
        self._parked_ids: set[bytes] = set()
        self._crawl_idle = False
        self._crawl_planned = False
        self._idle_since: float | None = None
        #: The recrawl history in Redis: its writes go out with this node's ticks.
        self.history = history
        #: The tick in flight (its Deferred) and the batch it sends.
        self._ticking: Any = None
        self._sending: Batch | None = None
        self._timer: Any = None
        self._failing_since: float | None = None
        self._retry_delay = config.sync_interval
        self._pool: Any = None
        self._closed = False
        self._leaving: Any = None
        self._loader = BucketLoader(
            add_keys=seen.add_keys, load=self._load, loaded=self._bucket_loaded, wake=wake
        )
        self.counts: Counter[str] = Counter()
        self.sync_cpu = 0.0  # CPU seconds spent in the Redis thread
        self.inbox_depth = 0  # entries in this node's inbox, read with its heartbeats

    # -- life cycle (the backend's) -----------------------------------------------------------

    def open(self, make_frontier: FrontierMaker) -> Frontier:
        """The local frontier: in memory (Redis keeps the copies, and the pages each
        budgeted host gave: :meth:`_page`)."""
        self.frontier = make_frontier(memory_queue, on_page=self._page)
        return self.frontier

    def join(self) -> None:
        """Join the crawl and take this node's buckets; blocks once, at start-up."""
        from twisted.python.threadpool import ThreadPool

        self._seen.open()  # before the buckets taken bring their seen keys
        self._apply(self.node.first_sync())
        # One thread of its own: Scrapy's DNS lookups use the reactor's pool.
        self._pool = ThreadPool(1, 1, name="twolevel-redis")
        self._pool.start()
        self._arm(self.config.sync_interval)
        self._reporter.info(
            "Joined crawl %(crawl)s as node %(node)s: the table gives it %(owned)d of "
            "%(buckets)d buckets; it holds %(held)d of them now and takes the rest as "
            "their previous holders hand them over",
            dict(crawl=self.crawl_id, node=self.node_id, owned=len(self._owned),
                 held=len(self._held), buckets=self.config.buckets),
        )  # fmt: skip

    def start(self) -> None:
        """The dupefilter was opened by :meth:`join`."""
        return None

    def abort(self) -> None:
        """Release the connection after a failed start (the crawl refuses to start)."""
        if self.frontier is not None:
            self.frontier.close()
            self.frontier = None
        self._closed = True
        if self._pool is not None:
            self._pool.stop()
        self.redis.close()

    def leave(self) -> Any:
        """Commit what is finished, release the buckets, leave; returns a Deferred.

        The first step of closing: the last commit needs the frontier's and the engine's
        view of the leases."""
        from twisted.internet import defer, reactor, threads

        self._closed = True
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

        @defer.inlineCallbacks
        def finish() -> Any:
            if self._ticking is not None:  # let the tick in flight end
                yield self._ticking
            self._report_local_only_lost()
            batch = self._take_batch(final=True)
            try:
                yield threads.deferToThreadPool(
                    reactor,  # type: ignore[arg-type]  # every reactor runs threads
                    self._pool,
                    self._leave,
                    batch,
                )
            except Exception as exc:
                self._reporter.leave_failed(self.crawl_id, exc)
            finally:
                self._pool.stop()
                self._report()
                self.redis.close()

        self._leaving = finish()
        return self._leaving

    def _report_local_only_lost(self) -> None:
        lost = self._local_only.take_all()
        self.counts["local_only_lost"] += len(lost)
        self._reporter.local_only_lost(lost)

    def close(self, reason: str) -> Any:
        """Close the frontier; the dupefilter once this node has left."""
        if self.frontier is not None:
            self.frontier.close()
            self.frontier = None
        return self._leaving.addBoth(lambda _: self._seen.close(reason))

    def _leave(self, batch: Batch) -> None:
        done = self.node.flush(batch)
        self.counts.update(stored=done.stored, routed_out=done.routed, round_trips=done.round_trips)
        self.node.leave()

    # -- the scheduler's calls ---------------------------------------------------------------

    def enqueue(self, request: Request) -> bool:
        """Queue ``request`` here if its bucket is held, else route it to its owner (the
        lane is the host: topics are not supported here)."""
        host = self._intake.lane(request)
        bucket = bucket_of(host, self.config.buckets)
        if bucket not in self._held or bucket in self._loader.loading:  # via the inbox
            data = self._codec.encode(request)
            if data is None and (bucket in self._held or bucket in self._draining):
                # Its host is still this node's (loading, or draining: the release waits
                # for the requests kept here), and it cannot be sent elsewhere.
                return self._admit(request, host, self._intake.quality(request), bucket, None)
            if data is None:
                # Another node holds its host and only bytes cross: it cannot go there.
                self._reporter.count_once(
                    "redis/unroutable",
                    "A request that cannot be encoded (%(request)s) is for a host another "
                    "node holds, so it cannot be sent there; it is dropped. Keep callbacks "
                    "spider methods and meta values JSON-friendly.",
                    request,
                )
                return False
            self._staged.routes.append((bucket, host, data))
            return True
        quality = self._intake.quality(request)
        return self._admit(request, host, quality, bucket, self._encode(request))

    def _admit(
        self, request: Request, host: str, quality: float, bucket: int, data: bytes | None
    ) -> bool:
        """A new request of a held bucket: filtered if seen, else queued and stored."""
        seen = self._seen
        key = seen.request_key(request)
        # Start requests are dont_filter, but every node and restart yields them: once.
        filtered = not request.dont_filter or peek_meta(request).get("is_start_request")
        if filtered and seen.key_seen(key):
            seen.log(request, self._reporter.spider)  # type: ignore[arg-type]
            return False
        if not filtered and seen.has_key(key):
            key = b""  # fetched again (dont_filter): its key is in Redis already
        seeds = self.seeds
        if seeds is not None and seeds.accepting(request):
            data = self._encode(request)  # the seed's fetch is named in its meta now
        return self._queue_local(request, host, quality, bucket, key, data)

    def _queue_local(
        self,
        request: Request,
        host: str,
        quality: float,
        bucket: int,
        key: bytes,
        data: bytes | None,
        entry_id: str | None = None,
    ) -> bool:
        if data is not None and entry_id is None:
            entry_id = self._new_id()
            self._staged.stores.append((bucket, entry_id, data, key))
        gen = self._held.get(bucket) or self._drain_gen[bucket]
        item = Owned(request if data is None else data, bucket, gen, entry_id)
        assert self.frontier is not None
        if not queue(self.frontier, host, quality, item, self._reporter):
            self.dropped(item)
            return False
        if entry_id is None:
            self._local_only.add(bucket, request.url)
        return True

    def _page(self, host: str, fetched: int) -> None:
        """A host with a page budget has given ``fetched`` pages: the count goes to
        ``pages:<bucket>`` with the next commit, so the bucket's next holder (a move, a
        node that died or left) does not give the host its whole budget again."""
        bucket = bucket_of(host, self.config.buckets)
        if bucket in self._held or bucket in self._draining:  # else refused: not ours
            self._staged.pages[(bucket, host)] = fetched

    def dropped(self, item: Any) -> None:
        """A queued item the frontier dropped (its host was given up): drop its copy."""
        if isinstance(item, Owned) and item.entry_id is not None:
            if self._held.get(item.bucket) == item.gen:
                self._staged.dones.append((item.bucket, item.entry_id))
        elif isinstance(item, Owned) and self._is_current(item):
            if not isinstance(item.request, bytes):  # never stored: kept here only
                self._local_only.remove(item.bucket, item.request.url)

    def unpack(self, lane: str, item: Any) -> Request | None:
        """The request to hand out for a popped item, or ``None`` if the copy is stale
        (its bucket moved: the new holder has it)."""
        assert isinstance(item, Owned)
        if not self._is_current(item):
            self.counts["stale_skipped"] += 1
            return None
        kept = item.request
        request = self._decode(kept) if isinstance(kept, bytes) else kept
        if request is None:
            self.dropped(item)  # it was decoded before: only a codec that changed since
            return None
        if item.entry_id is None:
            self._local_only.remove(item.bucket, request.url)
        # Leased even without a copy in Redis: a draining bucket waits for it too.
        self._inflight.lease(request, self, (item.bucket, item.entry_id))
        self._leased += 1
        self._leased_per_bucket[item.bucket] += 1
        self._reporter.inc("scheduler/dequeued/memory")
        return request

    def finished(self, request: Request, token: tuple[int, str | None]) -> None:
        """The engine is done with a leased request: its entry goes with the next commit,
        or its seen key if it has none (sent at queue time, it would mark the URL seen
        for good when a node stops with the request still queued here)."""
        bucket, entry_id = token
        self._leased -= 1
        self._leased_per_bucket[bucket] -= 1
        if entry_id is None:
            self._staged.stores.append((bucket, "", b"", self._seen.request_key(request)))
        else:
            self._staged.dones.append((bucket, entry_id))

    def _is_current(self, item: Owned) -> bool:
        """Not stale: its bucket is held, or draining with it still to fetch (a request
        without a copy in Redis, which the bucket's next holder could not load)."""
        if self._held.get(item.bucket) == item.gen:
            return True
        return item.entry_id is None and self._drain_gen.get(item.bucket) == item.gen

    def may_dispatch(self) -> bool:
        """``False`` after half the node ttl without a heartbeat: the buckets may soon be
        someone else's."""
        if self.node.may_dispatch():
            return True
        self._reporter.inc("twolevel/redis/held_back")
        return False

    def dispatched(self) -> None:
        return None

    def status(self) -> dict[str, Any]:
        """The distributed mode as this node knows it without a Redis round trip (the live
        view reads it on the reactor): the bucket table of its last tick, what it holds and
        what is moving, its inbox's depth at its last heartbeat, its leases and counts. The
        other nodes' inboxes and pending requests: ``scrapy twolevel status``."""
        node, counts = self.node, self.counts
        return {
            "crawl_id": self.crawl_id,
            "node": self.node_id,
            "buckets_owned": node.registry.table.counts(),
            "buckets_held_here": len(node.held),
            "leases_outstanding": self.leases_outstanding(),
            "inbox_depth": self.inbox_depth,
            "buckets_moving": self.handing_over(),
            **{
                key: counts[key]
                for key in ("routed_in", "routed_out", "reaped", "rejoined", "loaded")
            },
        }

    def handing_over(self) -> dict[str, int]:
        """Buckets moving: given away and still draining here, taken and still loading."""
        return {"draining": len(self._draining), "loading": len(self._loader.loading)}

    def leases_outstanding(self) -> int:
        """Requests handed out whose end is not yet committed to Redis: what a crash now
        would have the other nodes fetch again."""
        in_flight = len(self._sending.dones) if self._sending is not None else 0
        return self._leased + len(self._staged.dones) + in_flight

    def busy(self) -> bool:
        """Whether this node must stay open: work here, or anywhere in the crawl (seed
        refetches planned anywhere included, until ``TWOLEVEL_RECRAWL_DURATION``)."""
        if self._leased or self._staged or self._parked or self._draining or self._loader.loading:
            return True
        if self.history is not None and self.history.has_writes:
            return True
        if not self._crawl_idle:
            return True
        seeds = self.seeds
        return self._crawl_planned and seeds is not None and not seeds.expired

    # -- the tick ----------------------------------------------------------------------------

    def _arm(self, delay: float) -> None:
        if not self._closed:
            self._timer = call_later(delay, self.tick)

    def tick(self) -> Any:
        """Send what changed, apply what the others did (runs every sync interval).

        Returns the tick's Deferred, or ``None`` when none was started (one in flight, or
        closed)."""
        from twisted.internet import reactor, threads

        self._timer = None
        if self._ticking is not None or self._closed:
            return None
        batch = self._take_batch()
        self._sending = batch
        self._ticking = threads.deferToThreadPool(
            reactor,  # type: ignore[arg-type]  # every reactor runs threads
            self._pool,
            self.node.sync,
            batch,
        )
        self._ticking.addCallbacks(self._synced, self._sync_failed, errbackArgs=(batch,))
        return self._ticking

    def _take_batch(self, *, final: bool = False) -> Batch:
        # Ends the leases of finished requests (their entries join the staged dones), and
        # a finished seed fetch's next plan joins the history's writes: both go out now.
        self._inflight.collect()
        batch, self._staged = self._staged, Batch()
        if self.history is not None:
            batch.history = self.history.take()
        for bucket in list(self._draining):
            if not (self._leased_per_bucket[bucket] or self._local_only.count(bucket)) or final:
                self._draining.discard(bucket)
                self._drain_gen.pop(bucket, None)
                self._local_only.discard_bucket(bucket)
                batch.release.append(bucket)
        if not final:
            batch.check_idle = (
                not (self._queued() or self._leased or self._parked or batch or self._draining)
                and not self._loader.loading
            )
        return batch

    def _synced(self, result: SyncResult) -> None:
        self._ticking = self._sending = None
        if self._failing_since is not None:
            self._reporter.warning("Redis at TWOLEVEL_REDIS_URL is reachable again; nothing lost.")
            self._failing_since = None
            self._retry_delay = self.config.sync_interval
        try:
            if not self._closed:
                self._apply(result)
        except Exception:
            # Never stop the ticks: a node without heartbeats is reaped and stays out.
            self.counts["apply_errors"] += 1
            self._reporter.apply_failed()
        finally:
            self._arm(self.config.sync_interval)

    def _sync_failed(self, failure: Any, batch: Batch) -> None:
        self._ticking = self._sending = None
        if isinstance(failure.value, StateLost | IdTaken):  # no more ticks: they would fight
            logger.error("%s", failure.value, extra={"spider": self._reporter.spider})
            self._closed = True
            lost = isinstance(failure.value, StateLost)
            self._stop("twolevel_redis_state_lost" if lost else "twolevel_node_id_taken")
            return
        if isinstance(failure.value, AfterCommit):
            # Committed: only what the tick had not done yet is sent again.
            batch, done = failure.value.remaining, failure.value.result
            self.counts.update(stored=done.stored, routed_out=done.routed, refused=done.refused)
        elif self.history is not None:  # the history goes out with the next tick's batch
            self.history.put_back(batch.history)
            batch.history = HistoryWrites()
        self._staged.prepend(batch)
        self.counts["sync_errors"] += 1
        if self._failing_since is None:
            self._failing_since = time.monotonic()
            self._reporter.redis_unreachable(failure.getErrorMessage())
        self._retry_delay = min(self._retry_delay * 2, MAX_RETRY_DELAY)
        self._arm(self._retry_delay)

    def _apply(self, result: SyncResult) -> None:
        """Apply a tick's result to the local frontier (reactor thread)."""
        counts = self.counts
        self.sync_cpu += result.cpu
        self._reporter.tick_result(result, counts)
        counts.update(leases_dropped=result.dropped_leases, stores_dropped=result.dropped_stores)
        if self.node.rejoins != self.node.rejoins_applied:  # though that tick failed
            self._forget_everything()
            self.node.rejoins_applied = self.node.rejoins
        self._owned = result.owned
        if result.inbox_depth is not None:
            self.inbox_depth = result.inbox_depth
        given = [b for b in self._held if b not in result.owned]
        for bucket in given:
            # Its queued copies go stale (Redis has them), but for those it has not.
            self._drain_gen[bucket] = self._held.pop(bucket)
            self._loader.cancel(bucket)
            self._draining.add(bucket)
            counts["buckets_given"] += 1
        seeds, history = self.seeds, self.history
        if given and seeds is not None and history is not None:
            seeds.drop_plans(history.seeds_in(given))  # the new holder loads them
        for bucket, (entries, keys) in result.acquired.items():
            self._gen += 1
            self._held[bucket] = self._gen
            counts["buckets_taken"] += 1
            # Before its requests are queued: a host that had its budget is given up (the
            # loaded copies of its requests are then dropped, and removed from Redis).
            self._restore_pages(result.pages.get(bucket, {}))
            if bucket in result.plans and seeds is not None and history is not None:
                counts["plans_loaded"] += seeds.adopt_stored(history, bucket, result.plans[bucket])
            counts["loaded"] += len(entries)
            self._loader.add(bucket, keys, entries)  # in slices, seen keys first
        woke = self._loader.run()
        for entry in result.received:
            counts["routed_in"] += 1
            woke |= self._receive(entry)
        for bucket in [b for b in self._parked if b not in self._owned]:
            for entry in self._parked.pop(bucket):  # the bucket moved on before arriving
                self._parked_ids.discard(entry.id)
                self._forward(entry)
        if result.idle is not None:
            self._note_idle(result.idle)
            self._crawl_planned = bool(result.planned)
        if result.received or result.acquired:
            self._crawl_idle = False
            self._idle_since = None
        if woke or self._crawl_idle or self._queued():
            # Also after a heartbeat let a held-back node dispatch again.
            self._wake()

    def _note_idle(self, idle: bool) -> None:
        if not idle:
            self._crawl_idle = False
            self._idle_since = None
            return
        now = time.monotonic()
        if self._idle_since is None:
            self._idle_since = now
        self._crawl_idle = now - self._idle_since >= self.config.wait_for_work

    def _forget_everything(self) -> None:
        """This node was reaped: its buckets, leases and inbox belong to others now."""
        self.counts["rejoined"] += 1
        self.counts["leases_dropped"] += self._leased
        self._reporter.node_reaped(self._leased)
        self._seen.forget()
        if self.seeds is not None and self.history is not None:
            self.seeds.drop_plans(self.history.seeds_in(self._held))
            self.history.forget_plans()
        self._held.clear()
        self._draining.clear()
        self._loader.cancel_all()
        # Requests without a copy in Redis die with this node's claim on their hosts.
        self.counts["local_only_lost"] += len(self._local_only.take_all())
        self._drain_gen.clear()
        self._inflight.drop(self)
        self._leased = 0
        self._leased_per_bucket.clear()
        self._parked.clear()
        self._parked_ids.clear()
        kept_routes = self._staged.routes
        self._staged = Batch(routes=kept_routes)

    def _restore_pages(self, pages: dict[str, int]) -> None:
        """The pages the hosts of a bucket just taken gave on its earlier holders."""
        frontier = self.frontier
        if frontier is None:
            return
        for host, fetched in pages.items():
            frontier.restore_pages(host, fetched)
            self.counts["pages_restored"] += 1

    def _load(self, bucket: int, entry_id: str, data: bytes) -> bool:
        """Queue a request of a bucket just taken over (its entry stays as it is)."""
        request = self._decode(data)
        if request is None:
            self._staged.dones.append((bucket, entry_id))
            return False
        if self.seeds is not None:
            self.seeds.reloaded(request)
        intake = self._intake
        key = self._seen.request_key(request)
        return self._queue_local(
            request, intake.lane(request), intake.quality(request), bucket, key, data, entry_id
        )

    def _bucket_loaded(self, bucket: int) -> bool:
        """The cross URLs that waited for the bucket's seen keys go in now."""
        woke = False
        for entry in self._parked.pop(bucket, ()):
            self._parked_ids.discard(entry.id)
            woke |= self._receive(entry)
        return woke

    def _receive(self, entry: Entry) -> bool:
        """An inbox entry: store it if its bucket is held here, park it if it will be,
        forward it otherwise; acknowledged in the commit that stores or forwards it."""
        bucket = bucket_of(entry.host, self.config.buckets)
        if bucket in self._held and bucket not in self._loader.loading:
            self._staged.acks.append(entry.id)
            request = self._decode(entry.data)
            if request is None:
                return False
            intake = self._intake
            return self._admit(
                request, intake.lane(request), intake.quality(request), bucket, entry.data
            )
        if bucket in self._owned:
            if entry.id not in self._parked_ids:  # read again after a failed tick
                self._parked_ids.add(entry.id)
                self._parked.setdefault(bucket, []).append(entry)
            return False
        self._forward(entry)
        return False

    def _forward(self, entry: Entry) -> None:
        bucket = bucket_of(entry.host, self.config.buckets)
        self._staged.routes.append((bucket, entry.host, entry.data))
        self._staged.acks.append(entry.id)
        self.counts["forwarded"] += 1

    # -- helpers ----------------------------------------------------------------------------

    def _new_id(self) -> str:
        self._next_id += 1
        return f"{self._run}-{self._next_id:x}"

    def _encode(self, request: Request) -> bytes | None:
        data = self._codec.encode(request)
        if data is not None:
            return data
        # Not encodable: it cannot be shared, so it stays in this node's memory only.
        self.counts["kept_local"] += 1
        return None

    def _decode(self, data: bytes) -> Request | None:
        try:
            return self._codec.decode(data)
        except Exception as exc:  # damaged, or a callback this spider does not have
            self._reporter.undecodable(exc)
            return None

    def _report(self) -> None:
        self._reporter.report_cluster(
            self.node_id,
            self.crawl_id,
            len(self._owned),
            self.sync_cpu,
            self.counts,
            recrawl=self.history is not None,
        )
