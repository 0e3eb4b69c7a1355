"""Cross-URL inboxes in a real Redis: at-least-once delivery, recovery, rerouting."""

from __future__ import annotations

import pytest

from scrapy_twolevel.distributed.inbox import Inbox

pytestmark = pytest.mark.redis


def test_sent_entries_arrive_once_and_leave_when_acknowledged(redis_crawl) -> None:
    client, crawl_id = redis_crawl
    a, b = Inbox(client, crawl_id, "a"), Inbox(client, crawl_id, "b")
    sent = a.send([("b", f"h{i}.test", f"req{i}".encode()) for i in range(5)])
    assert sent == 5 and a.send([]) == 0
    got = b.receive(count=3)
    assert [(e.host, e.data) for e in got] == [(f"h{i}.test", f"req{i}".encode()) for i in range(3)]
    rest = b.receive()
    assert [e.data for e in rest] == [b"req3", b"req4"]
    assert b.receive() == []  # nothing new, nothing delivered twice
    assert b.pending() == 5  # read, not acknowledged
    b.ack(got + rest)
    assert b.pending() == 0
    assert a.receive() == []


def test_a_node_that_died_before_acknowledging_gets_its_entries_again(redis_crawl) -> None:
    client, crawl_id = redis_crawl
    Inbox(client, crawl_id, "a").send([("b", "h.test", b"r1"), ("b", "h.test", b"r2")])
    first = Inbox(client, crawl_id, "b")
    assert [e.data for e in first.receive()] == [b"r1", b"r2"]
    # b dies here, before storing them; it restarts under the same node id.
    again = Inbox(client, crawl_id, "b")
    Inbox(client, crawl_id, "a").send([("b", "h.test", b"r3")])
    recovered = again.receive()
    assert [e.data for e in recovered] == [b"r1", b"r2"]
    again.ack(recovered)
    assert [e.data for e in again.receive()] == [b"r3"]


def test_a_reaped_nodes_inbox_goes_to_the_new_owners(redis_crawl) -> None:
    client, crawl_id = redis_crawl
    sender = Inbox(client, crawl_id, "s")
    sender.send([("dead", f"h{i}.test", f"r{i}".encode()) for i in range(1200)])
    dead = Inbox(client, crawl_id, "dead")
    read = dead.receive(count=10)  # some read (pending), most not
    assert len(read) == 10
    owner = {f"h{i}.test": ("x" if i % 2 else "y") for i in range(1200)}
    x, y = Inbox(client, crawl_id, "x"), Inbox(client, crawl_id, "y")
    assert sender.reroute("dead", owner.get) == 1200
    got_x = x.receive(count=2000)
    got_y = y.receive(count=2000)
    assert sorted(e.data for e in got_x + got_y) == sorted(f"r{i}".encode() for i in range(1200))
    assert all(owner[e.host] == "x" for e in got_x)
    assert all(owner[e.host] == "y" for e in got_y)
    assert not client.exists(f"twolevel:{crawl_id}:inbox:dead")


def test_rerouting_to_a_dead_owner_is_refused(redis_crawl) -> None:
    client, crawl_id = redis_crawl
    inbox = Inbox(client, crawl_id, "s")
    inbox.send([("dead", "h.test", b"r")])
    with pytest.raises(ValueError, match="no live owner"):
        inbox.reroute("dead", lambda host: "dead")
    assert client.xlen(f"twolevel:{crawl_id}:inbox:dead") == 1  # nothing lost


def test_a_damaged_entry_is_dropped_and_counted_never_decoded(redis_crawl) -> None:
    """Refusing it failed every later read as well (it stays first in the stream)."""
    client, crawl_id = redis_crawl
    b = Inbox(client, crawl_id, "b")
    client.xadd(f"twolevel:{crawl_id}:inbox:b", {"junk": b"\x80\x04"})
    assert b.receive() == []
    assert b.take_damaged() == 1 and b.take_damaged() == 0
    assert client.xlen(f"twolevel:{crawl_id}:inbox:b") == 0
