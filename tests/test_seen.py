"""The seen set's pure parts: cache policies on hand-worked traces, the Bloom filters, the
layered set's exactness under adversarial load, and the SQLite seen store."""

from __future__ import annotations

import hashlib
import math
import random
import sqlite3

import pytest

from scrapy_twolevel.errors import ShapeMismatch
from scrapy_twolevel.seen.bloom import (
    BloomFilter,
    ScalableBloom,
    bits_per_key,
    blocked_error_rate,
)
from scrapy_twolevel.seen.cache import (
    ClockCache,
    LRUCache,
    RandomCache,
    StaticCache,
    belady_hits,
    infinite_hits,
    make_cache,
    simulate,
)
from scrapy_twolevel.seen.fingerprints import UrlKeyMemo, key_function
from scrapy_twolevel.seen.seen_set import MIGRATE_CHUNK, MemorySeenStore, SeenSet
from scrapy_twolevel.storage.sqlite import SqliteStore

pytestmark = pytest.mark.unit


def key(i: int) -> bytes:
    return hashlib.sha1(str(i).encode()).digest()[:16]


# -- cache policies on hand-worked traces ----------------------------------------------

TRACE = list("ABCABDADBC")


def test_lru_hand_worked():
    # cap 2: A B C(evict A) A(miss, evict B) B(miss, evict C) D(evict A) A(miss) D(hit)
    # B(miss) C(miss): one hit (the second D).
    assert simulate(LRUCache(2), TRACE) == 1
    # cap 3: A B C | A hit | B hit | D evicts C | A hit | D hit | B hit | C miss
    assert simulate(LRUCache(3), TRACE) == 5


def test_clock_hand_worked():
    # cap 3: slots [A B C], no bits. A hit (bit A), B hit (bit B). D: hand at A (bit) ->
    # clear, B (bit) -> clear, C (no bit) -> evict C, D in slot 2, hand -> 0. A hit,
    # D hit, B hit. C: hand at A (bit) clear, B (bit) clear, D (bit) clear, A -> evict A.
    assert simulate(ClockCache(3), TRACE) == 5
    cache = ClockCache(3)
    simulate(cache, TRACE)
    assert not cache.lookup("A") and cache.lookup("C") and len(cache) == 3


def test_static_keeps_its_first_keys():
    # cap 2 holds A and B forever: hits are the later As and Bs (A, B, A, B).
    assert simulate(StaticCache(2), TRACE) == 4
    assert simulate(StaticCache(2, preload="CD"), TRACE) == 4  # C, D, D, C


def test_random_replacement_is_seeded_and_bounded():
    a = simulate(RandomCache(2, random.Random(1)), TRACE * 20)
    b = simulate(RandomCache(2, random.Random(1)), TRACE * 20)
    assert a == b
    assert 0 < a < infinite_hits(TRACE * 20)


def test_belady_hand_worked():
    # Positions A0 B1 C2 A3 B4 D5 A6 D7 B8 C9, cap 2: A B | C (next at 9) is used later
    # than both A (3) and B (4): not cached | A hit | B hit | D (next 7): A next 6,
    # B next 8 -> evict B -> [A D] | A hit | D hit | B, C: never used again, bypassed.
    # Hits: A3 B4 A6 D7. (A cache that must insert C would evict B and get 3.)
    assert belady_hits(TRACE, 2) == 4
    assert belady_hits(TRACE, 0) == 0
    assert belady_hits(TRACE, 10) == infinite_hits(TRACE) == 6


def test_belady_bounds_every_online_policy():
    rng = random.Random(7)
    trace = [int(rng.paretovariate(1.2)) % 500 for _ in range(5000)]
    for size in (8, 32, 128):
        best = belady_hits(trace, size)
        for cache in (LRUCache(size), ClockCache(size), RandomCache(size), StaticCache(size)):
            assert simulate(cache, trace) <= best <= infinite_hits(trace)


def test_unknown_policy_is_refused():
    with pytest.raises(ValueError, match="unknown cache policy 'fifo'"):
        make_cache("fifo", 10)


# -- Bloom filters ----------------------------------------------------------------------


def test_blocked_error_rate_formula_small_case():
    # One key per block on average (B=64 bits per key), k=2: a block with j keys has each
    # bit set with probability f = 1-(63/64)^(2j); loads are Poisson(1); the query's two
    # bits coincide with probability 1/64 (then it passes with f, else with f^2).
    def f(j):
        return 1 - (63 / 64) ** (2 * j)

    expected = sum(
        math.exp(-1) / math.factorial(j) * (f(j) / 64 + f(j) ** 2 * 63 / 64) for j in range(60)
    )
    assert blocked_error_rate(64, 2) == pytest.approx(expected)
    assert blocked_error_rate(bits_per_key(0.01), 8) <= 0.01


def test_bloom_has_no_false_negatives_and_its_rate_is_near_target():
    bloom = BloomFilter(20_000, 0.01)
    for i in range(20_000):
        bloom.add(key(i))
    assert all(key(i) in bloom for i in range(20_000))
    fp = sum(key(i) in bloom for i in range(20_000, 120_000)) / 100_000
    assert fp < 0.015  # target 0.01 at capacity; 100,000 probes: sd 0.0003


