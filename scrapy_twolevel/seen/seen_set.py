"""The layered seen set: a small cache, a Bloom filter, then an exact store.

``test_and_add(key)`` is asked for every extracted link. The layers answer from the
cheapest that can:

1. the cache (:mod:`.cache`) holds recently seen keys: most repeated links stop here;
2. the Bloom filter (:mod:`.bloom`) answers "definitely new" for almost every new key
   without touching the store, and records it;
3. the store, an exact set of keys on disk, settles a Bloom "maybe": seen, or a false
   positive of the filter (counted, the key is added, the verdict is "new").

So a new key is never reported as seen, and RAM holds only the cache and about
1.6 bytes of filter per key (at a 1% filter error rate). The filter grows, so a crawl need
not know its size in advance: once it is ``MIGRATE_AT`` full, a ``GROWTH`` times larger
one is started, every new key goes into both, and the store's keys are copied into it a
chunk at a time (``MIGRATE_RATE`` keys per key added, read in key order), so it is
complete before the old one is full and takes over then. No call ever copies the whole
store: at 40 million keys a one-go rebuild held the crawl for a minute.

In ``bloom_only`` mode there is no store: a "maybe" is reported as seen, so about the
filter's error rate of new keys are lost (and counted as duplicates), in exchange for no
disk. The filter then grows by adding sub-filters (:class:`.bloom.ScalableBloom`).

Pure module: no Scrapy; the store and the filter factory are injected.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sized
from dataclasses import dataclass
from typing import Protocol, cast

from .bloom import BloomFilter, FixedBloom, ScalableBloom
from .cache import SeenCache

#: Exact mode: a full filter is rebuilt from the store this much larger. 1.5 rather than 2
#: keeps the filter at most 1.5x its packed size (2.5 B/key instead of 3.4 at 1%), for
#: rebuilds that read about 3 keys per key stored instead of 2 (amortised O(1) either way).
GROWTH = 1.5
#: A larger filter is started when the current one is this full (above ``1 / GROWTH``,
#: where the last one took over, so that two migrations never run back to back)...
MIGRATE_AT = 0.8
#: ...and this many stored keys are copied into it per key added: the ``MIGRATE_AT``
#: share of keys present then is copied in the ``1 - MIGRATE_AT`` left (4 per key), plus
#: one for keys added by :meth:`SeenSet.add` without a test.
MIGRATE_RATE = 5
#: Keys read from the store at a time while migrating.
MIGRATE_CHUNK = 512


class SeenStore(Protocol):
    """An exact set of keys, durable where the owner needs it to be."""

    def __contains__(self, key: bytes) -> bool: ...

    def add(self, key: bytes) -> None: ...

    def keys(self) -> Iterator[bytes]: ...

    def keys_after(self, after: bytes | None, limit: int) -> list[bytes]:
        """Up to ``limit`` keys greater than ``after`` (all keys: ``None``), in key order."""
        ...

    def __len__(self) -> int: ...


class MemorySeenStore:
    """A :class:`SeenStore` in a Python set (tests, and crawls small enough for RAM)."""

    def __init__(self, keys: Iterable[bytes] = ()) -> None:
        self._keys = set(keys)

    def __contains__(self, key: bytes) -> bool:
        return key in self._keys

    def add(self, key: bytes) -> None:
        self._keys.add(key)

    def keys(self) -> Iterator[bytes]:
        return iter(list(self._keys))

    def keys_after(self, after: bytes | None, limit: int) -> list[bytes]:
        return sorted(k for k in self._keys if after is None or k > after)[:limit]

    def __len__(self) -> int:
        return len(self._keys)


class BloomLike(Protocol):
    def add(self, key: bytes) -> bool: ...

    def __contains__(self, key: bytes) -> bool: ...

    @property
    def nbytes(self) -> int: ...


#: ``(capacity, error rate) -> empty fixed-capacity filter``.
FilterFactory = Callable[[int, float], FixedBloom]


@dataclass(slots=True)
class SeenCounters:
    """What the layers did; the dupefilter turns these into stats."""

    tests: int = 0
    """Keys tested (one per request the dupefilter is asked about)."""
    cache_hits: int = 0
    """Answered "seen" by the cache of recent keys alone."""
    bloom_maybe: int = 0
    """Missed by the cache, called "maybe seen" by the filter."""
    store_lookups: int = 0
    """Looked up in the exact store (each "maybe", in exact mode)."""
    false_positives: int = 0
    """A "maybe" that the store said was new: the filter's false positives."""
    new: int = 0
    """Keys added: new URLs."""
    rebuilds: int = 0
    """Times the filter grew: a larger one, filled from the store, took over."""

    @property
    def observed_false_positive_rate(self) -> float | None:
        """Share of new keys the filter called "maybe" (exact mode only)."""
        return self.false_positives / self.new if self.new else None


