"""Small in-memory caches of recently seen fingerprints, and the study's reference policies.

Most links a crawler extracts were seen moments ago (navigation, the same article linked
from many pages of one host), so a cache of some tens of thousands of keys answers most
repeated "seen?" tests without touching the Bloom filter or the disk store. The practical
policies of the URL-caching study are here (LRU, CLOCK, random replacement, static);
:func:`belady_hits` (clairvoyant MIN) and :func:`infinite_hits` are the limits they are
measured against (the archived URL-cache study, ``benchmarks/README.md``).

Every cache answers :meth:`SeenCache.lookup` (a hit refreshes the key where the policy
cares) and :meth:`SeenCache.insert` (after a miss). Pure module: keys are any hashable,
randomness is injected.
"""

from __future__ import annotations

import heapq
import random
from collections import OrderedDict
from collections.abc import Hashable, Iterable, Sequence

#: Names accepted by ``TWOLEVEL_SEEN_CACHE_POLICY``.
CACHE_POLICIES = ("lru", "clock", "random", "static")


class SeenCache:
    """Interface: a bounded set of keys with a replacement policy."""

    name = "none"

    def __init__(self, capacity: int) -> None:
        if capacity < 0:
            raise ValueError(f"cache capacity must be >= 0, got {capacity}")
        self.capacity = capacity

    def lookup(self, key: Hashable) -> bool:
        """Whether ``key`` is cached (a hit); policies may refresh it."""
        raise NotImplementedError

    def insert(self, key: Hashable) -> None:
        """Add ``key`` after a miss, evicting one key if the cache is full."""
        raise NotImplementedError

    def __len__(self) -> int:
        raise NotImplementedError


class LRUCache(SeenCache):
    """Least recently used: a hit moves the key to the young end."""

    name = "lru"

    def __init__(self, capacity: int) -> None:
        super().__init__(capacity)
        self._keys: OrderedDict[Hashable, None] = OrderedDict()

    def lookup(self, key: Hashable) -> bool:
        if key in self._keys:
            self._keys.move_to_end(key)
            return True
        return False

    def insert(self, key: Hashable) -> None:
        if not self.capacity:
            return
        keys = self._keys
        keys[key] = None
        if len(keys) > self.capacity:
            keys.popitem(last=False)

    def __len__(self) -> int:
        return len(self._keys)


class ClockCache(SeenCache):
    """CLOCK: LRU's cheap approximation; a hit only sets a bit, eviction sweeps a hand.

    A key whose bit is set when the hand passes gets a second chance (the bit is cleared).
    """

    name = "clock"

    def __init__(self, capacity: int) -> None:
        super().__init__(capacity)
        self._slots: list[Hashable] = []
        self._bits = bytearray(capacity)
        self._where: dict[Hashable, int] = {}
        self._hand = 0

    def lookup(self, key: Hashable) -> bool:
        slot = self._where.get(key)
        if slot is None:
            return False
        self._bits[slot] = 1
        return True

    def insert(self, key: Hashable) -> None:
        if not self.capacity:
            return
        slots, bits = self._slots, self._bits
        if len(slots) < self.capacity:
            self._where[key] = len(slots)
            slots.append(key)
            return
        hand = self._hand
        while bits[hand]:
            bits[hand] = 0
            hand = (hand + 1) % self.capacity
        del self._where[slots[hand]]
        slots[hand] = key
        self._where[key] = hand
        self._hand = (hand + 1) % self.capacity

    def __len__(self) -> int:
        return len(self._slots)


class RandomCache(SeenCache):
    """Random replacement: a miss evicts a key chosen uniformly at random."""

    name = "random"

    def __init__(self, capacity: int, rng: random.Random | None = None) -> None:
        super().__init__(capacity)
        self._slots: list[Hashable] = []
        self._where: dict[Hashable, int] = {}
        self._rng = rng or random.Random(0)

    def lookup(self, key: Hashable) -> bool:
        return key in self._where

    def insert(self, key: Hashable) -> None:
        if not self.capacity:
            return
        slots = self._slots
        if len(slots) < self.capacity:
            self._where[key] = len(slots)
            slots.append(key)
            return
        victim = self._rng.randrange(self.capacity)
        del self._where[slots[victim]]
        slots[victim] = key
        self._where[key] = victim

    def __len__(self) -> int:
        return len(self._slots)


class StaticCache(SeenCache):
    """A fixed set of keys, never replaced.

    The study loads it with the keys most popular in an earlier period (``preload``);
    without one it keeps the first ``capacity`` keys inserted, which in a crawl are the
    seeds' links and site navigation, the keys most often repeated later.
    """

    name = "static"

    def __init__(self, capacity: int, preload: Iterable[Hashable] = ()) -> None:
        super().__init__(capacity)
        self._keys: set[Hashable] = set()
        for key in preload:
            if len(self._keys) >= capacity:
                break
            self._keys.add(key)

    def lookup(self, key: Hashable) -> bool:
        return key in self._keys

    def insert(self, key: Hashable) -> None:
        if len(self._keys) < self.capacity:
            self._keys.add(key)

    def __len__(self) -> int:
        return len(self._keys)


def make_cache(policy: str, capacity: int, rng: random.Random | None = None) -> SeenCache:
    """A cache by its ``TWOLEVEL_SEEN_CACHE_POLICY`` name."""
    if policy == "lru":
        return LRUCache(capacity)
    if policy == "clock":
        return ClockCache(capacity)
    if policy == "random":
        return RandomCache(capacity, rng)
    if policy == "static":
        return StaticCache(capacity)
    raise ValueError(f"unknown cache policy {policy!r}; expected one of {CACHE_POLICIES}")


def simulate(cache: SeenCache, trace: Iterable[Hashable]) -> int:
    """Hits of ``cache`` on a trace of seen-tests (every miss inserts the key)."""
    hits = 0
    lookup, insert = cache.lookup, cache.insert
    for key in trace:
        if lookup(key):
            hits += 1
        else:
            insert(key)
    return hits


def infinite_hits(trace: Iterable[Hashable]) -> int:
    """Hits of a cache that never evicts: every repeat is a hit."""
    seen: set[Hashable] = set()
    hits = 0
    for key in trace:
        if key in seen:
            hits += 1
        else:
            seen.add(key)
    return hits


def belady_hits(trace: Sequence[Hashable], capacity: int) -> int:
    """Hits of Belady's MIN: on a miss with a full cache, evict the key used furthest ahead.

    The clairvoyant optimum for a demand-fetched cache; a key never used again is evicted
    (or not cached at all) first. ``O(n log n)``.
    """
    if capacity <= 0:
        return 0
    n = len(trace)
    never = n + 1
    next_use = [never] * n
    last: dict[Hashable, int] = {}
    for i in range(n - 1, -1, -1):
        next_use[i] = last.get(trace[i], never)
        last[trace[i]] = i
    cached: dict[Hashable, int] = {}  # key -> its next use
    heap: list[tuple[int, int]] = []  # (-next use, position of the access that set it)
    hits = 0
    for i, key in enumerate(trace):
        nxt = next_use[i]
        if key in cached:
            hits += 1
        elif len(cached) >= capacity:
            # Evict the cached key used furthest ahead, unless this key is used even later
            # (then caching it would only waste the slot).
            while True:
                neg, pos = heap[0]
                victim = trace[pos]
                if cached.get(victim) == -neg:
                    break
                heapq.heappop(heap)  # stale entry
            if -heap[0][0] <= nxt:
                continue
            heapq.heappop(heap)
            del cached[victim]
        cached[key] = nxt
        heapq.heappush(heap, (-nxt, i))
    return hits
