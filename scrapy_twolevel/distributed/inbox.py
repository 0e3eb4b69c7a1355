"""Cross URLs: requests a node found for hosts another node owns, delivered at least once.

Each node has an inbox, the Redis stream ``twolevel:<crawl>:inbox:<node>`` with one
consumer group. A sender appends entries (``host``: the host key, ``data``: the encoded
request, JSON, never pickle) in one pipelined round trip per batch. The owner reads new
entries with ``XREADGROUP``; they stay pending until it acknowledges them (``XACK`` and
``XDEL`` in one round trip), which it does only once they are stored in its own frontier.
So a node that dies between reading and storing loses nothing: on restart under the same
node id, :meth:`Inbox.receive` first hands back what it had read and not acknowledged;
and when the node is reaped instead, :meth:`Inbox.reroute` moves its inbox's entries,
pending or not, to the inboxes of the hosts' new owners.

No Scrapy here: entries are bytes, routing is a callable.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from .keys import crawl_prefix

GROUP = "owner"

#: ARGV: prefix, then node ids. Deletes the inbox of each that is not a member and whose
#: inbox is empty, and takes it off the ``inboxes`` registry; returns how many. In one
#: script, so a node joining meanwhile (a member before it makes its inbox) keeps its own.
PRUNE_SCRIPT = """
local p, n = ARGV[1], 0
for i = 2, #ARGV do
  local node = ARGV[i]
  if redis.call('SISMEMBER', p .. 'members', node) == 0
      and redis.call('XLEN', p .. 'inbox:' .. node) == 0 then
    redis.call('DEL', p .. 'inbox:' .. node)
    redis.call('SREM', p .. 'inboxes', node)
    n = n + 1
  end
end
return n
"""


def prune_inboxes(redis: Any, prefix: str, nodes: Iterable[str]) -> int:
    """Forget the empty inboxes of ``nodes`` that left or were reaped: every process
    under a default node id (host name and pid) adds one, and the idle check reads them
    all."""
    nodes = list(nodes)
    if not nodes:
        return 0
    return int(redis.register_script(PRUNE_SCRIPT)(args=[prefix, *nodes]))


@dataclass(frozen=True)
class Entry:
    """One delivered cross URL: its stream id (to acknowledge), host key and request."""

    id: bytes
    host: str
    data: bytes


class Inbox:
    """One node's inbox, and the sending side for every other node's."""

    def __init__(self, redis: Any, crawl_id: str, node_id: str, *, maxlen: int | None = None):
        self.redis = redis
        self.prefix = crawl_prefix(crawl_id)
        self.node_id = node_id
        self.maxlen = maxlen
        self._recovering = True  # first read what was delivered before and not acknowledged
        self._damaged = 0
        self._ensure_group(node_id)

    def stream(self, node: str) -> str:
        return f"{self.prefix}inbox:{node}"

    def _ensure_group(self, node: str) -> None:
        import redis as redis_lib

        try:
            self.redis.xgroup_create(self.stream(node), GROUP, id="0", mkstream=True)
        except redis_lib.ResponseError as exc:
            if "BUSYGROUP" not in str(exc):
                raise

    def send(self, batch: Iterable[tuple[str, str, bytes]]) -> int:
        """Append ``(node, host, data)`` entries to their nodes' inboxes, one round trip."""
        pipe = self.redis.pipeline(transaction=False)
        count = 0
        for node, host, data in batch:
            pipe.xadd(self.stream(node), {"host": host, "data": data})
            count += 1
        if count:
            pipe.execute()
        return count

    def receive(self, count: int = 500) -> list[Entry]:
        """Up to ``count`` entries: first those read before and not acknowledged (after a
        restart), then new ones. Non-blocking."""
        if self._recovering:
            entries = self._read("0", count)
            if entries:
                return entries
            self._recovering = False
        return self._read(">", count)

    def redeliver(self) -> None:
        """Read what was delivered and not acknowledged again, first (after a failed read
        whose reply may have been lost)."""
        self._recovering = True

    def _read(self, start: str, count: int) -> list[Entry]:
        reply = self.redis.xreadgroup(
            GROUP, self.node_id, {self.stream(self.node_id): start}, count=count
        )
        entries, damaged = [], []
        for _stream, items in reply or ():
            for entry_id, fields in items:
                if not fields:  # deleted after delivery: nothing left to process
                    continue
                try:
                    entries.append(_entry(entry_id, fields))
                except ValueError:
                    damaged.append(entry_id)
        if damaged:
            # Dropped and counted: read again, it would fail every tick for ever.
            pipe = self.redis.pipeline(transaction=True)
            pipe.xack(self.stream(self.node_id), GROUP, *damaged)
            pipe.xdel(self.stream(self.node_id), *damaged)
            pipe.execute()
            self._damaged += len(damaged)
        return entries

    def take_damaged(self) -> int:
        """Damaged entries dropped since the last call."""
        count, self._damaged = self._damaged, 0
        return count

    def ack(self, entries: Iterable[Entry]) -> None:
        """The entries are stored in this node's frontier: drop them from the inbox."""
        ids = [e.id for e in entries]
        if ids:
            pipe = self.redis.pipeline(transaction=True)
            pipe.xack(self.stream(self.node_id), GROUP, *ids)
            pipe.xdel(self.stream(self.node_id), *ids)
            pipe.execute()

    def reroute(self, dead: str, owner_of_host: Callable[[str], str | None]) -> int:
        """Move every entry of node ``dead``'s inbox to its host's owner now; the count moved.

        Each entry is added to the new inbox and deleted from the old one in one
        transaction, so it is in exactly one inbox at any time.
        """
        stream = self.stream(dead)
        moved = 0
        last = "-"
        while True:
            items = self.redis.xrange(stream, min=last, count=500)
            items = [(i, f) for i, f in items if i != last]
            if not items:
                break
            pipe = self.redis.pipeline(transaction=True)
            for entry_id, fields in items:
                entry = _entry(entry_id, fields)
                target = owner_of_host(entry.host)
                if target is None or target == dead:
                    raise ValueError(f"host {entry.host!r} has no live owner to take it")
                pipe.xadd(self.stream(target), {"host": entry.host, "data": entry.data})
                pipe.xdel(stream, entry_id)
                moved += 1
            pipe.execute()
            last = items[-1][0]
        self.redis.delete(stream)
        return moved

    def pending(self) -> int:
        """Entries in this node's inbox not yet acknowledged (read or not)."""
        return int(self.redis.xlen(self.stream(self.node_id)))


def _entry(entry_id: Any, fields: dict[Any, Any]) -> Entry:
    host = fields.get(b"host", fields.get("host"))
    data = fields.get(b"data", fields.get("data"))
    if not isinstance(data, bytes | str) or not isinstance(host, bytes | str):
        raise ValueError(f"inbox entry {entry_id!r} is damaged: {sorted(fields)!r}")
    return Entry(
        entry_id if isinstance(entry_id, bytes) else str(entry_id).encode(),
        host.decode() if isinstance(host, bytes) else host,
        data if isinstance(data, bytes) else data.encode(),
    )
