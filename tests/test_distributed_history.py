"""The recrawl history, model and seed plans of a distributed crawl, against a real Redis.

The Redis history must answer as the SQLite file does (the planner and ``scrapy recrawl
train`` read both through one interface); plans must be written only by the holder of
their bucket and travel with it. No Scrapy: stores and :class:`Node` objects driven
directly, as in ``test_node.py``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import FEW_BUCKETS, FakeClock, key, node

from scrapy_twolevel.distributed.batch import Batch
from scrapy_twolevel.distributed.history import (
    FETCHES_KEPT,
    HistoryWrites,
    RedisHistoryStore,
    RedisModelStore,
    clear_history,
    decode_plan,
    encode_plan,
)
from scrapy_twolevel.distributed.node import clear_crawl, status
from scrapy_twolevel.errors import StateError
from scrapy_twolevel.recrawl.model import fit_predictor
from scrapy_twolevel.recrawl.planner import Plan
from scrapy_twolevel.storage.model_store import load_stored_model
from scrapy_twolevel.storage.recrawl_history import HistoryStore

pytestmark = pytest.mark.redis


def record_the_same(store) -> None:
    """One sequence of writes, as the seed planner makes them."""
    store.record_fetch("s/a", 1000.0, 2)
    store.record_fetch("s/a", 2000.0, 1)
    store.record_fetch("s/b", 1500.0, 0)
    store.record_article("http://s/a/1", "s/a", 2000.0, 1000.0)
    store.record_article("http://s/a/1", "s/a", 3000.0, 2000.0)  # first sighting kept
    store.record_article("http://s/a/2", "s/a", 2000.0, 1000.0)
    store.record_article("http://s/a/3", "s/a", 2000.0, None)  # the seed's first fetch
    store.record_article("http://s/a/4", "s/a", 9000.0, 2000.0)  # fetches 2 h apart
    store.record_published("http://s/a/2", 1234.5)
    store.record_published("http://not-an-article", 1.0)


def test_redis_history_answers_as_the_history_file(tmp_path: Path, redis_crawl) -> None:
    client, crawl_id = redis_crawl
    file = HistoryStore(tmp_path / "h.sqlite3")
    shared = RedisHistoryStore(client, crawl_id)
    record_the_same(file)
    record_the_same(shared)
    file.commit()
    assert shared.fetches() == []  # nothing is sent before a tick (or a flush)
    shared.flush()
    # A second node's store on the same crawl reads what the first wrote.
    other = RedisHistoryStore(client, crawl_id)
    for store in (shared, other):
        assert store.fetches() == file.fetches()
        assert store.fetches(since=1500.0) == file.fetches(since=1500.0)
        assert store.last_fetch("s/a") == file.last_fetch("s/a") == 2000.0
        assert store.last_fetch("none") is None
        # Midpoint of 1000 and 2000; the page's own time; unknown twice (see the file's test).
        assert sorted(store.events(), key=repr) == sorted(file.events(), key=repr)
        assert sorted(store.events(), key=repr) == sorted(
            [("s/a", 1500.0), ("s/a", 1234.5), ("s/a", None), ("s/a", None)], key=repr
        )
        counts = store.counts()
        assert (counts["fetches"], counts["articles"]) == (3, 4)
    # Sent twice (a tick retried after its commit failed), nothing is counted twice.
    record_the_same(shared)
    writes = shared.take()
    writes.send(client, crawl_id)
    writes.send(client, crawl_id)
    assert other.counts()["fetches"] == 6  # fetches are events: a new record, a new member
    assert other.counts()["articles"] == 4
    file.close()


def test_fetch_records_older_than_the_replay_window_are_dropped(redis_crawl) -> None:
    """Fetch records grew with time, not URLs: a crawl of weeks grew Redis without bound.
    Only the last FETCHES_KEPT seconds behind the newest record are kept (the planner
    replays 7 days at open; nothing reads older ones)."""
    client, crawl_id = redis_crawl
    store = RedisHistoryStore(client, crawl_id)
    day = 86400.0
    store.record_fetch("s/a", 0.0, 1)
    store.record_fetch("s/a", 1 * day, 1)
    store.flush()
    assert [at for _, at, _ in store.fetches()] == [0.0, day]
    store.record_fetch("s/b", 8 * day, 2)  # 8 days after the first: it stays, just
    store.flush()
    assert [at for _, at, _ in store.fetches()] == [0.0, day, 8 * day]
    store.record_fetch("s/a", 9 * day, 0)  # kept from 1 day on: 0 goes, 1 day stays
    store.flush()
    assert [at for _, at, _ in store.fetches()] == [day, 8 * day, 9 * day]
    store.record_fetch("s/b", 9 * day + 1, 0)  # one second later: 1 day goes too
    store.flush()
    assert [at for _, at, _ in store.fetches()] == [8 * day, 9 * day, 9 * day + 1]
    assert FETCHES_KEPT == 8 * day


def test_plan_encoding_round_trips_and_damage_is_an_error() -> None:
    request = b'{"url":"http://s/a/","meta":{"twolevel_seed":"s/a"}}'
    assert decode_plan("s/a", encode_plan(1790000123.25, request)) == Plan(
        "s/a", 1790000123.25, request
    )
    for damaged in (b"", b"nan {}", b"12.5", b"twelve {}", b"inf {}", b"12.5 "):
        with pytest.raises(ValueError, match="plan of seed 's/a' is damaged"):
            decode_plan("s/a", damaged)


def seed_batch(bucket: int, seed: str, due: float) -> Batch:
    """A seed request stored in ``bucket`` with its plan, as a node commits them."""
    return Batch(
        stores=[(bucket, f"e-{seed}", b"seed request", key(hash(seed) % 1000))],
        history=HistoryWrites(plans=[(bucket, seed, encode_plan(due, b"seed request"))]),
    )


def plan_of(bucket: int) -> bytes:
    return encode_plan(1000.0 + bucket, b"seed request")


def test_plans_are_written_by_the_holder_and_travel_with_the_bucket(redis_crawl) -> None:
    client, crawl_id = redis_crawl
    a = node(client, crawl_id, "a")
    a.sync(Batch())  # a holds every bucket: one seed planned in each
    for bucket in range(FEW_BUCKETS):
        result = a.sync(seed_batch(bucket, f"s/{bucket}", 1000.0 + bucket))
        assert result.stored == 1 and result.refused == 0
    assert client.hgetall(f"twolevel:{crawl_id}:plans:0") == {b"s/0": plan_of(0)}
    assert client.smembers(f"twolevel:{crawl_id}:planned") == {
        str(b).encode() for b in range(FEW_BUCKETS)
    }

    b = node(client, crawl_id, "b")
    b.sync(Batch())
    moved = sorted(b.registry.owned())
    assert len(moved) == FEW_BUCKETS // 2
    # b owns them, but a still holds them: a plan b writes for one now is refused.
    early = b.sync(seed_batch(moved[0], "s/early", 1.0))
    assert early.refused == 2  # the request and the plan
    assert client.hget(f"twolevel:{crawl_id}:plans:{moved[0]}", "s/early") is None
    # a learns it gave them up, drains them and releases them; a plan it writes for one
    # after that (a fetch that ended late) is refused.
    assert a.sync(Batch()).owned.isdisjoint(moved)
    a.sync(Batch(release=moved))
    late = a.sync(seed_batch(moved[0], f"s/{moved[0]}", 99.0))
    assert late.refused == 2
    # b takes the buckets with exactly their plans, as the holder last wrote them.
    taken = b.sync(Batch())
    assert set(taken.acquired) == set(moved)
    assert taken.plans == {bucket: {f"s/{bucket}".encode(): plan_of(bucket)} for bucket in moved}


def test_a_bucket_taken_brings_its_plans(redis_crawl) -> None:
    """The direct case: a node leaves gracefully, the other takes every bucket and plan."""
    client, crawl_id = redis_crawl
    a = node(client, crawl_id, "a")
    a.sync(Batch())
    a.sync(seed_batch(1, "s/one", 4000.0))
    a.sync(seed_batch(2, "s/two", 6000.0))
    b = node(client, crawl_id, "b")
    a.leave()
    taken = b.sync(Batch())
    assert set(taken.acquired) == set(range(FEW_BUCKETS))
    assert taken.plans == {
        1: {b"s/one": encode_plan(4000.0, b"seed request")},
        2: {b"s/two": encode_plan(6000.0, b"seed request")},
    }
    store = RedisHistoryStore(client, crawl_id)
    adopted, damaged = store.adopt(1, taken.plans[1])
    assert adopted == [Plan("s/one", 4000.0, b"seed request")] and damaged == 0
    assert store.seeds_in([1]) == ["s/one"] and store.seeds_in([2]) == []
    assert store.counts()["plans"] == 2
    assert status(client, crawl_id)["seed_plans"] == 2


def test_reaped_node_keeps_its_history_records_but_not_its_plans(redis_crawl) -> None:
    client, crawl_id = redis_crawl
    clock_a, clock_b = FakeClock(1000.0), FakeClock(1000.0)
    a = node(client, crawl_id, "a", clock_a, ttl=2.0)
    a.sync(Batch())
    b = node(client, crawl_id, "b", clock_b, ttl=2.0)
    b.sync(Batch())
    client.delete(f"twolevel:{crawl_id}:alive:a")  # a paused past its ttl
    clock_b.now += 5
    assert b.sync(Batch()).reaped == ["a"]
    # a wakes with a fetch it made and a plan for a bucket it no longer holds.
    clock_a.now += 5
    late = seed_batch(0, "s/late", 9000.0)
    late.history.fetches.append((8000.0, json.dumps(["s/late", 3, "run-1"])))
    result = a.sync(late)
    assert result.rejoined
    shared = RedisHistoryStore(client, crawl_id)
    assert shared.fetches() == [("s/late", 8000.0, 3)]  # an observation, kept
    assert client.hget(f"twolevel:{crawl_id}:plans:0", "s/late") is None


def test_damaged_plans_are_skipped_and_counted(redis_crawl) -> None:
    client, crawl_id = redis_crawl
    store = RedisHistoryStore(client, crawl_id)
    plans, damaged = store.adopt(
        3, {b"s/ok": encode_plan(10.0, b"{}"), b"s/bad": b"garbage", b"s/nan": b"nan {}"}
    )
    assert plans == [Plan("s/ok", 10.0, b"{}")] and damaged == 2


def test_model_in_redis_round_trips_and_damage_is_a_state_error(redis_crawl) -> None:
    client, crawl_id = redis_crawl
    models = RedisModelStore(client, crawl_id)
    assert models.load() is None
    day = 86400.0
    events = [("s/a", 1_790_000_000.0 + i * 900.0) for i in range(20 * 96)]
    predictor = fit_predictor(events, 1_790_000_000.0 + 20 * day, days=20, min_samples=10)
    assert predictor.fits
    models.save(predictor)
    loaded = load_stored_model(RedisModelStore(client, crawl_id))
    assert loaded is not None and loaded.to_dict() == predictor.to_dict()
    client.set(models.key, b"{not json")
    with pytest.raises(StateError, match=f"Redis key {models.key} is not a recrawl model"):
        load_stored_model(models)
    client.set(models.key, json.dumps({"format": "something else"}))
    with pytest.raises(StateError, match="format marker 'something else'"):
        load_stored_model(models)


def test_reset_keeps_the_history_unless_asked(redis_crawl) -> None:
    client, crawl_id = redis_crawl
    a = node(client, crawl_id, "a")
    a.sync(Batch())
    a.sync(seed_batch(0, "s/zero", 5000.0))
    shared = RedisHistoryStore(client, crawl_id)
    shared.record_fetch("s/zero", 100.0, 1)
    shared.flush()
    a.leave()
    assert clear_crawl(client, crawl_id) > 0
    assert not client.exists(f"twolevel:{crawl_id}:plans:0")  # plans belong to the crawl
    assert shared.fetches() == [("s/zero", 100.0, 1)]  # the training data stays
    assert clear_history(client, crawl_id) == 1
    assert shared.fetches() == []
