"""The node protocol against a real Redis: commits, leases, hand-overs, zombies, idleness.

No Scrapy: :class:`~scrapy_twolevel.distributed.node.Node` objects driven directly, with
a fake clock where time matters. Few buckets, so tests can name them.
"""

from __future__ import annotations

import pytest
from helpers import FEW_BUCKETS, FakeClock, key, node

from scrapy_twolevel.distributed.batch import AfterCommit, Batch
from scrapy_twolevel.distributed.buckets import bucket_of
from scrapy_twolevel.distributed.node import Node, clear_crawl, status
from scrapy_twolevel.distributed.registry import IdTaken, StateLost

pytestmark = pytest.mark.redis


def host_in(bucket: int) -> str:
    """A host name whose bucket is ``bucket``."""
    return next(f"h{i}.test" for i in range(1000) if bucket_of(f"h{i}.test", FEW_BUCKETS) == bucket)


def pending(client, crawl_id, bucket):
    return {k.decode(): v for k, v in client.hgetall(f"twolevel:{crawl_id}:q:{bucket}").items()}


def test_holder_commits_children_and_releases_leases_atomically(redis_crawl):
    client, crawl_id = redis_crawl
    a = node(client, crawl_id, "a")
    first = a.sync(Batch())
    assert set(first.acquired) == set(range(FEW_BUCKETS))  # the first node takes everything
    result = a.sync(Batch(stores=[(0, "e1", b"req1", key(1)), (0, "e2", b"req2", key(2))]))
    assert result.stored == 2 and result.refused == 0
    assert pending(client, crawl_id, 0) == {"e1": b"req1", "e2": b"req2"}
    # e1's page is done; its child e3 is stored in the same commit.
    a.sync(Batch(stores=[(0, "e3", b"req3", key(3))], dones=[(0, "e1")]))
    assert pending(client, crawl_id, 0) == {"e2": b"req2", "e3": b"req3"}
    assert a.seen_log.load(0) == {key(1), key(2), key(3)}


def test_bucket_moves_only_after_its_holder_released_it(redis_crawl):
    client, crawl_id = redis_crawl
    a = node(client, crawl_id, "a")
    a.sync(Batch())
    a.sync(Batch(stores=[(b, f"e{b}", b"r%d" % b, key(b)) for b in range(FEW_BUCKETS)]))
    b = node(client, crawl_id, "b")
    moved = sorted(b.registry.owned())
    assert len(moved) == FEW_BUCKETS // 2
    # a still holds them (its requests in flight may still commit): b must wait.
    assert b.sync(Batch()).acquired == {}
    seen_by_a = a.sync(Batch(dones=[(moved[0], f"e{moved[0]}")]))
    assert seen_by_a.owned == frozenset(set(range(FEW_BUCKETS)) - set(moved))
    a.sync(Batch(release=moved))
    taken = b.sync(Batch()).acquired
    assert sorted(taken) == moved
    # The finished request is gone; the queued one, with the seen keys, moved over.
    assert taken[moved[0]] == ([], [key(moved[0])])
    assert taken[moved[1]] == ([(f"e{moved[1]}", b"r%d" % moved[1])], [key(moved[1])])
    # From now on a's writes to those buckets are refused: they are b's.
    late = a.sync(Batch(stores=[(moved[1], "x", b"x", key(99))], dones=[(moved[1], "e1")]))
    assert late.refused == 2
    assert pending(client, crawl_id, moved[1]) == {f"e{moved[1]}": b"r%d" % moved[1]}


def two_nodes_a_holding_a_request(client, crawl_id, entry):
    """Node a (first: every bucket) with ``entry`` stored in bucket 0, then node b; their
    clocks (a ttl of 2 s)."""
    clock_a, clock_b = FakeClock(1000.0), FakeClock(1000.0)
    a = node(client, crawl_id, "a", clock_a, ttl=2.0)
    a.sync(Batch())
    a.sync(Batch(stores=[(0, *entry, key(1))]))
    b = node(client, crawl_id, "b", clock_b, ttl=2.0)
    return a, b, clock_a, clock_b


