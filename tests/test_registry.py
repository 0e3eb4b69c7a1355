"""The registry in a real Redis (``TWOLEVEL_REDIS_URL``, default 127.0.0.1:6379/0)."""

from __future__ import annotations

import threading

import pytest
import redis

from scrapy_twolevel.distributed.registry import NotAMember, Registry

pytestmark = pytest.mark.redis


def node(redis_crawl: tuple[redis.Redis, str], name: str, **kwargs) -> Registry:
    client, crawl_id = redis_crawl
    return Registry(client, crawl_id, name, buckets=kwargs.pop("buckets", 1000), **kwargs)


def test_joins_and_a_leave_through_redis(redis_crawl) -> None:
    a, b, c = node(redis_crawl, "a"), node(redis_crawl, "b"), node(redis_crawl, "c")
    assert len(a.join()) == 1000
    assert len(b.join()) == 500
    assert len(c.join()) == 333
    for r in (a, b, c):
        r.refresh()
        r.table.check()
        assert r.table.counts() == {"a": 334, "b": 333, "c": 333}
    assert a.owned() | b.owned() | c.owned() == frozenset(range(1000))
    assert a.owner_of_host("example.com") == c.owner_of_host("example.com")

    held = b.owned()
    moves = b.leave()
    assert sorted(m.bucket for m in moves) == sorted(held)
    assert a.refresh() and c.refresh()
    assert a.table.counts() == {"a": 500, "c": 500}
    with pytest.raises(NotAMember):
        b.heartbeat()
    assert not b.may_dispatch()


def test_a_node_whose_heartbeat_expired_is_reaped_and_told_so(redis_crawl) -> None:
    client, crawl_id = redis_crawl
    a, b = node(redis_crawl, "a"), node(redis_crawl, "b")
    a.join()
    b.join()
    assert a.reap() == {}  # b is alive
    # b's alive key runs out (it stopped, or lost Redis for its whole ttl).
    client.delete(f"twolevel:{crawl_id}:alive:b")
    reaped = a.reap()
    assert set(reaped) == {"b"} and len(reaped["b"]) == 500
    assert a.owned() == frozenset(range(1000))
    # b comes back: it is told it is out, and must not dispatch.
    with pytest.raises(NotAMember):
        b.heartbeat()
    assert not b.may_dispatch()
    assert a.reap() == {}  # nothing more to reap


def test_a_heartbeat_landing_while_a_reap_is_decided_cancels_the_reap(redis_crawl) -> None:
    """The reap is one transaction watching the victim's alive key: a heartbeat that
    lands between the check and the write (here, injected at that exact point through
    the table change the reap computes) aborts it, and the victim keeps its buckets."""
    client, crawl_id = redis_crawl
    a, b = node(redis_crawl, "a"), node(redis_crawl, "b")
    a.join()
    b.join()
    client.delete(f"twolevel:{crawl_id}:alive:b")  # b looks dead...
    decided = []

    class RacingRegistry(Registry):
        @staticmethod
        def _leave(table, node_id):
            if not decided:
                decided.append(node_id)
                b.heartbeat()  # ...and beats while a is deciding to reap it
            return Registry._leave(table, node_id)

    racer = RacingRegistry(client, crawl_id, "a", buckets=1000)
    racer.token = a.token
    assert racer.reap() == {}  # the watched key changed: aborted, then b is alive
    assert decided == ["b"]
    racer.refresh()
    assert racer.table.counts() == {"a": 500, "b": 500}
    b.heartbeat()  # still a member: not told it was reaped


def test_the_last_node_leaving_empties_the_table(redis_crawl) -> None:
    a = node(redis_crawl, "a")
    a.join()
    assert len(a.leave()) == 1000
    b = node(redis_crawl, "b")
    assert len(b.join()) == 1000  # a new redis_crawl under the same id starts from scratch


def test_may_dispatch_only_within_ttl_of_the_last_heartbeat(redis_crawl) -> None:
    now = [100.0]
    a = node(redis_crawl, "a", ttl=10.0, clock=lambda: now[0])
    assert not a.may_dispatch()
    a.join()
    now[0] = 109.9
    assert a.may_dispatch()
    now[0] = 110.0
    assert not a.may_dispatch()  # stop before anyone can reap it
    a.heartbeat()
    assert a.may_dispatch()


def test_concurrent_joins_all_land_with_every_bucket_owned_once(redis_crawl, redis_url) -> None:
    client, crawl_id = redis_crawl
    names = [f"n{i}" for i in range(6)]
    registries = [
        Registry(redis.Redis.from_url(redis_url), crawl_id, n, buckets=997) for n in names
    ]
    barrier = threading.Barrier(len(registries))
    errors: list[BaseException] = []

    def join(r: Registry) -> None:
        try:
            barrier.wait()
            r.join()
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=join, args=(r,)) for r in registries]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    check = Registry(client, crawl_id, "observer", buckets=997)
    check.refresh()
    check.table.check()
    counts = check.table.counts()
    assert sorted(counts) == names
    assert max(counts.values()) - min(counts.values()) <= 1
    assert int(client.get(f"twolevel:{crawl_id}:epoch")) == 6  # one change per join
    for r in registries:
        r.redis.close()


