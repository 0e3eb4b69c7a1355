"""Which buckets this node holds, and what it still owes on those moving away (pure).

A bucket the table gives this node is *held* once its previous holder released it and
its requests were read from Redis; each time it is held again it gets a new
*generation*, so a queued copy from an earlier holding is known stale (the bucket's next
holder has it). A bucket the table gives to another node *drains* first: the requests of
it handed out here finish, and those kept here only (not encodable, no copy in Redis) are
fetched; then it is released. While a bucket taken over is still *loading* (its seen keys
and requests come in slices), new requests for it wait in the inbox.

No Redis, no Scrapy: the distributed mode's store, admission and tick
(:mod:`.store`, :mod:`.admission`, :mod:`.sync`) share one :class:`Ownership`, and its
rules are tested without a crawl.
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING

from .local_only import LocalOnlyRequests

if TYPE_CHECKING:
    from .inbox import Entry


class Ownership:
    """This node's buckets: held (with a generation), draining, loading; see the module
    docstring."""

    def __init__(self) -> None:
        #: The buckets the table gives this node (held or not yet).
        self.owned: frozenset[int] = frozenset()
        self._held: dict[int, int] = {}  # bucket -> generation
        self._gen = 0
        self._draining: set[int] = set()
        self._drain_gen: dict[int, int] = {}
        #: Buckets taken over whose seen keys and requests are still being added.
        self.loading: set[int] = set()
        #: Requests that cannot be encoded (no copy in Redis), queued per bucket: a
        #: draining bucket is released once they are fetched.
        self.local_only = LocalOnlyRequests()
        #: Requests handed out and not yet finished by the engine, in all and per bucket.
        self.leased = 0
        self._leased_per_bucket: Counter[int] = Counter()
        #: Inbox entries for buckets owned but not held yet, kept until they are.
        self.parked: dict[int, list[Entry]] = {}
        self._parked_ids: set[bytes] = set()

    # -- holding ------------------------------------------------------------------------

    @property
    def held(self) -> int:
        return len(self._held)

    @property
    def draining(self) -> int:
        return len(self._draining)

    def holds(self, bucket: int) -> bool:
        """Held here (loaded or still loading)."""
        return bucket in self._held

    def admits(self, bucket: int) -> bool:
        """Held and loaded: a new request for it is queued here."""
        return bucket in self._held and bucket not in self.loading

    def still_ours(self, bucket: int) -> bool:
        """Held, or draining: its hosts are still this node's to fetch."""
        return bucket in self._held or bucket in self._draining

    def generation(self, bucket: int) -> int:
        """The generation a request queued now for ``bucket`` (held or draining) takes."""
        return self._held.get(bucket) or self._drain_gen[bucket]

    def is_current(self, bucket: int, gen: int, *, stored: bool) -> bool:
        """Whether a queued request of ``bucket`` from generation ``gen`` is still this
        node's to hand out: its bucket is held since, or draining with it still to fetch
        (a request without a copy in Redis, which the bucket's next holder could not load).
        """
        if self._held.get(bucket) == gen:
            return True
        return not stored and self._drain_gen.get(bucket) == gen

    def take(self, bucket: int) -> int:
        """``bucket`` is held now; its new generation."""
        self._gen += 1
        self._held[bucket] = self._gen
        return self._gen

    def give_away(self, owned: frozenset[int]) -> list[int]:
        """The table now gives this node ``owned``: the buckets held that it no longer
        gives start draining (their queued copies go stale, but for those not in Redis);
        the caller stops loading them."""
        self.owned = owned
        given = [bucket for bucket in self._held if bucket not in owned]
        for bucket in given:
            self._drain_gen[bucket] = self._held.pop(bucket)
            self._draining.add(bucket)
        return given

    def release_drained(self, *, final: bool = False) -> list[int]:
        """The draining buckets with nothing left here (all of them when ``final``): no
        longer this node's; they are released with the next commit."""
        released = [
            bucket
            for bucket in self._draining
            if final or not (self._leased_per_bucket[bucket] or self.local_only.count(bucket))
        ]
        for bucket in released:
            self._draining.discard(bucket)
            self._drain_gen.pop(bucket, None)
            self.local_only.discard_bucket(bucket)
        return released

    def held_buckets(self) -> list[int]:
        return list(self._held)

    # -- leases -------------------------------------------------------------------------

    def lease(self, bucket: int) -> None:
        self.leased += 1
        self._leased_per_bucket[bucket] += 1

    def lease_ended(self, bucket: int) -> None:
        self.leased -= 1
        self._leased_per_bucket[bucket] -= 1

    # -- inbox entries that wait for their bucket -----------------------------------------

    def park(self, bucket: int, entry: Entry) -> None:
        """Keep ``entry`` until ``bucket`` is held (once: an entry is read again after a
        failed tick)."""
        if entry.id not in self._parked_ids:
            self._parked_ids.add(entry.id)
            self.parked.setdefault(bucket, []).append(entry)

    def unpark(self, bucket: int) -> list[Entry]:
        """The entries that waited for ``bucket``."""
        entries = self.parked.pop(bucket, [])
        for entry in entries:
            self._parked_ids.discard(entry.id)
        return entries

    def parked_elsewhere(self) -> list[Entry]:
        """The entries that waited for buckets the table no longer gives this node."""
        moved: list[Entry] = []
        for bucket in [b for b in self.parked if b not in self.owned]:
            moved += self.unpark(bucket)
        return moved

    # -- a node reaped ------------------------------------------------------------------

    def forget(self) -> tuple[list[int], int, int]:
        """This node was reaped: nothing is its own any more. Returns the buckets it held,
        the leases dropped and the requests kept here only that are lost with them."""
        held, leases = list(self._held), self.leased
        lost = len(self.local_only.take_all())
        self._held.clear()
        self._draining.clear()
        self._drain_gen.clear()
        self.loading.clear()
        self.leased = 0
        self._leased_per_bucket.clear()
        self.parked.clear()
        self._parked_ids.clear()
        return held, leases, lost