def test_reaped_node_cannot_commit_and_joins_again(redis_crawl):
    client, crawl_id = redis_crawl
    a, b, clock_a, clock_b = two_nodes_a_holding_a_request(
        client, crawl_id, ("lease", b"in flight")
    )
    b.sync(Batch())
    # a is paused: no heartbeat; after its ttl it may not dispatch, and b reaps it.
    clock_a.now += 1.5
    assert not a.may_dispatch()
    client.delete(f"twolevel:{crawl_id}:alive:a")  # its key expired
    clock_b.now += 5
    reaped = b.sync(Batch())
    assert reaped.reaped == ["a"]
    assert 0 in reaped.acquired  # b took a's buckets, lease included
    assert reaped.acquired[0][0] == [("lease", b"in flight")]
    # a wakes up and tries to commit the page it had in flight: refused, it joins again.
    clock_a.now += 5
    late = a.sync(Batch(stores=[(0, "child", b"c", key(2))], dones=[(0, "lease")]))
    assert late.rejoined
    assert pending(client, crawl_id, 0) == {"lease": b"in flight"}
    assert a.registry.table.nodes == ["a", "b"]
    # Its heartbeat is fresh again, but its scheduler still holds the stale buckets'
    # requests until it has dropped them: no dispatching in between (two nodes at a host).
    assert not a.may_dispatch()
    a.rejoins_applied = a.rejoins  # what the scheduler sets once it has forgotten
    assert a.may_dispatch()


def test_reaped_node_rejoining_first_does_not_block_the_new_owner(redis_crawl):
    client, crawl_id = redis_crawl
    clock_a, clock_b = FakeClock(1000.0), FakeClock(1000.0)
    a = node(client, crawl_id, "a", clock_a, ttl=2.0)
    a.sync(Batch())
    b = node(client, crawl_id, "b", clock_b, ttl=2.0)
    client.delete(f"twolevel:{crawl_id}:alive:a")
    b.registry.reap()  # reaped, but b has not taken a's buckets yet...
    clock_a.now += 5
    assert a.sync(Batch()).rejoined  # ...when a is back, a member again
    taken = b.sync(Batch()).acquired
    assert len(b.registry.owned()) == FEW_BUCKETS // 2  # a took half back when it rejoined
    assert set(taken) == set(b.registry.owned())  # not blocked by a's old holds


def test_node_restarted_under_its_id_resumes_its_leases(redis_crawl):
    client, crawl_id = redis_crawl
    a = node(client, crawl_id, "a")
    a.sync(Batch())
    a.sync(Batch(stores=[(0, "lease", b"in flight", key(1))]))
    # Killed and restarted at once (before anyone reaped it), under the same id.
    again = node(client, crawl_id, "a")
    taken = again.sync(Batch()).acquired
    assert set(taken) == set(range(FEW_BUCKETS))
    assert taken[0] == ([("lease", b"in flight")], [key(1)])


def test_commit_of_a_non_member_is_refused_whole(redis_crawl):
    client, crawl_id = redis_crawl
    a = node(client, crawl_id, "a")
    a.sync(Batch())
    client.srem(f"twolevel:{crawl_id}:members", "a")
    reply = a._commit(args=[a.prefix, "a", 1, 0, 0, 0, 0, "e", b"r", key(1)])
    assert reply[0] == -1
    assert pending(client, crawl_id, 0) == {}


def test_cross_urls_reach_the_owner_and_wait_in_its_inbox(redis_crawl):
    client, crawl_id = redis_crawl
    a = node(client, crawl_id, "a")
    a.sync(Batch())
    b = node(client, crawl_id, "b")
    a.sync(Batch(release=sorted(b.registry.owned())))
    b.sync(Batch())
    bucket = min(b.registry.owned())
    host = host_in(bucket)
    sent = a.sync(Batch(routes=[(bucket, host, b"cross")]))
    assert sent.routed == 1
    received = b.sync(Batch()).received
    assert [(e.host, e.data) for e in received] == [(host, b"cross")]
    assert not b.crawl_idle()  # unacknowledged: still work in the crawl
    b.sync(Batch(stores=[(bucket, "e", b"cross", key(5))], acks=[received[0].id]))
    assert b.inbox is not None and b.inbox.pending() == 0
    assert not b.crawl_idle()  # now queued in the bucket
    b.sync(Batch(dones=[(bucket, "e")]))
    assert b.crawl_idle()