def test_a_node_with_another_bucket_count_is_refused(redis_crawl) -> None:
    node(redis_crawl, "a", buckets=1000).join()
    with pytest.raises(ValueError, match="has 1000 buckets, this node was configured with 64"):
        node(redis_crawl, "b", buckets=64).join()


def test_a_damaged_table_in_redis_is_refused_not_unpickled(redis_crawl) -> None:
    client, crawl_id = redis_crawl
    client.set(f"twolevel:{crawl_id}:table", b"\x80\x04\x95garbage")
    client.set(f"twolevel:{crawl_id}:epoch", 1)
    with pytest.raises(ValueError, match="not a bucket table"):
        node(redis_crawl, "a").refresh()


def test_a_node_is_alive_from_the_moment_it_is_a_member(redis_crawl):
    """A join adds the member and its alive key in one transaction: a reaper running
    right after cannot find it without a heartbeat."""
    client, crawl_id = redis_crawl
    a = Registry(client, crawl_id, "a", buckets=8, ttl=5.0)
    a.join()
    b = Registry(client, crawl_id, "b", buckets=8, ttl=5.0)
    b._change(lambda table: table.join("b"), add="b")  # joined, no heartbeat yet
    assert a.reap() == {}
    assert client.pttl(f"twolevel:{crawl_id}:alive:b") > 0


def test_a_connection_lost_in_the_middle_of_a_change_raises_instead_of_looping(tmp_path):
    """redis-py turns a connection lost while keys are watched into a WatchError; the
    change took it for contention and retried at once, for ever while Redis was away
    (a node joining while its connections were killed hung with nothing in its log). It
    is a connection error now, which the node's retries and warnings handle."""
    from helpers import start_private_redis

    proc, killer = start_private_redis(tmp_path / "redis")
    try:
        port = killer.connection_pool.connection_kwargs["port"]
        client = redis.Redis(port=port)
        kills = []

        class CutOff(Registry):
            @staticmethod
            def _leave(table, node_id):
                if len(kills) < 20:  # then let it through: a loop would end, and fail below
                    kills.append(killer.execute_command("CLIENT KILL TYPE normal SKIPME yes"))
                return Registry._leave(table, node_id)

        Registry(client, "cut", "a", buckets=100).join()
        Registry(client, "cut", "b", buckets=100).join()
        with pytest.raises(redis.ConnectionError, match="while watching"):
            CutOff(client, "cut", "a", buckets=100).leave()
        assert len(kills) == 1  # raised at the first lost connection, not retried
        assert client.sismember("twolevel:cut:members", "a")  # nothing was written
    finally:
        proc.kill()
        proc.wait()


def test_start_up_commands_get_through_a_dropped_connection(redis_url) -> None:
    """A connection killed by the server while a start-up command waits for its reply
    (the fault suite drops every connection twice a second) is tried again; a Redis
    that is not there still fails, with redis-py's error, after START_ATTEMPTS tries."""
    from redis.backoff import NoBackoff
    from redis.retry import Retry

    from scrapy_twolevel.distributed.connect import START_ATTEMPTS, retrying

    # Without redis-py's own retries, which absorb a single drop (not the suite's many).
    client = redis.Redis.from_url(redis_url, retry=Retry(NoBackoff(), 0))
    killer = redis.Redis.from_url(redis_url)
    me = client.client_id()
    calls = []

    def kill_while_blocked() -> None:
        while not any(c["id"] == str(me) and c["cmd"] == "blpop" for c in killer.client_list()):
            pass
        killer.client_kill_filter(_id=me)

    def blocked_then_ping() -> bool:
        calls.append(1)
        if len(calls) == 1:  # killed while it waits: the reply never comes
            client.blpop(["twolevel-test:never-pushed"], timeout=30)
        return client.ping()

    thread = threading.Thread(target=kill_while_blocked, daemon=True)
    thread.start()
    try:
        assert retrying(blocked_then_ping) is True
        assert len(calls) == 2  # the first died with its connection, the second went through
        thread.join()
        nowhere = redis.Redis.from_url("redis://127.0.0.1:1/0", socket_connect_timeout=1)
        tries = []
        with pytest.raises(redis.ConnectionError):
            retrying(lambda: tries.append(1) or nowhere.ping())
        assert len(tries) == START_ATTEMPTS
    finally:
        client.close()
        killer.close()