def test_bloom_round_trips_and_refuses_garbage():
    bloom = BloomFilter(1000, 0.01)
    for i in range(500):
        bloom.add(key(i))
    again = BloomFilter.from_bytes(bloom.to_bytes())
    assert again.count == 500 and all(key(i) in again for i in range(500))
    with pytest.raises(ValueError, match="not a saved Bloom filter"):
        BloomFilter.from_bytes(b"garbage" * 10)
    with pytest.raises(ValueError, match="truncated"):
        BloomFilter.from_bytes(bloom.to_bytes()[:-8])


def test_scalable_bloom_grows_and_keeps_its_total_rate():
    bloom = ScalableBloom(0.01, initial_capacity=1000)
    for i in range(15_000):
        bloom.add(key(i))
    assert len(bloom.filters) == 4  # 1000 + 2000 + 4000 + 8000 >= 15000
    assert all(key(i) in bloom for i in range(15_000))
    fp = sum(key(i) in bloom for i in range(15_000, 115_000)) / 100_000
    assert fp < 0.01
    again = ScalableBloom.from_bytes(bloom.to_bytes())
    assert all(key(i) in again for i in range(15_000))


# -- the layered set ---------------------------------------------------------------------


def bloom_collisions(bloom, avoid, count, start=10**6):
    """``count`` fresh keys the filter wrongly says "maybe" for (found by search)."""
    found = []
    i = start
    while len(found) < count:
        k = key(i)
        if k in bloom and k not in avoid:
            found.append(k)
        i += 1
    return found


def test_exact_set_never_calls_a_new_key_seen_even_when_the_bloom_lies():
    seen = SeenSet(LRUCache(16), MemorySeenStore(), error_rate=0.2, initial_capacity=1000)
    added = {key(i) for i in range(600)}
    assert not any(seen.test_and_add(k) for k in added)
    colliding = bloom_collisions(seen.bloom, added, 200)  # adversarial: all Bloom "maybe"
    assert [seen.test_and_add(k) for k in colliding] == [False] * 200
    assert seen.counters.false_positives >= 200
    assert seen.counters.store_lookups >= 200
    assert all(seen.test_and_add(k) for k in colliding)


def test_membership_is_exact_and_records_nothing():
    """``key in seen``: the dupefilter's ``has_key`` (a dont_filter request whose key need
    not be written again); exact where the Bloom filter says "maybe", and no test counted."""
    seen = SeenSet(LRUCache(4), MemorySeenStore(), error_rate=0.2, initial_capacity=1000)
    added = [key(i) for i in range(600)]
    for k in added:
        seen.test_and_add(k)
    tests = seen.counters.tests
    colliding = bloom_collisions(seen.bloom, set(added), 20)
    assert [k in seen for k in colliding] == [False] * 20  # Bloom "maybe", store "no"
    assert all(k in seen for k in added)  # in the store, most out of the 4-key cache
    assert seen.counters.tests == tests and len(seen) == 600
    bloom_only = SeenSet(LRUCache(4), None, error_rate=0.01, initial_capacity=1000)
    bloom_only.add(key(1))
    assert key(1) in bloom_only and key(2) not in bloom_only


class LookupCountingStore(MemorySeenStore):
    def __init__(self):
        super().__init__()
        self.lookups = 0

    def __contains__(self, key):
        self.lookups += 1
        return super().__contains__(key)


def test_a_key_the_store_confirms_is_cached_for_the_next_question():
    store = LookupCountingStore()
    seen = SeenSet(LRUCache(4), store, error_rate=0.01, initial_capacity=1000)
    for i in range(100):
        seen.test_and_add(key(i))  # key(0) leaves the 4-key cache
    assert key(0) in seen and store.lookups == 1
    assert key(0) in seen and store.lookups == 1  # from the cache now
    assert key(10**6) not in seen  # never seen: not cached either
    assert seen.counters.tests == 100 and len(seen) == 100


class CountingStore(MemorySeenStore):
    """Records how many stored keys each call of the seen set read back."""

    def __init__(self):
        super().__init__()
        self.read = 0

    def keys_after(self, after, limit):
        chunk = super().keys_after(after, limit)
        self.read += len(chunk)
        return chunk


def test_exact_set_grows_its_filter_and_stays_exact():
    seen = SeenSet(LRUCache(0), MemorySeenStore(), error_rate=0.01, initial_capacity=1000)
    assert [seen.test_and_add(key(i)) for i in range(5000)] == [False] * 5000
    # x1.5, rounded down: 1000 -> 1500 -> 2250 -> 3375 -> 5062 -> 7593. The 5062 one is
    # 80% full at 4050 keys; its successor holds those and the 950 after: it took over.
    assert seen.counters.rebuilds == 5
    assert seen.bloom.capacity == 7593
    assert all(seen.test_and_add(key(i)) for i in range(5000))
    assert len(seen) == 5000


