"""Per-bucket packed seen keys in a real Redis."""

from __future__ import annotations

import hashlib

import pytest
import redis

from scrapy_twolevel.distributed.seen_log import SeenLog, worth_compacting

pytestmark = pytest.mark.redis


@pytest.fixture
def log(redis_crawl: tuple[redis.Redis, str]) -> SeenLog:
    client, crawl_id = redis_crawl
    return SeenLog(client, crawl_id)


def key(i: int) -> bytes:
    return hashlib.sha1(str(i).encode()).digest()[:16]


def test_append_and_load_per_bucket(log: SeenLog) -> None:
    assert log.append({1: [key(1), key(2)], 2: [key(3)], 3: []}) == 3
    assert log.append({1: [key(2), key(4)]}) == 2  # key(2) again: a re-fetch
    assert log.load(1) == {key(1), key(2), key(4)}
    assert log.load(2) == {key(3)}
    assert log.load(3) == set()
    assert log.append({}) == 0


def test_compact_rewrites_only_for_the_holder_and_an_unchanged_value(log: SeenLog) -> None:
    log.append({7: [key(1), key(1), key(2)]})
    assert log.redis.strlen(log.key(7)) == 48
    distinct = log.load(7)
    assert not log.compact(7, "n1", 48, distinct)  # n1 does not hold bucket 7
    log.redis.hset(log.holders, 7, "n1")
    log.append({7: [key(3)]})  # appended since it was read: the rewrite would lose key(3)
    assert not log.compact(7, "n1", 48, distinct)
    assert log.redis.strlen(log.key(7)) == 64
    assert log.compact(7, "n1", 64, log.load(7))
    assert log.redis.strlen(log.key(7)) == 48
    assert log.load(7) == {key(1), key(2), key(3)}


def test_worth_compacting_past_an_eighth_of_duplicates() -> None:
    assert not worth_compacting(0, 0)
    assert not worth_compacting(8, 7)  # 1 of 8: exactly an eighth
    assert worth_compacting(7, 6)  # 1 of 7
    assert worth_compacting(100, 50)


def test_keys_of_another_size_and_damaged_values_are_refused(log: SeenLog) -> None:
    with pytest.raises(ValueError, match="16 bytes each"):
        log.append({1: [b"short"]})
    assert log.load(1) == set()  # nothing written
    log.redis.set(log.key(2), b"x" * 17)
    with pytest.raises(ValueError, match="damaged"):
        log.load(2)


def test_sixteen_bytes_per_url_in_redis(log: SeenLog) -> None:
    n = 20_000
    log.append({5: [key(i) for i in range(n)]})
    per_url = log.memory(5) / n
    # The packed string: 16 bytes per key plus the allocator's slack (jemalloc rounds the
    # string up to a size class, at most 25% above 320 kB).
    assert 16 <= per_url <= 16 * 1.25, per_url
    # A Redis set of the same keys, for comparison, costs several times as much.
    log.redis.sadd(log.key("set"), *[key(i) for i in range(n)])
    assert log.redis.memory_usage(log.key("set"), samples=0) / n > 3 * per_url