def test_route_to_a_node_that_left_is_sent_to_the_new_owner(redis_crawl):
    client, crawl_id = redis_crawl
    a = node(client, crawl_id, "a")
    a.sync(Batch())
    b = node(client, crawl_id, "b")
    bucket = min(b.registry.owned())
    a.registry.refresh()
    assert a.registry.table.owner(bucket) == "b"
    b.leave()  # a's table is stale now: it still says b
    sent = a.sync(Batch(routes=[(bucket, host_in(bucket), b"late")]))
    assert sent.routed == 1
    assert a.inbox is not None and a.inbox.pending() == 1  # bounced to the live owner: a


def test_status_reports_nodes_buckets_and_pending(redis_crawl):
    client, crawl_id = redis_crawl
    a = node(client, crawl_id, "a")
    a.sync(Batch())
    a.sync(Batch(stores=[(0, "e1", b"r", key(1)), (1, "e2", b"r", key(2))]))
    report = status(client, crawl_id)
    assert report["buckets"] == FEW_BUCKETS
    assert report["pending"] == 2
    assert report["nodes"]["a"]["alive"] is True
    assert report["nodes"]["a"]["buckets_owned"] == FEW_BUCKETS
    assert report["nodes"]["a"]["pending"] == 2
    assert clear_crawl(client, crawl_id) > 0
    assert status(client, crawl_id)["nodes"] == {}


def test_last_node_keeps_the_crawl_and_a_later_node_resumes_it(redis_crawl):
    client, crawl_id = redis_crawl
    a = node(client, crawl_id, "a")
    a.sync(Batch())
    a.sync(Batch(stores=[(0, "e1", b"r", key(1))]))
    a.leave()
    assert client.get(f"twolevel:{crawl_id}:table") is None  # nobody owns anything
    b = node(client, crawl_id, "b")
    taken = b.sync(Batch()).acquired
    assert taken[0] == ([("e1", b"r")], [key(1)])  # the pending request and its seen key
    assert not b.crawl_idle()
    b.sync(Batch(dones=[(0, "e1")]))
    assert b.crawl_idle()


def test_orphaned_inbox_is_rerouted_by_the_idle_check(redis_crawl):
    client, crawl_id = redis_crawl
    a = node(client, crawl_id, "a")
    a.sync(Batch())
    b = node(client, crawl_id, "b")
    bucket = min(b.registry.owned())
    a.sync(Batch(routes=[(bucket, host_in(bucket), b"for b")]))
    # b vanishes from the crawl without its inbox being rerouted (its reaper died).
    client.srem(f"twolevel:{crawl_id}:members", "b")
    a.registry._change(lambda table: table.leave("b"))
    assert not a.crawl_idle()  # an entry waits where nobody reads...
    assert a.inbox is not None and a.inbox.pending() == 1  # ...so it was moved to a
    assert [e.data for e in a.sync(Batch()).received] == [b"for b"]


def test_the_idle_check_forgets_the_empty_inboxes_of_nodes_gone(redis_crawl):
    """Every process under a default node id added an inbox to the registry for good; the
    idle check read them all. Now a node that leaves forgets its own empty inbox, the
    idle check forgets the empty inbox of a node gone without leaving, and a member's, or
    one with entries, is kept."""
    client, crawl_id = redis_crawl
    inboxes = f"twolevel:{crawl_id}:inboxes"

    def registered():
        return {m.decode() for m in client.smembers(inboxes)}

    a = node(client, crawl_id, "a")
    a.sync(Batch())
    b, c, _d = (node(client, crawl_id, name) for name in "bcd")
    bucket = min(c.registry.owned())
    a.sync(Batch(routes=[(bucket, host_in(bucket), b"for c")]))
    b.leave()
    assert registered() == {"a", "c", "d"}
    for gone in "cd":  # gone without leaving, their inboxes not rerouted
        client.srem(f"twolevel:{crawl_id}:members", gone)
        a.registry._change(lambda table, gone=gone: table.leave(gone))
    assert not a.crawl_idle()  # c's entry is moved to a; d's empty inbox is forgotten
    assert registered() == {"a", "c"}
    assert not client.exists(f"twolevel:{crawl_id}:inbox:d")
    received = a.sync(Batch()).received  # takes the buckets and receives the entry
    a.crawl_idle()
    assert registered() == {"a"}  # c's is empty now
    a.sync(Batch(acks=[e.id for e in received]))  # stored: its inbox is empty
    a.leave()  # the last node: nobody's idle check would forget its inbox
    assert not client.exists(inboxes) and not client.exists(f"twolevel:{crawl_id}:inbox:a")