def test_growing_the_filter_never_copies_the_whole_store_in_one_call():
    """The larger filter is filled a chunk at a time while keys keep coming (a one-go
    rebuild held the crawl for a minute at 40 million keys)."""
    store = CountingStore()
    seen = SeenSet(LRUCache(0), store, error_rate=0.01, initial_capacity=20_000)
    largest = 0
    for i in range(60_000):
        store.read = 0
        assert not seen.test_and_add(key(i))
        largest = max(largest, store.read)
    # 20,000 -> 30,000 -> 45,000 -> 67,500: grown three times, never more than a chunk
    # read in one call (the whole store was 16,000 to 36,000 keys at those times).
    assert seen.counters.rebuilds == 3 and seen.bloom.capacity == 67_500
    assert 0 < largest <= MIGRATE_CHUNK
    assert all(seen.test_and_add(key(i)) for i in range(60_000))


def test_bloom_only_reports_false_positives_as_seen():
    seen = SeenSet(LRUCache(0), None, error_rate=0.2, initial_capacity=1000)
    added = {key(i) for i in range(600)}
    for k in added:
        seen.test_and_add(k)
    colliding = bloom_collisions(seen.bloom, added, 50)
    # The price of no store, stated in the docs: these new keys are reported as seen.
    assert all(seen.test_and_add(k) for k in colliding)
    assert seen.counters.store_lookups == 0


def test_keys_prefix_digests_and_hash_anything_else():
    digest = hashlib.sha1(b"x").digest()
    assert key_function(True)(digest) == digest[:16]
    assert (
        key_function(False)(b"readable-fingerprint")
        == hashlib.blake2b(b"readable-fingerprint", digest_size=16).digest()
    )


def test_url_key_memo_remembers_until_full_then_starts_over():
    memo = UrlKeyMemo(2)
    assert memo.get("a") is None
    memo.remember("a", b"ka")
    memo.remember("b", b"kb")
    assert (memo.get("a"), memo.get("b"), memo.hits) == (b"ka", b"kb", 2)
    memo.remember("c", b"kc")  # full: forgets a and b
    assert (memo.get("a"), memo.get("c"), len(memo)) == (None, b"kc", 1)
    off = UrlKeyMemo(0)
    off.remember("a", b"ka")
    assert off.get("a") is None and len(off) == 0
    with pytest.raises(ValueError, match="capacity"):
        UrlKeyMemo(-1)


# -- SQLite seen store ----------------------------------------------------------------------

IDENTITY = {"format": "t/1", "REQUEST_FINGERPRINTER_CLASS": "a.B", "key": "prefix16"}


def test_sqlite_seen_store_is_durable_with_the_frontier_commit(tmp_path):
    path = tmp_path / "f.sqlite3"
    store = SqliteStore(path)
    seen = store.seen_store(IDENTITY)
    for i in range(100):
        seen.add(key(i))
    assert key(5) in seen and len(seen) == 100  # pending keys answer at once
    store.close()
    store = SqliteStore(path)
    seen = store.seen_store(IDENTITY)
    assert len(seen) == 100 and key(99) in seen and key(100) not in seen
    assert sorted(seen.keys()) == sorted(key(i) for i in range(100))
    store.close()


def test_sqlite_seen_store_refuses_another_fingerprinter(tmp_path):
    path = tmp_path / "f.sqlite3"
    store = SqliteStore(path)
    store.seen_store(IDENTITY)
    store.close()
    store = SqliteStore(path)
    with pytest.raises(ShapeMismatch, match=r"REQUEST_FINGERPRINTER_CLASS='a\.B'"):
        store.seen_store({**IDENTITY, "REQUEST_FINGERPRINTER_CLASS": "other.C"})
    store.close()


def test_standalone_seen_store_commits_by_count_without_a_queue(tmp_path):
    path = tmp_path / "seen.sqlite3"
    store = SqliteStore(path, commit_every=10)
    seen = store.seen_store(IDENTITY, with_queue=False)
    for i in range(25):
        seen.add(key(i))
    # Two commits happened (at 10 and 20 writes); a reader sees their keys, as a
    # resumed crawl would after a kill.
    reader = sqlite3.connect(path)
    assert reader.execute("SELECT COUNT(*) FROM seen").fetchone()[0] == 20
    reader.close()
    store.close()


def test_seen_keys_beside_a_queue_wait_for_the_queue_to_commit(tmp_path):
    path = tmp_path / "f.sqlite3"
    store = SqliteStore(path, commit_every=10)
    seen = store.seen_store(IDENTITY)
    for i in range(25):
        seen.add(key(i))
    reader = sqlite3.connect(path)
    assert reader.execute("SELECT COUNT(*) FROM seen").fetchone()[0] == 0
    store.queue("h", True).push(1.0, 1, b"request")  # the push commits keys and row together
    assert reader.execute("SELECT COUNT(*) FROM seen").fetchone()[0] == 25
    assert reader.execute("SELECT COUNT(*) FROM requests").fetchone()[0] == 1
    reader.close()
    store.close()
