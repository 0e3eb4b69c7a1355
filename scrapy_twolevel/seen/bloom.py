"""Bloom filters over 16-byte uniform keys: fast in pure Python, stable across processes.

The filter answers "definitely new" for most new URLs without touching the disk store.
Its keys are already uniform hashes (:mod:`scrapy_twolevel.seen.fingerprints`), so it
hashes nothing itself and is stable across processes — unlike filters keyed on Python's
per-process ``hash()``, whose saved bits are garbage after a restart.

Blocked layout (Putze, Sanders, Singler, "Cache-, hash- and space-efficient Bloom
filters"): a key's ``k`` bits all fall in one 64-bit word, chosen by the key's low 64
bits; the eight bits within the word come from its high 64 bits, two per lookup in a 4,096-entry
table. A test or an add is one word read, four table lookups and one word write — about
a third of the Python time of ``k`` probes spread over the whole bit array — at the price
of a few more bits per key for the same error rate (:func:`blocked_error_rate` is the
exact rate; the filter sizes itself with it: 12.75 bits per key for 1%).

Two ways to grow, since the user does not know the crawl's size:

- :class:`BloomFilter` has a fixed capacity; the exact seen cache rebuilds a twice as
  large one from its store when it is full (one sequential read, about 2 µs per
  key, amortised to O(1) per add), so one filter at the target rate is ever in use.
- :class:`ScalableBloom` (for ``bloom-only`` mode, which has no store to rebuild from)
  adds sub-filters twice as large with error rates ``p * (1 - r) * r**i`` (``r = 0.5``), a
  series that sums to at most ``p`` (Almeida et al.). pybloom-live's
  ``ScalableBloomFilter`` gives its first sub-filter ``p * r`` instead, which sums to
  ``p * r / (1 - r)``: 9 times its target at its ``r = 0.9`` (4.5 times measured).

Pure module: no Scrapy, no I/O beyond :meth:`BloomFilter.to_bytes` / ``from_bytes``.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Callable
from functools import lru_cache
from typing import Protocol, cast

FORMAT = b"TLBLOOM2"
_M64 = (1 << 64) - 1
#: 12 bits of a key -> a 64-bit mask with (up to) two bits set.
_PAIR = tuple((1 << (v & 63)) | (1 << (v >> 6)) for v in range(4096))
_HEADER = struct.Struct("<8sQQQ")  # format, words, capacity, count


def blocked_error_rate(bits_per_key: float, hashes: int, block_bits: int = 64) -> float:
    """False-positive rate of a one-word blocked Bloom filter at its capacity.

    A block's load is Poisson with mean ``block_bits / bits_per_key``; a block holding
    ``j`` keys has each bit set with probability ``f = 1 - (1 - 1/B)**(k*j)``. A query's
    ``k`` bits may coincide: with ``d`` distinct bits it passes with probability ``f**d``.
    """
    # Distribution of the number of distinct bits among k uniform draws from B.
    distinct = [1.0]
    for _ in range(hashes):
        nxt = [0.0] * (len(distinct) + 1)
        for d, p in enumerate(distinct):
            nxt[d] += p * d / block_bits
            nxt[d + 1] += p * (block_bits - d) / block_bits
        distinct = nxt
    lam = block_bits / bits_per_key
    p_load = math.exp(-lam)
    total = 0.0
    for j in range(0, 40 * max(1, math.ceil(lam))):
        if j:
            p_load *= lam / j
        f = 1 - (1 - 1 / block_bits) ** (hashes * j)
        total += p_load * sum(p * f**d for d, p in enumerate(distinct))
    return total


#: Bits set per key: four table lookups, unrolled in :meth:`BloomFilter.add`.
HASHES = 8


@lru_cache(maxsize=64)
def bits_per_key(error_rate: float) -> float:
    """The fewest bits per key (in quarters) at which the filter reaches ``error_rate``."""
    bits = 4.0
    while bits < 256:
        if blocked_error_rate(bits, HASHES) <= error_rate:
            return bits
        bits += 0.25
    raise ValueError(f"error rate {error_rate} is too small for a one-word blocked filter")


class FixedBloom(Protocol):
    """A fixed-capacity filter (:class:`BloomFilter`, :class:`PyBloomLiveFilter`), as the
    seen set and :class:`ScalableBloom` build and grow them."""

    def add(self, key: bytes) -> bool: ...

    def __contains__(self, key: bytes) -> bool: ...

    @property
    def count(self) -> int: ...

    @property
    def full(self) -> bool: ...

    @property
    def nbytes(self) -> int: ...


class BloomFilter:
    """A fixed-capacity blocked Bloom filter; :meth:`add` says whether the key was "maybe" in."""

    __slots__ = ("_words", "bits", "capacity", "count", "nwords")

    def __init__(self, capacity: int, error_rate: float) -> None:
        if capacity < 1:
            raise ValueError(f"capacity must be >= 1, got {capacity}")
        if not 0 < error_rate < 1:
            raise ValueError(f"error_rate must be in (0, 1), got {error_rate}")
        self.nwords = max(1, math.ceil(capacity * bits_per_key(error_rate) / 64))
        self.capacity = capacity
        self.count = 0
        self.bits = bytearray(self.nwords * 8)
        self._words = memoryview(self.bits).cast("Q")

    def __contains__(self, key: bytes) -> bool:
        x = int.from_bytes(key[:16], "little")
        h = x >> 64
        pair = _PAIR
        mask = pair[h & 4095] | pair[h >> 12 & 4095] | pair[h >> 24 & 4095] | pair[h >> 36 & 4095]
        return self._words[(x & _M64) % self.nwords] & mask == mask

    def add(self, key: bytes) -> bool:
        """Set the key's bits; return whether they were all set already ("maybe seen")."""
        # Inlined (no helper call): this runs for every extracted link.
        x = int.from_bytes(key[:16], "little")
        h = x >> 64
        pair = _PAIR
        mask = pair[h & 4095] | pair[h >> 12 & 4095] | pair[h >> 24 & 4095] | pair[h >> 36 & 4095]
        word = (x & _M64) % self.nwords
        words = self._words
        old = words[word]
        if old & mask == mask:
            return True
        words[word] = old | mask
        self.count += 1
        return False

    @property
    def full(self) -> bool:
        return self.count >= self.capacity

    @property
    def nbytes(self) -> int:
        return len(self.bits)

    def to_bytes(self) -> bytes:
        header = _HEADER.pack(FORMAT, self.nwords, self.capacity, self.count)
        return header + bytes(self.bits)

    @classmethod
    def from_bytes(cls, data: bytes) -> BloomFilter:
        """A filter saved by :meth:`to_bytes`; ``ValueError`` for anything else."""
        try:
            fmt, nwords, capacity, count = _HEADER.unpack_from(data, 0)
        except struct.error as exc:
            raise ValueError(f"not a saved Bloom filter ({exc})") from exc
        if fmt != FORMAT:
            raise ValueError(f"not a saved Bloom filter (format {fmt[:8]!r})")
        if len(data) != _HEADER.size + nwords * 8 or not nwords:
            raise ValueError("saved Bloom filter is truncated or damaged")
        self = cls.__new__(cls)
        self.nwords, self.capacity, self.count = nwords, capacity, count
        self.bits = bytearray(data[_HEADER.size :])
        self._words = memoryview(self.bits).cast("Q")
        return self