def test_a_damaged_seen_log_is_counted_and_its_bucket_still_loads(redis_crawl):
    """Raising here failed every tick for ever (the bucket was never loaded, the crawl
    never ended); now the bucket loads without its seen keys (its pages may be fetched
    again, none is lost) and the damage is reported."""
    client, crawl_id = redis_crawl
    a = node(client, crawl_id, "a")
    a.sync(Batch())
    a.sync(Batch(stores=[(0, "e1", b"req1", key(1))]))
    client.set(f"twolevel:{crawl_id}:seen:0", b"not 16 bytes")
    restarted = node(client, crawl_id, "a")  # frees its holds, loads them again
    result = restarted.sync(Batch())
    assert result.damaged_seen == [0]
    assert result.acquired[0] == ([("e1", b"req1")], [])
    assert restarted.sync(Batch()).damaged_seen == []  # held now: not read again


def break_inbox(client, crawl_id, name):
    """Make the node's inbox stream a string: every read of it fails (WRONGTYPE)."""
    client.delete(f"twolevel:{crawl_id}:inbox:{name}")
    client.set(f"twolevel:{crawl_id}:inbox:{name}", "not a stream")


def mend_inbox(client, crawl_id, n):
    client.delete(f"twolevel:{crawl_id}:inbox:{n.node_id}")
    n.inbox._ensure_group(n.node_id)


def test_buckets_taken_by_a_tick_that_then_fails_are_taken_and_loaded_again(redis_crawl):
    """They used to be recorded as held before the tick was known to succeed: never
    loaded, their hosts never crawled, the crawl never ended."""
    client, crawl_id = redis_crawl
    a = node(client, crawl_id, "a")
    a.sync(Batch())
    a.sync(Batch(stores=[(0, "e1", b"req1", key(1))]))
    restarted = node(client, crawl_id, "a")
    break_inbox(client, crawl_id, "a")
    with pytest.raises(AfterCommit):
        restarted.sync(Batch())
    assert restarted.held == set()
    mend_inbox(client, crawl_id, restarted)
    result = restarted.sync(Batch())
    assert set(result.acquired) == set(range(FEW_BUCKETS))
    assert result.acquired[0] == ([("e1", b"req1")], [key(1)])
    assert restarted.held == set(range(FEW_BUCKETS))


def test_buckets_a_failed_tick_took_are_released_if_they_move_meanwhile(redis_crawl):
    """A tick takes every bucket, then fails (its reply lost, at start-up under dropped
    connections): they are held in Redis, unknown to the node. Another node joins and
    is given half; the next tick releases that half, so it can take them. Before, they
    stayed held by a node that did not know it, and their hosts were never crawled."""
    client, crawl_id = redis_crawl
    a = node(client, crawl_id, "a")
    break_inbox(client, crawl_id, "a")
    with pytest.raises(AfterCommit):
        a.sync(Batch())
    assert a.held == set() and a.unconfirmed == set(range(FEW_BUCKETS))
    b = node(client, crawl_id, "b")
    theirs = b.registry.owned()
    assert 0 < len(theirs) < FEW_BUCKETS
    assert b.sync(Batch()).acquired == {}  # still held by a, in Redis
    mend_inbox(client, crawl_id, a)
    result = a.sync(Batch())
    assert set(result.acquired) == set(range(FEW_BUCKETS)) - theirs
    assert a.unconfirmed == set()
    assert set(b.sync(Batch()).acquired) == theirs


