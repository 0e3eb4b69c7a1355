"""The distributed mode's request store: queued requests here, their copies in Redis.

A node queues the requests of the buckets it holds in its own frontier, encoded
(:class:`Owned`: bytes cost little memory and no garbage-collector time), and keeps a copy
of each in Redis until the page is done. The copies, the ends of leases and the page
counts of budgeted hosts are *staged* on the reactor and go out with the node's next tick
(:mod:`.sync`), so queueing and handing out never wait for Redis. A request handed out is
leased in the in-flight registry: its copy is deleted in the commit after the engine is
done with it. A queued item from an earlier holding of its bucket is stale
(:mod:`.ownership`): the bucket's next holder has it.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NamedTuple

from ..frontier import memory_queue
from ..glue.store import queue
from .batch import Batch
from .buckets import bucket_of
from .messages import report_undecodable

if TYPE_CHECKING:
    from scrapy import Request

    from ..codec import SpiderCodec
    from ..frontier import Frontier, HostQueue
    from ..glue.inflight import InFlight
    from ..glue.reporting import Reporter
    from .admission import SeenKeys
    from .ownership import Ownership


class Owned(NamedTuple):
    """A queued request of a held bucket; stale if the bucket was held again since (``gen``).
    Encoded if it can be (decoded when handed out)."""

    request: Request | bytes
    bucket: int
    gen: int
    entry_id: str | None  # None: not stored in Redis (it could not be encoded)


class ClusterStore:
    """Queued requests of this node's buckets; see the module docstring."""

    def __init__(
        self,
        *,
        ownership: Ownership,
        heartbeat_fresh: Callable[[], bool],
        buckets: int,
        codec: SpiderCodec,
        seen: SeenKeys,
        inflight: InFlight,
        reporter: Reporter,
        counts: Counter[str],
    ) -> None:
        """``heartbeat_fresh()``: whether this node may still hand out requests
        (:meth:`.node.Node.may_dispatch`); ``counts``: the distributed mode's counters
        (``twolevel/redis/...`` at close)."""
        self._ownership = ownership
        self._heartbeat_fresh = heartbeat_fresh
        self._buckets = buckets
        self._codec = codec
        self._seen = seen
        self._inflight = inflight
        self._reporter = reporter
        self._counts = counts
        self._run = os.urandom(4).hex()  # entry ids stay unique over restarts
        self._next_id = 0
        #: What the next tick sends (:meth:`take_batch`).
        self.staged = Batch()
        self.on_page: Callable[[str, int], None] | None = self._page

    # -- the frontier's side ----------------------------------------------------------------

    def make_queue(self, lane: str, by_quality: bool) -> HostQueue:
        return memory_queue(lane, by_quality)

    def restore(self, frontier: Frontier) -> None:
        """Nothing here: the buckets bring their requests and pages as they are taken."""
        return None

    def _page(self, host: str, fetched: int) -> None:
        """A host with a page budget has given ``fetched`` pages: the count goes to
        ``pages:<bucket>`` with the next commit, so the bucket's next holder (a move, a
        node that died or left) does not give the host its whole budget again."""
        bucket = bucket_of(host, self._buckets)
        if self._ownership.still_ours(bucket):  # else refused: not ours
            self.staged.pages[(bucket, host)] = fetched

    def discard(self, item: Any) -> None:
        """A queued item the frontier dropped (its host was given up): drop its copy."""
        if not isinstance(item, Owned):
            return
        if item.entry_id is not None:
            if self._ownership.is_current(item.bucket, item.gen, stored=True):
                self.staged.dones.append((item.bucket, item.entry_id))
        elif self._ownership.is_current(item.bucket, item.gen, stored=False):
            if not isinstance(item.request, bytes):  # never stored: kept here only
                self._ownership.local_only.remove(item.bucket, item.request.url)

    # -- queueing ---------------------------------------------------------------------------

    def wrap(self, request: Request) -> bytes | None:
        """``request`` encoded, or ``None``: it cannot be shared, so it stays in this node's
        memory only."""
        data = self._codec.encode(request)
        if data is None:
            self._counts["kept_local"] += 1
        return data

    def queue(
        self,
        frontier: Frontier,
        request: Request,
        host: str,
        quality: float,
        bucket: int,
        key: bytes,
        data: bytes | None,
        entry_id: str | None = None,
    ) -> bool:
        """Queue ``request`` of a held (or draining) bucket, and stage its copy (with its
        seen ``key``) unless it has one (``entry_id``) or cannot have one (``data`` None)."""
        if data is not None and entry_id is None:
            entry_id = self._new_id()
            self.staged.stores.append((bucket, entry_id, data, key))
        gen = self._ownership.generation(bucket)
        item = Owned(request if data is None else data, bucket, gen, entry_id)
        if not queue(frontier, host, quality, item, self._reporter):
            self.discard(item)
            return False
        if entry_id is None:
            self._ownership.local_only.add(bucket, request.url)
        return True

    def _new_id(self) -> str:
        self._next_id += 1
        return f"{self._run}-{self._next_id:x}"

    # -- handing out ------------------------------------------------------------------------

    def may_dispatch(self) -> bool:
        """``False`` after half the node ttl without a heartbeat: the buckets may soon be
        someone else's."""
        if self._heartbeat_fresh():
            return True
        self._reporter.inc("twolevel/redis/held_back")
        return False

    def unwrap(self, lane: str, item: Any) -> Request | None:
        """The request to hand out for a popped item, or ``None`` if the copy is stale
        (its bucket moved: the new holder has it)."""
        assert isinstance(item, Owned)
        ownership = self._ownership
        if not ownership.is_current(item.bucket, item.gen, stored=item.entry_id is not None):
            self._counts["stale_skipped"] += 1
            return None
        kept = item.request
        request = self.decode(kept) if isinstance(kept, bytes) else kept
        if request is None:
            self.discard(item)  # it was decoded before: only a codec that changed since
            return None
        if item.entry_id is None:
            ownership.local_only.remove(item.bucket, request.url)
        # Leased even without a copy in Redis: a draining bucket waits for it too.
        self._inflight.lease(request, self, (item.bucket, item.entry_id))
        ownership.lease(item.bucket)
        self._reporter.inc("scheduler/dequeued/memory")
        return request

    def finished(self, request: Request, token: tuple[int, str | None]) -> None:
        """The engine is done with a leased request: its entry goes with the next commit,
        or its seen key if it has none (sent at queue time, it would mark the URL seen
        for good when a node stops with the request still queued here)."""
        bucket, entry_id = token
        self._ownership.lease_ended(bucket)
        if entry_id is None:
            self.staged.stores.append((bucket, "", b"", self._seen.request_key(request)))
        else:
            self.staged.dones.append((bucket, entry_id))

    def dispatched(self) -> None:
        return None

    def decode(self, data: bytes) -> Request | None:
        try:
            return self._codec.decode(data)
        except Exception as exc:  # damaged, or a callback this spider does not have
            report_undecodable(self._reporter, exc)
            return None

    # -- the tick's side --------------------------------------------------------------------

    def take_batch(self) -> Batch:
        """What is staged, for the tick to send; staging starts afresh."""
        batch, self.staged = self.staged, Batch()
        return batch

    def put_back(self, batch: Batch) -> None:
        """A batch the tick could not send goes out first with the next one."""
        self.staged.prepend(batch)

    def forget(self) -> None:
        """This node was reaped: its leases and staged copies are gone; requests routed to
        other nodes still go."""
        self._inflight.drop(self)
        self.staged = Batch(routes=self.staged.routes)

    def save(self, frontier: Frontier) -> None:
        return None

    def close(self) -> None:
        return None