class ScalableBloom:
    """Sub-filters twice as large, error rates shrinking so the total stays below ``error_rate``."""

    def __init__(
        self,
        error_rate: float = 0.001,
        initial_capacity: int = 1 << 20,
        tightening: float = 0.5,
        filter_factory: Callable[[int, float], FixedBloom] = BloomFilter,
    ) -> None:
        if not 0 < error_rate < 1:
            raise ValueError(f"error_rate must be in (0, 1), got {error_rate}")
        if not 0 < tightening < 1:
            raise ValueError(f"tightening must be in (0, 1), got {tightening}")
        self.error_rate = error_rate
        self.initial_capacity = initial_capacity
        self.tightening = tightening
        self._factory = filter_factory
        self.filters: list[FixedBloom] = []
        self._grow()

    def _grow(self) -> None:
        i = len(self.filters)
        rate = self.error_rate * (1 - self.tightening) * self.tightening**i
        self.filters.append(self._factory(self.initial_capacity << i, rate))

    def __contains__(self, key: bytes) -> bool:
        return any(key in f for f in self.filters)

    def add(self, key: bytes) -> bool:
        """Add ``key``; return whether some sub-filter already said "maybe"."""
        filters = self.filters
        for f in filters[:-1]:
            if key in f:
                return True
        if filters[-1].full:
            if key in filters[-1]:
                return True
            self._grow()
        return self.filters[-1].add(key)

    def __len__(self) -> int:
        return sum(f.count for f in self.filters)

    @property
    def nbytes(self) -> int:
        return sum(f.nbytes for f in self.filters)

    def to_bytes(self) -> bytes:
        parts = [
            struct.pack(
                "<8sdQdI",
                b"TLSCALE1",
                self.error_rate,
                self.initial_capacity,
                self.tightening,
                len(self.filters),
            )
        ]
        for f in self.filters:
            # Built-in filters only: the dupefilter refuses to save a pybloom-live one
            # (TWOLEVEL_SEEN_BLOOM in bloom-only mode with a JOBDIR).
            blob = cast(BloomFilter, f).to_bytes()
            parts += [struct.pack("<Q", len(blob)), blob]
        return b"".join(parts)

    @classmethod
    def from_bytes(cls, data: bytes) -> ScalableBloom:
        head = struct.Struct("<8sdQdI")
        try:
            fmt, rate, initial, tightening, n = head.unpack_from(data, 0)
        except struct.error as exc:
            raise ValueError(f"not a saved Bloom filter ({exc})") from exc
        if fmt != b"TLSCALE1" or not n:
            raise ValueError(f"not a saved scalable Bloom filter (format {fmt!r})")
        self = cls(rate, initial, tightening)
        self.filters = []
        offset = head.size
        for _ in range(n):
            try:
                (size,) = struct.unpack_from("<Q", data, offset)
            except struct.error as exc:
                raise ValueError("saved Bloom filter is truncated") from exc
            offset += 8
            self.filters.append(BloomFilter.from_bytes(data[offset : offset + size]))
            offset += size
        if offset != len(data):
            raise ValueError("saved Bloom filter has the wrong length")
        return self


class PyBloomLiveFilter:
    """pybloom-live's fixed-capacity ``BloomFilter`` behind :class:`BloomFilter`'s interface.

    The backend this project was first specified with (``TWOLEVEL_SEEN_BLOOM =
    "pybloom-live"``); it hashes every key again (SHA or xxHash) and is slower than
    :class:`BloomFilter` (``benchmarks/seen_cache.py``). Not persisted: the exact seen cache
    rebuilds its filter from the store.
    """

    def __init__(self, capacity: int, error_rate: float) -> None:
        from pybloom_live import BloomFilter as _PyBloom

        self._filter = _PyBloom(capacity=capacity, error_rate=error_rate)
        self.capacity = capacity

    def add(self, key: bytes) -> bool:
        return bool(self._filter.add(key))

    def __contains__(self, key: bytes) -> bool:
        found: bool = key in self._filter
        return found

    @property
    def count(self) -> int:
        return int(self._filter.count)

    @property
    def full(self) -> bool:
        full: bool = self._filter.count >= self.capacity
        return full

    @property
    def nbytes(self) -> int:
        return len(self._filter.bitarray) // 8