def test_a_tick_failing_after_its_commit_asks_to_send_only_what_it_had_not_done(redis_crawl):
    """Sending the whole batch again appended every seen key and cross URL a second time,
    and a persistent fault did so on every tick."""
    client, crawl_id = redis_crawl
    a = node(client, crawl_id, "a")
    b = node(client, crawl_id, "b")
    a.sync(Batch())
    b.sync(Batch())
    mine = sorted(a.registry.owned())
    theirs = sorted(b.registry.owned())
    a.sync(Batch())
    break_inbox(client, crawl_id, "a")
    batch = Batch(
        stores=[(mine[0], "e1", b"req1", key(1))],
        routes=[(theirs[0], host_in(theirs[0]), b"cross")],
        release=[],
    )
    with pytest.raises(AfterCommit) as failed:
        a.sync(batch)
    assert not failed.value.remaining  # the commit went through: nothing to send again
    assert client.strlen(f"twolevel:{crawl_id}:seen:{mine[0]}") == 16
    assert client.xlen(f"twolevel:{crawl_id}:inbox:b") == 1
    mend_inbox(client, crawl_id, a)
    a.sync(failed.value.remaining)
    assert client.strlen(f"twolevel:{crawl_id}:seen:{mine[0]}") == 16
    assert client.xlen(f"twolevel:{crawl_id}:inbox:b") == 1


def test_a_damaged_inbox_entry_is_dropped_and_counted_not_read_for_ever(redis_crawl):
    client, crawl_id = redis_crawl
    a = node(client, crawl_id, "a")
    a.sync(Batch())
    stream = f"twolevel:{crawl_id}:inbox:a"
    client.xadd(stream, {"host": "h.test"})  # no data
    client.xadd(stream, {"host": "h.test", "data": b"ok"})
    result = a.sync(Batch())
    assert [e.data for e in result.received] == [b"ok"]
    assert result.damaged_entries == 1
    assert client.xlen(stream) == 1  # the damaged one is gone; the good one awaits its ack
    assert a.sync(Batch()).damaged_entries == 0


def test_leader_rebalances_by_pending_requests_through_hand_overs(redis_crawl):
    client, crawl_id = redis_crawl
    clocks = {"a": FakeClock(1000.0), "b": FakeClock(1000.0)}
    nodes = {}
    for name in "ab":
        nodes[name] = Node(
            client, crawl_id, name, buckets=FEW_BUCKETS, ttl=10.0, rebalance_every=5.0,
            rebalance_tolerance=0.25, clock=clocks[name],
        )  # fmt: skip
        nodes[name].join()
    a, b = nodes["a"], nodes["b"]
    a.sync(Batch())
    a.sync(Batch(release=[2, 3]))  # b's share of the join: a's highest buckets
    assert set(b.sync(Batch()).acquired) == {2, 3}
    # a has 9 requests pending (6 in bucket 0, 3 in bucket 1), b has 1.
    stores = [(0, f"e0-{i}", b"r", key(i)) for i in range(6)]
    stores += [(1, f"e1-{i}", b"r", key(10 + i)) for i in range(3)]
    a.sync(Batch(stores=stores))
    b.sync(Batch(stores=[(2, "e2", b"r", key(20))]))
    assert a.bucket_load() == {0: 6, 1: 3, 2: 1}
    assert a.leads() and not b.leads()
    # Not before the interval; never by a node that does not lead.
    assert a.sync(Batch()).rebalanced == 0
    clocks["b"].now += 5
    assert b.sync(Batch()).rebalanced == 0
    clocks["a"].now += 5
    moved = a.sync(Batch())
    # One move at most (M / (4 n) = 4 / 8, at least 1): bucket 1, whose load 3 is the
    # nearest to half the gap of 8. That leaves 6 against 4.
    assert moved.rebalanced == 1
    assert moved.owned == frozenset({0})
    # An ordinary hand-over: b takes bucket 1 only once a released it, with its requests.
    assert 1 not in b.sync(Batch()).acquired
    a.sync(Batch(release=[1]))
    taken = b.sync(Batch())
    assert set(taken.acquired) == {1}
    assert sorted(taken.acquired[1][0]) == [(f"e1-{i}", b"r") for i in range(3)]
    # The gap of 2 is above the tolerance (a quarter of the mean, 1.25), but a's only
    # bucket holds 6, not below the gap: moving it would only swap the roles. Nothing moves.
    clocks["a"].now += 5
    assert a.sync(Batch()).rebalanced == 0