class SeenSet:
    """Exact (or ``bloom_only``) test-and-add over 16-byte keys."""

    def __init__(
        self,
        cache: SeenCache,
        store: SeenStore | None,
        *,
        error_rate: float,
        initial_capacity: int = 1 << 20,
        filter_factory: FilterFactory = BloomFilter,
        bloom: BloomLike | None = None,
    ) -> None:
        """``store=None`` is ``bloom_only`` mode. ``bloom``: a filter loaded from a previous
        run (bloom-only); with a store the filter is rebuilt from it instead."""
        self.cache = cache
        self.store = store
        self.error_rate = error_rate
        self.counters = SeenCounters()
        self._factory = filter_factory
        self.bloom: BloomLike
        if store is None:
            self.bloom = bloom if bloom is not None else ScalableBloom(error_rate, initial_capacity)
        else:
            self._capacity = max(initial_capacity, int(GROWTH * len(store)))
            self.bloom = self._rebuild()
        # The larger filter being filled, the last key copied into it, the copy budget.
        self._next: FixedBloom | None = None
        self._copied_up_to: bytes | None = None
        self._budget = 0

    @property
    def bloom_only(self) -> bool:
        return self.store is None

    def _rebuild(self) -> FixedBloom:
        assert self.store is not None
        bloom = self._factory(self._capacity, self.error_rate)
        for key in self.store.keys():
            bloom.add(key)
        return bloom

    def test_and_add(self, key: bytes) -> bool:
        """Whether ``key`` was seen before; it is seen from now on."""
        counters = self.counters
        counters.tests += 1
        cache = self.cache
        if cache.lookup(key):
            counters.cache_hits += 1
            return True
        maybe = self.bloom.add(key)
        cache.insert(key)
        store = self.store
        if not maybe:
            counters.new += 1
            if store is not None:
                store.add(key)
                self._grow(key)
            return False
        counters.bloom_maybe += 1
        if store is None:
            return True
        counters.store_lookups += 1
        if key in store:
            return True
        counters.false_positives += 1
        counters.new += 1
        store.add(key)
        self._grow(key)
        return False

    def __contains__(self, key: bytes) -> bool:
        """Whether ``key`` was seen, without recording it (nor counting the test). A key
        the store confirms enters the cache: the duplicate-links middleware asks for the
        same navigation links page after page, and the store's answer is the costly one."""
        if self.cache.lookup(key):
            return True
        if key not in self.bloom:
            return False
        store = self.store
        if store is None:
            return True
        if key in store:
            self.cache.insert(key)
            return True
        return False

    def add(self, key: bytes) -> None:
        """Record ``key`` as seen without testing or counting it: a key another process
        saw (a bucket handed over in the distributed mode)."""
        self.cache.insert(key)
        new = not self.bloom.add(key)
        if self.store is not None and (new or key not in self.store):
            self.store.add(key)
            self._grow(key)

    def _grow(self, key: bytes) -> None:
        """After a key was stored: carry on growing the filter (see the module docstring)."""
        # Only with a store, so the filter is a fixed-capacity one from _rebuild or _factory.
        bloom, nxt = cast(FixedBloom, self.bloom), self._next
        if nxt is None:
            if bloom.count < MIGRATE_AT * self._capacity:
                return
            nxt = self._next = self._factory(int(self._capacity * GROWTH), self.error_rate)
            self._copied_up_to, self._budget = None, 0
        nxt.add(key)
        self._budget += MIGRATE_RATE
        if self._budget < MIGRATE_CHUNK and not bloom.full:
            return
        # A chunk at a time; all that is left if the old filter is full already (a burst
        # of add() from a bucket hand-over can outrun the budget).
        while True:
            self._budget -= MIGRATE_CHUNK
            assert self.store is not None
            chunk = self.store.keys_after(self._copied_up_to, MIGRATE_CHUNK)
            for stored in chunk:
                nxt.add(stored)
            if len(chunk) < MIGRATE_CHUNK:
                self.bloom, self._next = nxt, None
                self._capacity = int(self._capacity * GROWTH)
                self.counters.rebuilds += 1
                return
            self._copied_up_to = chunk[-1]
            if self._budget < MIGRATE_CHUNK and not bloom.full:
                return

    def __len__(self) -> int:
        """Keys seen (bloom-only: keys the filter recorded, an undercount by its errors)."""
        if self.store is not None:
            return len(self.store)
        return len(cast(Sized, self.bloom))  # bloom-only: a ScalableBloom
