"""The distributed mode's tick: what a node sends to Redis and what it learns back.

Everything a node changes (copies of queued requests, ends of leases, requests routed to
other nodes, page counts, bucket releases, recrawl history) is staged on the reactor
(:class:`~.store.ClusterStore`) and sent by one thread every ``TWOLEVEL_SYNC_INTERVAL``
(:meth:`ClusterSync.tick`), so ``enqueue_request`` and ``next_request`` never wait for
Redis. The tick's result is applied on the reactor: buckets given away start draining,
buckets taken are loaded a slice at a time (:mod:`.loader`), inbox entries are admitted
(:mod:`.admission`). A node that was reaped (paused or cut off for longer than
``TWOLEVEL_NODE_TTL``) drops everything it held and joins again; one that cannot reach
Redis retries with back-off and keeps its requests.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..glue.timers import Timer
from .batch import AfterCommit, Batch, SyncResult
from .history import HistoryWrites
from .loader import BucketLoader
from .registry import IdTaken, StateLost

if TYPE_CHECKING:
    from ..frontier import Frontier
    from ..glue.inflight import InFlight
    from ..glue.reporting import Reporter
    from ..glue.seed_planner import SeedPlanner
    from .admission import ClusterAdmission, SeenKeys
    from .history import RedisHistoryStore
    from .messages import ClusterMessages
    from .node import Node
    from .ownership import Ownership
    from .store import ClusterStore

logger = logging.getLogger(__name__)

#: Longest wait between retries while Redis cannot be reached.
MAX_RETRY_DELAY = 5.0


class ClusterSync:
    """This node's membership and ticks; see the module docstring."""

    def __init__(
        self,
        *,
        node: Node,
        redis: Any,
        crawl_id: str,
        node_id: str,
        buckets: int,
        sync_interval: float,
        wait_for_work: float,
        ownership: Ownership,
        store: ClusterStore,
        admission: ClusterAdmission,
        frontier: Frontier,
        seen: SeenKeys,
        seeds: SeedPlanner | None,
        history: RedisHistoryStore | None,
        inflight: InFlight,
        reporter: Reporter,
        messages: ClusterMessages,
        counts: Counter[str],
        queued: Callable[[], int],
        wake: Callable[[], object],
        stop: Callable[[str], object],
    ) -> None:
        """``wait_for_work``: seconds the whole crawl must be idle before it ends;
        ``queued``: requests in the local frontier; ``wake``: ask the engine for requests;
        ``stop``: close the spider, with a reason."""
        self.node = node
        self.redis = redis
        self.crawl_id = crawl_id
        self.node_id = node_id
        self._buckets = buckets
        self._sync_interval = sync_interval
        self._wait_for_work = wait_for_work
        self._ownership = ownership
        self._store = store
        self._admission = admission
        self._frontier = frontier
        self._seen = seen
        self._seeds = seeds
        self._history = history
        self._inflight = inflight
        self._reporter = reporter
        self._messages = messages
        self.counts = counts
        self._queued = queued
        self._wake = wake
        self._stop = stop
        self._loader = BucketLoader(
            loading=ownership.loading,
            add_keys=seen.add_keys,
            load=admission.load,
            loaded=admission.loaded,
            wake=wake,
        )
        self._crawl_idle = False
        self._crawl_planned = False
        self._idle_since: float | None = None
        #: The tick in flight (its Deferred) and the batch it sends.
        self._ticking: Any = None
        self._sending: Batch | None = None
        self._next_tick = Timer(self.tick)
        self._failing_since: float | None = None
        self._retry_delay = sync_interval
        self._pool: Any = None
        self._closed = False
        self._leaving: Any = None
        self.sync_cpu = 0.0  # CPU seconds spent in the Redis thread
        self.inbox_depth = 0  # entries in this node's inbox, read with its heartbeats

    # -- life cycle ---------------------------------------------------------------------------

    def join(self) -> None:
        """Join the crawl and take this node's buckets; blocks once, at start-up."""
        from twisted.python.threadpool import ThreadPool

        self._seen.open()  # before the buckets taken bring their seen keys
        self._apply(self.node.first_sync())
        # One thread of its own: Scrapy's DNS lookups use the reactor's pool.
        self._pool = ThreadPool(1, 1, name="twolevel-redis")
        self._pool.start()
        self._arm(self._sync_interval)
        self._reporter.info(
            "Joined crawl %(crawl)s as node %(node)s: the table gives it %(owned)d of "
            "%(buckets)d buckets; it holds %(held)d of them now and takes the rest as "
            "their previous holders hand them over",
            dict(crawl=self.crawl_id, node=self.node_id, owned=len(self._ownership.owned),
                 held=self._ownership.held, buckets=self._buckets),
        )  # fmt: skip

    def abort(self) -> None:
        """Release the connection after a failed start (the crawl refuses to start)."""
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
        self._next_tick.cancel()

        @defer.inlineCallbacks
        def finish() -> Any:
            if self._ticking is not None:  # let the tick in flight end
                yield self._ticking
            lost = self._ownership.local_only.take_all()
            self.counts["local_only_lost"] += len(lost)
            self._messages.local_only_lost(lost)
            batch = self._take_batch(final=True)
            try:
                yield threads.deferToThreadPool(
                    reactor,  # type: ignore[arg-type]  # every reactor runs threads
                    self._pool,
                    self._leave,
                    batch,
                )
            except Exception as exc:
                self._messages.leave_failed(self.crawl_id, exc)
            finally:
                self._pool.stop()
                self._report()
                self.redis.close()

        self._leaving = finish()
        return self._leaving

    def close(self, reason: str) -> Any:
        """The dupefilter closes once this node has left."""
        return self._leaving.addBoth(lambda _: self._seen.close(reason))

    def _leave(self, batch: Batch) -> None:
        done = self.node.flush(batch)
        self.counts.update(stored=done.stored, routed_out=done.routed, round_trips=done.round_trips)
        self.node.leave()

    # -- what the crawl asks ------------------------------------------------------------------

    def busy(self) -> bool:
        """Whether this node must stay open: work here, or anywhere in the crawl (seed
        refetches planned anywhere included, until ``TWOLEVEL_RECRAWL_DURATION``)."""
        ownership = self._ownership
        if (
            ownership.leased
            or self._store.staged
            or ownership.parked
            or ownership.draining
            or ownership.loading
        ):
            return True
        if self._history is not None and self._history.has_writes:
            return True
        if not self._crawl_idle:
            return True
        seeds = self._seeds
        return self._crawl_planned and seeds is not None and not seeds.expired

    @property
    def next_tick_due(self) -> bool:
        """Whether the next tick is armed (it always is while the node is in the crawl)."""
        return self._next_tick.armed

    @property
    def owned(self) -> frozenset[int]:
        """The buckets the table of the last tick gives this node."""
        return self._ownership.owned

    def holds(self, bucket: int) -> bool:
        """Whether this node holds ``bucket`` now (taken over, loaded or still loading)."""
        return self._ownership.holds(bucket)

    def handing_over(self) -> dict[str, int]:
        """Buckets moving: given away and still draining here, taken and still loading."""
        return {"draining": self._ownership.draining, "loading": len(self._ownership.loading)}

    def leases_outstanding(self) -> int:
        """Requests handed out whose end is not yet committed to Redis: what a crash now
        would have the other nodes fetch again."""
        in_flight = len(self._sending.dones) if self._sending is not None else 0
        return self._ownership.leased + len(self._store.staged.dones) + in_flight

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

    # -- the tick ----------------------------------------------------------------------------

    def _arm(self, delay: float) -> None:
        if not self._closed:
            self._next_tick.arm(delay)

    def tick(self) -> Any:
        """Send what changed, apply what the others did (runs every sync interval).

        Returns the tick's Deferred, or ``None`` when none was started (one in flight, or
        closed)."""
        from twisted.internet import reactor, threads

        self._next_tick.cancel()  # called early (tests): the next is armed after this one
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
        batch = self._store.take_batch()
        if self._history is not None:
            batch.history = self._history.take()
        batch.release.extend(self._ownership.release_drained(final=final))
        if not final:
            ownership = self._ownership
            batch.check_idle = (
                not (
                    self._queued()
                    or ownership.leased
                    or ownership.parked
                    or batch
                    or ownership.draining
                )
                and not ownership.loading
            )
        return batch

    def _synced(self, result: SyncResult) -> None:
        self._ticking = self._sending = None
        if self._failing_since is not None:
            self._reporter.warning("Redis at TWOLEVEL_REDIS_URL is reachable again; nothing lost.")
            self._failing_since = None
            self._retry_delay = self._sync_interval
        try:
            if not self._closed:
                self._apply(result)
        except Exception:
            # Never stop the ticks: a node without heartbeats is reaped and stays out.
            self.counts["apply_errors"] += 1
            self._messages.apply_failed()
        finally:
            self._arm(self._sync_interval)

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
        elif self._history is not None:  # the history goes out with the next tick's batch
            self._history.put_back(batch.history)
            batch.history = HistoryWrites()
        self._store.put_back(batch)
        self.counts["sync_errors"] += 1
        if self._failing_since is None:
            self._failing_since = time.monotonic()
            self._messages.redis_unreachable(failure.getErrorMessage())
        self._retry_delay = min(self._retry_delay * 2, MAX_RETRY_DELAY)
        self._arm(self._retry_delay)

    def _apply(self, result: SyncResult) -> None:
        """Apply a tick's result to the local frontier (reactor thread)."""
        counts, ownership = self.counts, self._ownership
        self.sync_cpu += result.cpu
        self._messages.tick_result(result, counts)
        counts.update(leases_dropped=result.dropped_leases, stores_dropped=result.dropped_stores)
        if self.node.take_rejoin():  # though that tick failed
            self._forget_everything()
        if result.inbox_depth is not None:
            self.inbox_depth = result.inbox_depth
        given = ownership.give_away(result.owned)
        for bucket in given:
            self._loader.cancel(bucket)
        counts["buckets_given"] += len(given)
        seeds, history = self._seeds, self._history
        if given and seeds is not None and history is not None:
            seeds.drop_plans(history.seeds_in(given))  # the new holder loads them
        for bucket, (entries, keys) in result.acquired.items():
            ownership.take(bucket)
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
            woke |= self._admission.receive(entry)
        for entry in ownership.parked_elsewhere():  # the bucket moved on before arriving
            self._admission.forward(entry)
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
        self._crawl_idle = now - self._idle_since >= self._wait_for_work

    def _forget_everything(self) -> None:
        """This node was reaped: its buckets, leases and inbox belong to others now."""
        self.counts["rejoined"] += 1
        leases = self._ownership.leased
        self.counts["leases_dropped"] += leases
        self._messages.node_reaped(leases)
        self._seen.forget()
        seeds, history = self._seeds, self._history
        if seeds is not None and history is not None:
            seeds.drop_plans(history.seeds_in(self._ownership.held_buckets()))
            history.forget_plans()
        self._loader.cancel_all()
        # Requests without a copy in Redis die with this node's claim on their hosts.
        _, _, lost = self._ownership.forget()
        self.counts["local_only_lost"] += lost
        self._store.forget()

    def _restore_pages(self, pages: dict[str, int]) -> None:
        """The pages the hosts of a bucket just taken gave on its earlier holders."""
        for host, fetched in pages.items():
            self._frontier.restore_pages(host, fetched)
            self.counts["pages_restored"] += 1

    def _report(self) -> None:
        self._messages.report_cluster(
            self.node_id,
            self.crawl_id,
            len(self._ownership.owned),
            self.sync_cpu,
            self.counts,
            recrawl=self._history is not None,
        )