def test_bucket_load_counts_a_large_bucket_up_to_the_cap(redis_crawl):
    from scrapy_twolevel.distributed.buckets import LOAD_CAP

    client, crawl_id = redis_crawl
    a = node(client, crawl_id, "a")
    client.hset(f"twolevel:{crawl_id}:q:1", mapping={f"e{i}": b"r" for i in range(LOAD_CAP + 5)})
    client.hset(f"twolevel:{crawl_id}:q:2", mapping={"e": b"r"})
    assert a.bucket_load() == {1: LOAD_CAP, 2: 1}


def test_a_node_that_finds_its_crawl_gone_from_redis_stops_and_writes_nothing(redis_crawl):
    """Redis restarted without persistence (or the crawl was reset) mid-crawl: rejoining
    would start the crawl afresh under its old id and fetch everything again."""
    client, crawl_id = redis_crawl
    clock = FakeClock(1000.0)
    a = node(client, crawl_id, "a", clock)
    a.sync(Batch())
    a.sync(Batch(stores=[(0, "e1", b"req1", key(1))]))
    clear_crawl(client, crawl_id)  # what a restart without persistence leaves
    clock.now += 5  # the next heartbeat is due
    with pytest.raises(StateLost, match="gone from Redis"):
        a.sync(Batch(stores=[(0, "e2", b"req2", key(2))]))
    assert a.lost and not a.may_dispatch()
    a.flush(Batch(stores=[(0, "e3", b"req3", key(3))]))
    a.leave()
    assert not list(client.scan_iter(f"twolevel:{crawl_id}:*"))  # nothing written again


def test_two_processes_under_one_node_id_the_newer_keeps_it_the_older_stops(redis_crawl):
    """Both used to dispatch and commit (two nodes at one host). The newer process takes
    the id (a restart after kill -9 goes on at once); the older one is fenced at its next
    commit or heartbeat, and leaves nothing behind that would disturb the newer one."""
    client, crawl_id = redis_crawl
    clock = FakeClock(1000.0)
    older = node(client, crawl_id, "a", clock)
    older.sync(Batch())
    newer = node(client, crawl_id, "a", FakeClock(1000.0))
    newer.sync(Batch())
    with pytest.raises(IdTaken, match="another process has joined"):
        older.sync(Batch(stores=[(0, "late", b"x", key(1))]))  # fenced by the commit
    assert "late" not in pending(client, crawl_id, 0)
    clock.now += 5  # a heartbeat is due: fenced there too
    with pytest.raises(IdTaken):
        older.sync(Batch())
    assert older.lost and not older.may_dispatch()
    older.leave()  # writes nothing: the id, its buckets and its inbox are the newer one's
    assert client.sismember(f"twolevel:{crawl_id}:members", "a")
    assert newer.sync(Batch(stores=[(0, "e1", b"r", key(2))])).stored == 1


def test_a_reaped_node_rejoins_though_the_last_node_left_meanwhile(redis_crawl):
    """The table goes when the last node leaves, but the crawl is still in Redis: a node
    reaped before that must join again and go on, not take it for a lost crawl."""
    client, crawl_id = redis_crawl
    a, b, clock_a, clock_b = two_nodes_a_holding_a_request(client, crawl_id, ("e1", b"req1"))
    client.delete(f"twolevel:{crawl_id}:alive:a")  # a is paused past its ttl
    clock_b.now += 5
    assert b.sync(Batch()).reaped == ["a"]
    b.leave()  # the last member: the table goes, the crawl's requests stay
    assert not client.exists(f"twolevel:{crawl_id}:table")
    clock_a.now += 5
    back = a.sync(Batch())
    assert back.rejoined and not a.lost
    assert back.acquired[0][0] == [("e1", b"req1")]  # it goes on with the crawl


