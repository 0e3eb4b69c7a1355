"""The distributed mode's admission: route a request to its bucket's node, or queue it here.

Every host belongs to one bucket and every bucket to one node (:mod:`.buckets`). A new
request whose bucket this node holds (and has loaded) is filtered by the seen keys, which
move with their bucket, and queued here (:class:`~.store.ClusterStore`); any other goes
to its node's inbox, encoded, with the next tick. Entries read from this node's inbox
(:meth:`ClusterAdmission.receive`) and requests of a bucket taken over
(:meth:`ClusterAdmission.load`, a slice at a time by :class:`~.loader.BucketLoader`) come
in the same way. The steps and their order on one machine: :mod:`scrapy_twolevel.glue.admission`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, Protocol, cast

from .._engine import peek_meta
from .buckets import bucket_of

if TYPE_CHECKING:
    from scrapy import Request, Spider

    from ..codec import SpiderCodec
    from ..frontier import Frontier
    from ..glue.intake import Intake
    from ..glue.reporting import Reporter
    from ..glue.seed_planner import SeedPlanner
    from .inbox import Entry
    from .ownership import Ownership
    from .store import ClusterStore


class SeenKeys(Protocol):
    """What the distributed mode asks of the dupefilter
    (:class:`~scrapy_twolevel.dupefilter.SeenCacheDupeFilter`): keys that move with their
    bucket."""

    def request_key(self, request: Request) -> bytes: ...

    def key_seen(self, key: bytes) -> bool: ...

    def has_key(self, key: bytes) -> bool: ...

    def add_keys(self, keys: Iterable[bytes]) -> None: ...

    def forget(self) -> None: ...

    def log(self, request: Request, spider: Spider) -> None: ...

    def open(self) -> Any: ...

    def close(self, reason: str) -> Any: ...


class ClusterAdmission:
    """Routes or queues new requests; see the module docstring."""

    def __init__(
        self,
        *,
        ownership: Ownership,
        store: ClusterStore,
        frontier: Frontier,
        buckets: int,
        intake: Intake,
        codec: SpiderCodec,
        seen: SeenKeys,
        seeds: SeedPlanner | None,
        reporter: Reporter,
        counts: Counter[str],
    ) -> None:
        self._ownership = ownership
        self._store = store
        self._frontier = frontier
        self._buckets = buckets
        self._intake = intake
        self._codec = codec
        self._seen = seen
        self._seeds = seeds
        self._reporter = reporter
        self._counts = counts

    def admit(self, request: Request) -> bool:
        """Queue ``request`` here if its bucket is held, else route it to its owner (the
        lane is the host: topics are not supported here)."""
        host = self._intake.lane(request)
        bucket = bucket_of(host, self._buckets)
        ownership = self._ownership
        if not ownership.admits(bucket):  # via the inbox
            data = self._codec.encode(request)
            if data is None and ownership.still_ours(bucket):
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
            self._store.staged.routes.append((bucket, host, data))
            return True
        quality = self._intake.quality(request)
        return self._admit(request, host, quality, bucket, self._store.wrap(request))

    def seen_test(self) -> Callable[[Request], bool] | None:
        """None: a request's seen key is known only on its bucket's node."""
        return None

    def _admit(
        self, request: Request, host: str, quality: float, bucket: int, data: bytes | None
    ) -> bool:
        """A new request of a held bucket: filtered if seen, else queued and stored."""
        seen = self._seen
        key = seen.request_key(request)
        # Start requests are dont_filter, but every node and restart yields them: once.
        filtered = not request.dont_filter or peek_meta(request).get("is_start_request")
        if filtered and seen.key_seen(key):
            seen.log(request, cast("Spider", self._reporter.spider))
            return False
        if not filtered and seen.has_key(key):
            key = b""  # fetched again (dont_filter): its key is in Redis already
        seeds = self._seeds
        if seeds is not None and seeds.accepting(request):
            data = self._store.wrap(request)  # the seed's fetch is named in its meta now
        return self._store.queue(self._frontier, request, host, quality, bucket, key, data)

    def receive(self, entry: Entry) -> bool:
        """An inbox entry: queue it if its bucket is held here, park it if it will be,
        forward it otherwise; acknowledged in the commit that stores or forwards it.
        Whether the engine has a request to be woken for."""
        bucket = bucket_of(entry.host, self._buckets)
        ownership = self._ownership
        if ownership.admits(bucket):
            self._store.staged.acks.append(entry.id)
            request = self._store.decode(entry.data)
            if request is None:
                return False
            intake = self._intake
            return self._admit(
                request, intake.lane(request), intake.quality(request), bucket, entry.data
            )
        if bucket in ownership.owned:
            ownership.park(bucket, entry)
            return False
        self.forward(entry)
        return False

    def forward(self, entry: Entry) -> None:
        """Send an inbox entry on to its bucket's node."""
        bucket = bucket_of(entry.host, self._buckets)
        self._store.staged.routes.append((bucket, entry.host, entry.data))
        self._store.staged.acks.append(entry.id)
        self._counts["forwarded"] += 1

    def load(self, bucket: int, entry_id: str, data: bytes) -> bool:
        """Queue a request of a bucket just taken over (its entry stays as it is)."""
        request = self._store.decode(data)
        if request is None:
            self._store.staged.dones.append((bucket, entry_id))
            return False
        if self._seeds is not None:
            self._seeds.reloaded(request)
        intake = self._intake
        key = self._seen.request_key(request)
        return self._store.queue(
            self._frontier,
            request,
            intake.lane(request),
            intake.quality(request),
            bucket,
            key,
            data,
            entry_id,
        )

    def loaded(self, bucket: int) -> bool:
        """A bucket is loaded: the inbox entries that waited for its seen keys go in now."""
        woke = False
        for entry in self._ownership.unpark(bucket):
            woke |= self.receive(entry)
        return woke