def test_a_seen_log_with_duplicates_is_compacted_by_the_node_that_takes_it(redis_crawl):
    """Keys appended twice (batches sent again after a lost reply, pages fetched again
    after a crash) grew a bucket's seen log for ever; its next holder rewrites it."""
    client, crawl_id = redis_crawl
    a = node(client, crawl_id, "a")
    a.sync(Batch())
    stores = [(0, f"e{i}", b"req", key(i % 3)) for i in range(6)]  # 3 keys, each twice
    a.sync(Batch(stores=stores))
    seen_key = f"twolevel:{crawl_id}:seen:0"
    assert client.strlen(seen_key) == 6 * 16
    restarted = node(client, crawl_id, "a")
    result = restarted.sync(Batch())
    assert result.seen_compacted == 3
    assert client.strlen(seen_key) == 3 * 16
    assert sorted(result.acquired[0][1]) == [key(0), key(1), key(2)]
    # Few duplicates are left as they are: 1 in 9 is under the eighth that pays a rewrite.
    restarted.sync(Batch(stores=[(0, "e9", b"req", key(i)) for i in range(3, 9)]))
    restarted.sync(Batch(stores=[(0, "e10", b"req", key(0))]))
    again = node(client, crawl_id, "a").sync(Batch())
    assert again.seen_compacted == 0
    assert client.strlen(seen_key) == 10 * 16


def test_a_store_with_an_empty_key_appends_nothing(redis_crawl):
    """A dont_filter request whose key is seen (a recrawled seed) is stored with no key:
    the seen log does not grow by 16 bytes per refetch."""
    client, crawl_id = redis_crawl
    a = node(client, crawl_id, "a")
    a.sync(Batch())
    a.sync(Batch(stores=[(0, "e1", b"req", key(1))]))
    result = a.sync(Batch(stores=[(0, "e2", b"req", b"")]))
    assert result.stored == 1
    assert client.strlen(f"twolevel:{crawl_id}:seen:0") == 16
    assert set(pending(client, crawl_id, 0)) == {"e1", "e2"}


def test_page_counts_are_committed_by_the_holder_and_move_with_their_bucket(redis_crawl):
    """``pages:<bucket>``: host -> pages given, for budgeted hosts; written by the holder
    only, read by the bucket's next holder with its seen keys (even a bucket that has
    none), deleted with the crawl."""
    client, crawl_id = redis_crawl
    a = node(client, crawl_id, "a")
    a.sync(Batch())
    b = node(client, crawl_id, "b")
    one, two = moved = sorted(b.registry.owned())  # a still holds them until it releases
    h1, h2 = host_in(one), host_in(two)
    result = a.sync(Batch(stores=[(one, "e1", b"r1", key(1))], pages={(one, h1): 2}))
    assert result.refused == 0
    a.sync(Batch(pages={(one, h1): 3, (two, h2): 1}))  # the latest count; two has no seen key
    assert client.hgetall(f"twolevel:{crawl_id}:pages:{one}") == {h1.encode(): b"3"}
    # A batch that failed and is sent again in front of a later one keeps the larger counts.
    later = Batch(pages={(one, h1): 4})
    later.prepend(Batch(pages={(one, h1): 3, (two, h2): 2}))
    assert later.pages == {(one, h1): 4, (two, h2): 2}
    a.sync(Batch(release=moved))
    taken = b.sync(Batch())
    assert sorted(taken.acquired) == moved
    assert taken.pages == {one: {h1: 3}, two: {h2: 1}}
    assert taken.acquired[one] == ([("e1", b"r1")], [key(1)])
    assert taken.acquired[two] == ([], [])
    # a no longer holds them: its counts for them are refused.
    late = a.sync(Batch(pages={(one, "late.test"): 9, (two, "late.test"): 9}))
    assert late.refused == 2
    assert not client.hexists(f"twolevel:{crawl_id}:pages:{one}", "late.test")
    b.leave()
    a.leave()
    clear_crawl(client, crawl_id)  # `scrapy twolevel reset`: the counts go with the rest
    assert not list(client.scan_iter(f"twolevel:{crawl_id}:pages:*"))
